"""The CLI and the GPU capture path import nothing heavy: the bare GPU machine lacks tensor_layouts."""

import subprocess
import sys

BLOCK = ("import sys, importlib.abc\n"
         "class Block(importlib.abc.MetaPathFinder):\n"
         "    def find_spec(self, name, path, target=None):\n"
         "        if name.split('.')[0] in ('tensor_layouts', 'matplotlib', 'cupy', 'torch', 'simpy'):\n"
         "            raise ImportError('blocked: ' + name)\n"
         "sys.meta_path.insert(0, Block())\n")


def run(code):
    return subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True, text=True)


def test_cli_parser_and_capture_modules_import_without_heavy_packages():
    r = run("from lapis.cli.parser import build_parser; build_parser().parse_args(['capture', 'tma', '--out', 'x'])\n"
            "import lapis.gpu.capture_tma, lapis.layouts.tma, lapis.layouts.tma.rules\n")
    assert r.returncode == 0, r.stderr


def test_capture_without_gpu_says_what_it_needs():
    r = run("from lapis.cli import main; raise SystemExit(main(['capture', 'tma', '--out', '/tmp/none']))\n")
    assert r.returncode == 2 and "needs an NVIDIA GPU with compute capability 9.0+" in r.stderr


def test_micro_and_gemm_captures_without_gpu_say_what_they_need():
    for campaign in ("micro", "gemm"):
        r = run(f"from lapis.cli import main; raise SystemExit(main(['capture', '{campaign}', '--out', '/tmp/none']))\n")
        assert r.returncode == 2 and f"lapis capture {campaign}: needs an NVIDIA GPU with compute capability 9.0+" \
            in r.stderr, r.stderr


def test_micro_capture_imports_without_heavy_packages():
    r = run("import lapis.gpu.capture_micro, lapis.model.micro_campaign\n")
    assert r.returncode == 0, r.stderr


def test_attention_gpu_modules_import_without_heavy_packages():
    r = run("import lapis.gpu.bench_attention, lapis.gpu.sanitize_attention, lapis.gpu.attention_plan as p\n"
            "assert p.load()['head_dim'] == 128\n"
            "assert lapis.gpu.bench_attention.main(['--sources']) == 0\n")
    assert r.returncode == 0, r.stderr

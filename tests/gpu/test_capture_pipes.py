"""CPU checks of the pipes microbenchmark (lapis/gpu/capture_pipes.py, kernels/micro_pipes.cu): the campaign, the
instruction arithmetic, and that every kernel's loop issues the intended SASS instruction and little else."""

import shutil
import subprocess
from collections import Counter

import pytest

from lapis.gpu import capture_pipes as cp
from lapis.gpu import harness
from lapis.model import sass, smsp


def test_campaign_names():
    names = [m["name"] for m in cp.items()]
    assert len(names) == len(set(names)) == 12 * 6
    assert "pipes.hmma.tput.w16" in names and "pipes.ex2.lat" in names
    assert {m["cls"] for m in cp.items()} >= set(smsp.PIPE_CLASS.values())  # every pipe the model reads


def test_instructions_per_cta():
    # 4 warps x 2048 iterations x 8 steps x 8 chains; ex2 has 4 chains; two PTX adds make one IADD3
    assert cp.instructions_per_cta("ffma", 128, 2048) == 4 * 2048 * 8 * 8
    assert cp.instructions_per_cta("ex2", 128, 2048) == 4 * 2048 * 8 * 4
    assert cp.instructions_per_cta("iadd3", 1024, 1) == 32 * 8 * 8 / 2


def test_no_gpu_is_exit_2(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(harness, "gpu_present", lambda: False)
    assert cp.main(["--out", str(tmp_path)]) == 2
    assert "sm_90a" in capsys.readouterr().err


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    cubin = tmp_path_factory.mktemp("pipes") / "micro_pipes.cubin"
    subprocess.run(cp.NVCC + ["-o", str(cubin), str(cp.KERNEL)], check=True, timeout=600)
    return sass.parse_cuobjdump(subprocess.run([smsp._tool("cuobjdump"), "-sass", str(cubin)], check=True,
                                               capture_output=True, text=True).stdout)


@pytest.mark.parametrize("cls", cp.CLASSES)
@pytest.mark.parametrize("kind", ("tput", "lat"))
def test_loop_issues_the_intended_instruction(kernels, cls, kind):
    instrs = kernels[f"micro_pipes_{cls}_{kind}"]
    lp = max(sass.loops(instrs), key=lambda x: x.tail - x.head)
    body = [instrs[k] for k in sass.loop_body(instrs, lp)]
    ops = Counter(".".join((i.opcode, *i.modifiers)) for i in body)
    n = ops[cp.SASS_OPCODE[cls]]
    # per PTX loop iteration: UNROLL steps x chains (tput) or UNROLL steps (lat); ptxas may unroll the loop k times
    per_iteration = cp.UNROLL * (cp.CHAINS.get(cls, 8) if kind == "tput" else 1) * cp.SASS_PER_STEP.get(cls, 1.0)
    assert n > 0 and n % per_iteration == 0, (cls, kind, ops)
    others = {op: c for op, c in ops.items() if op != cp.SASS_OPCODE[cls] and op.split(".")[0] not in
              ("BRA", "ISETP", "IADD3", "VIADD", "NOP", "IMAD", "MOV", "HFMA2")}  # loop control, HMMA's pad
    assert sum(others.values()) == 0, (cls, kind, others)
    if kind == "lat":  # one dependent chain: LAT_LINKS_PER_STEP links per PTX step (ldsm: LDSM + its add)
        steps = n / cp.SASS_PER_STEP.get(cls, 1.0)
        links = 2 if cls == "ldsm" else cp.LAT_LINKS_PER_STEP.get(cls, 1.0)
        assert sass.critical_path(body).per_iteration == steps * links, (cls, ops)
    elif cls not in ("iadd3", "ldsm"):  # tput: next to nothing but the class (iadd3, ldsm: see the kernel)
        assert sum(c for op, c in ops.items() if op != cp.SASS_OPCODE[cls]) <= max(3, n // 8), (cls, kind, ops)


def test_one_cta_per_sm_by_shared_memory():
    # H100/H200: 228 KiB shared memory per SM, 227 KiB per CTA opt-in
    smem = cp.shared_bytes(1, 233472, 232448)
    assert 2 * smem > 233472 and smem <= 232448
    assert cp.shared_bytes(2, 233472, 232448) == cp.SMEM_BYTES  # 2 x 1024 threads: the thread limit decides

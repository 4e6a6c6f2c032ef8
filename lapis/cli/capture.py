"""`lapis capture tma|wgmma|micro|gemm` and `lapis bench attention`: the GPU campaigns (exit 2 without a GPU).

The campaign modules load only when a campaign runs: they need cupy and the CUDA driver, and this module must
import on any machine. wgmma, micro, gemm and attention take their options from their lapis.gpu module's parser
(lapis.cli.parser.FORWARDED); lapis reads --json and checks --out before anything runs. With --json, the
campaign's progress goes to stderr and stdout gets one object: {"ok", "exit_code"} (and "error" when it failed).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys

from lapis.cli.output import check_out_dir
from lapis.cli.parser import EXIT_CODES, FORWARDED

GPU_NEEDED = ('needs an NVIDIA GPU with compute capability 9.0+ and the gpu extra (from a lapis checkout: '
              'pip install ".[gpu]")')
CPU_ANSWERS = {"-h", "--help", "--sources"}  # options the forwarded modules answer without a GPU


def cli_capture(args) -> int:
    if args.capture_cmd == "tma":
        check_out_dir("--out", args.out)
        argv = ["--out", args.out, "--what", args.what]
        argv += ["--provenance", args.provenance] if args.provenance else []
        argv += ["--tags", args.tags] if args.tags else []
        return run_campaign("capture tma", "lapis.gpu.capture_tma", argv, args.json, needs_gpu=True)
    return forward(("capture", args.capture_cmd), args)


def option_value(argv: list[str], flag: str) -> str | None:
    """The value of `flag` in a forwarded argv (`--out DIR` or `--out=DIR`), None when absent."""
    for i, tok in enumerate(argv):
        if tok == flag and i + 1 < len(argv):
            return argv[i + 1]
        if tok.startswith(flag + "="):
            return tok[len(flag) + 1:]
    return None


def forward(key: tuple[str, str], args) -> int:
    """`lapis capture micro ARGS` is `python -m lapis.gpu.capture_micro ARGS` (FORWARDED names each module)."""
    argv = list(args.forward_args)
    check_out_dir("--out", option_value(argv, "--out"))
    cpu_only = bool(CPU_ANSWERS & set(argv)) or (key == ("capture", "wgmma") and argv[:1] == ["prepare"])
    needs = GPU_NEEDED + (", and torch for the SDPA references" if key == ("bench", "attention") else "")
    return run_campaign(" ".join(key), FORWARDED[key], argv, args.json, needs_gpu=not cpu_only, needs=needs)


@contextlib.contextmanager
def stdout_to_stderr():
    """Send everything written to stdout to stderr, the campaign's worker processes included (file descriptor 1
    is pointed at 2), so that --json leaves one object on stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 1)
        os.close(saved)


def run_campaign(name: str, module: str, argv: list[str], as_json: bool, needs_gpu: bool,
                 needs: str = GPU_NEEDED) -> int:
    """Run module.main(argv): exit 2 with a message (and a JSON error object with --json) when there is no GPU."""
    if needs_gpu:
        # imported here: this module runs on the GPU host, which has no tensor-layouts or simpy
        from lapis.gpu.harness import gpu_present
        if not gpu_present():
            print(f"lapis {name}: {needs}", file=sys.stderr)
            if as_json:
                print(json.dumps({"ok": False, "exit_code": EXIT_CODES["bad input"], "error": needs}))
            return EXIT_CODES["bad input"]
    main = importlib.import_module(module).main
    with stdout_to_stderr() if as_json else contextlib.nullcontext():
        try:
            code = main(argv) or 0
        except SystemExit as exc:  # argparse's --help and usage errors
            code = exc.code if isinstance(exc.code, int) else EXIT_CODES["bad input"]
    if as_json:
        print(json.dumps({"ok": code == 0, "exit_code": code}))
    return code

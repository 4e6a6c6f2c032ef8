"""`lapis capture tma|wgmma|micro|gemm`: the GPU capture campaigns (exit 2 without a GPU).

The campaign modules load only when a campaign runs: they need cupy and the CUDA driver, and this module must
import on any machine.
"""

from __future__ import annotations

import sys

GPU_NEEDED = ('needs an NVIDIA GPU with compute capability 9.0+ and the gpu extra (from a lapis checkout: '
              'pip install ".[gpu]")')


def cli_capture(args) -> int:
    wants_help = args.capture_cmd == "wgmma" and ({"-h", "--help"} & set(args.wgmma_args))
    if args.capture_cmd == "wgmma" and (args.wgmma_args[:1] == ["prepare"] or wants_help):
        # imported here: this module runs on the GPU host, which has no tensor-layouts or simpy
        from lapis.gpu import capture_wgmma
        return capture_wgmma.main(args.wgmma_args)
    forwarded = getattr(args, "forward_args", None)
    if forwarded is not None and {"-h", "--help", "--sources"} & set(forwarded):  # CPU-only answers
        return forward_capture(args.capture_cmd, forwarded)
    from lapis.gpu.harness import gpu_present
    if not gpu_present():
        print(f"lapis capture {args.capture_cmd}: {GPU_NEEDED}", file=sys.stderr)
        return 2
    if args.capture_cmd == "wgmma":
        from lapis.gpu import capture_wgmma
        return capture_wgmma.main(args.wgmma_args)
    if forwarded is not None:
        return forward_capture(args.capture_cmd, forwarded)
    from lapis.gpu import capture_tma
    argv = ["--out", args.out, "--what", args.what]
    argv += ["--provenance", args.provenance] if args.provenance else []
    argv += ["--tags", args.tags] if args.tags else []
    capture_tma.main(argv)
    return 0


def forward_capture(campaign: str, argv: list[str]) -> int:
    """`lapis capture micro|gemm ARGS` is `python -m lapis.gpu.capture_micro|bench_gemm ARGS`."""
    if campaign == "micro":
        # imported here: this module runs on the GPU host, which has no tensor-layouts or simpy
        from lapis.gpu import capture_micro as module
    else:
        from lapis.gpu import bench_gemm as module
    try:
        return module.main(argv) or 0
    except SystemExit as exc:  # argparse's --help and usage errors
        return exc.code if isinstance(exc.code, int) else 2

"""`lapis bench attention`: check and time the Hopper attention kernels (exit 2 without a GPU).

lapis.gpu.bench_attention loads only when the command runs, so this module imports on any machine.
"""

from __future__ import annotations

import sys

from lapis.cli.capture import GPU_NEEDED


def cli_bench(args) -> int:
    """`lapis bench attention ARGS` is `python -m lapis.gpu.bench_attention ARGS` (exit 2 without a GPU)."""
    # imported here: this module runs on the GPU host, which has no tensor-layouts or simpy
    from lapis.gpu import bench_attention
    from lapis.gpu.harness import gpu_present
    forwarded = list(args.forward_args)
    if not {"-h", "--help", "--sources"} & set(forwarded) and not gpu_present():
        print(f"lapis bench {args.bench_cmd}: {GPU_NEEDED}, and torch for the SDPA references", file=sys.stderr)
        return 2
    try:
        return bench_attention.main(forwarded) or 0
    except SystemExit as exc:  # argparse's --help and usage errors
        return exc.code if isinstance(exc.code, int) else 2

"""`lapis bench attention`: check and time the Hopper attention kernels (exit 2 without a GPU).

lapis.gpu.bench_attention loads only when the command runs, so this module imports on any machine.
"""

from __future__ import annotations

from lapis.cli.capture import forward


def cli_bench(args) -> int:
    """`lapis bench attention ARGS` is `python -m lapis.gpu.bench_attention ARGS` (exit 2 without a GPU)."""
    return forward(("bench", args.bench_cmd), args)

"""The `lapis` command line: one module per command group, each a thin layer over functions users call.

Subcommands import their implementation when they run, so `lapis --help` and `lapis capture ...` work on a GPU
host that has neither simpy nor tensor-layouts.
"""

from lapis.cli.main import main

__all__ = ["main"]

"""lapis: LAyout and PIpeline Simulator for Hopper and Blackwell GPU kernels.

Importing lapis loads nothing heavy: GPU code (cupy, cuda.bindings) loads only
when a GPU subcommand runs.
"""

__version__ = "0.1.0"

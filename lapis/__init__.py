"""lapis: LAyout and PIpeline Simulator for Hopper and Blackwell GPU kernels.

Importing lapis loads nothing heavy: GPU code (cupy, cuda.bindings) loads only
when a GPU subcommand runs.

__version__ is the installed distribution's version (pyproject.toml's `version`, the one place it is written),
read through importlib.metadata; run from a source tree that was never installed it is "0+unknown".
"""

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "lapis-kernels"  # the name on PyPI (`lapis` there is another project); the import name stays lapis

try:
    __version__: str = version(DISTRIBUTION)
except PackageNotFoundError:  # a source tree on sys.path, not installed
    __version__ = "0+unknown"

__all__ = ["DISTRIBUTION", "__version__"]

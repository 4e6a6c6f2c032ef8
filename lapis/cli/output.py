"""Output paths: refused before any work starts, and OS refusals named after the flag that gave the path."""

from __future__ import annotations

import os
from pathlib import Path

from lapis.errors import LapisError


def check_out_file(flag: str, path: str | None, suffix: str) -> None:
    """Refuse an output path before a run, not after it: it must be a `suffix` file in an existing folder."""
    if path and (Path(path).suffix.lower() != suffix or not Path(path).parent.is_dir() or Path(path).is_dir()
                 or not os.access(Path(path).parent, os.W_OK)):
        raise LapisError(f"{flag} must name a {suffix} file in a writable folder", path, f"e.g. {flag} out{suffix}")


def write_output(flag: str, path: str, write) -> None:
    """Call write() and turn an OS refusal (a /proc path, a full disk) into a LapisError naming the flag."""
    try:
        write()
    except OSError as exc:
        raise LapisError(f"{flag} could not be written ({exc.strerror})", path, f"e.g. {flag} out"
                          + Path(path).suffix) from None

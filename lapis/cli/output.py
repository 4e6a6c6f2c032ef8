"""Output paths: refused before any work starts, and OS refusals named after the flag that gave the path.

Every `lapis` command that writes checks its paths here first (check_out_file for one file, check_out_dir for a
folder), so a bad path costs no simulation and no GPU time. The rules are POSIX ones: a name component of at
most NAME_MAX (255) bytes, no NUL byte, a folder that exists (or can be made) and is writable, and a file that is
absent or a regular file, never a FIFO, a device or a symbolic link (writing through those goes somewhere else).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from lapis.errors import LapisError

NAME_MAX = 255  # bytes per path component on Linux (ext4, xfs, tmpfs), POSIX NAME_MAX
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")  # the formats matplotlib's savefig picks from the suffix


def _shown(path: str) -> str:
    """The path as an error message can print it: ascii() escapes undecodable bytes and control characters."""
    return ascii(path)


def _check_name(flag: str, path: str, example: str) -> None:
    if not path or not path.strip():
        raise LapisError(f"{flag} needs a path", repr(path), f"e.g. {flag} {example}")
    if "\0" in path:
        raise LapisError(f"{flag} must not contain a NUL byte", _shown(path), f"e.g. {flag} {example}")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise LapisError(f"{flag} must be a UTF-8 path (lapis writes it into JSON and reports)", _shown(path),
                         f"rename it, e.g. {flag} {example}") from None
    long = [part for part in Path(path).parts if len(os.fsencode(part)) > NAME_MAX]
    if long:
        raise LapisError(f"{flag}: a path component is longer than NAME_MAX ({NAME_MAX} bytes)",
                         f"{len(os.fsencode(long[0]))} bytes", f"shorten it, e.g. {flag} {example}")


def _writable_folder(flag: str, folder: Path, path: str, example: str, what: str) -> None:
    """The nearest existing ancestor of `folder` must be a folder this process can create a file in: probed with
    a temporary file (removed at once), since os.access says yes to root where the kernel says no (/proc)."""
    probe = folder
    while not os.path.lexists(probe) and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise LapisError(f"{flag} must be {what} lapis can write, and {_shown(str(probe))} is not a folder",
                         _shown(path), f"e.g. {flag} {example}")
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as exc:
        raise LapisError(f"{flag} must be {what} lapis can write, and {_shown(str(probe))} refuses new files "
                         f"({exc.strerror})", _shown(path), f"e.g. {flag} {example}") from None


def check_out_file(flag: str, path: str | None, suffixes: str | tuple[str, ...]) -> None:
    """Refuse an output file before a run: a name with one of `suffixes` (e.g. ".json", or FIGURE_SUFFIXES),
    absent or a regular file (not a folder, FIFO, device or symbolic link), in a writable folder. LapisError."""
    if path is None:
        return
    suffixes = (suffixes,) if isinstance(suffixes, str) else tuple(suffixes)
    example = "out" + suffixes[0]
    _check_name(flag, path, example)
    p = Path(path)
    if p.suffix.lower() not in suffixes:
        raise LapisError(f"{flag} takes a file ending in {', '.join(suffixes)}", _shown(path), f"e.g. {flag} {example}")
    if os.path.lexists(p):
        mode = os.lstat(p).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a symbolic link" if stat.S_ISLNK(mode) else "a folder" if stat.S_ISDIR(mode) else
                    "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                    else "not a regular file")
            raise LapisError(f"{flag} must name a regular file, and this is {kind}", _shown(path),
                             f"remove it or pick another name, e.g. {flag} {example}")
        if not os.access(p, os.W_OK):
            raise LapisError(f"{flag} names a read-only file", _shown(path), f"e.g. {flag} {example}")
    parent = p.parent
    if not parent.is_dir():
        raise LapisError(f"{flag} must name a {'/'.join(suffixes)} file in an existing folder", _shown(path),
                         f"e.g. {flag} {example}")
    _writable_folder(flag, parent, path, example, "in a folder")


def check_out_dir(flag: str, path: str | None, example: str = "out") -> None:
    """Refuse an output folder before a run: an existing writable folder (or a link to one: files are written
    inside it), or a new one whose nearest existing ancestor is a writable folder. LapisError."""
    if path is None:
        return
    _check_name(flag, path, example)
    p = Path(path)
    if os.path.lexists(p) and not p.is_dir():
        raise LapisError(f"{flag} must be a folder lapis can write, and this is a file", _shown(path),
                         f"pass a new or existing folder, e.g. {flag} {example}")
    _writable_folder(flag, p, path, example, "a folder")


def write_output(flag: str, path: str, write) -> None:
    """Call write() and turn an OS refusal (a /proc path, a full disk) into a LapisError naming the flag."""
    try:
        write()
    except OSError as exc:
        raise LapisError(f"{flag} could not be written ({exc.strerror})", _shown(path), f"e.g. {flag} out"
                         + Path(path).suffix) from None

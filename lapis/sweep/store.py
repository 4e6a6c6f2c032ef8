"""The resume store of a sweep's output folder OUT: finished rows in OUT/rows.jsonl, and OUT/sweep.lock, which
keeps one sweep at a time on OUT.

On disk (format lapis.sweep-row/1), one line per finished row, UTF-8, each exactly

    {"format":"lapis.sweep-row/1","row":{...},"sha256":"<64 hex digits>"}\\n

(json.dumps with sort_keys, separators "," and ":", ASCII only, no NaN or Infinity), where sha256 is
hashlib.sha256 of the row's own JSON written the same way. `add` appends a row as one os.write of one whole line
to a file opened O_APPEND, then fsyncs it, so a kill leaves at most the line in flight cut short. A later line
of the same key supersedes an earlier one (a recomputed stale row).

Reading (RowStore()): the file is read a line at a time, never more than ROW_LINE_BYTES (1 MiB) at once. A line
is dropped, and its task recomputed, when it is cut short (no closing newline), longer than ROW_LINE_BYTES (read
past in bounded pieces, never held whole), is not UTF-8 JSON of that form (a duplicate key, a NaN, another format), fails its checksum (an edited digit, a
flipped `fits`), or holds no valid row (valid_row: the row's fields, finite positive times and TFLOP/s, and a key
that agrees with the row's mode, shape and configuration). The count per cause goes to stderr and into `dropped`.
When any line was dropped, or superseded lines outnumber the live rows, the store is compacted: the kept lines
are written, byte for byte, to a new file in OUT, fsynced, and renamed over rows.jsonl (os.replace); rows.jsonl is
never truncated or rewritten in place, so a kill at any point leaves either the old file or the new one. Rows
made under another profile, model or lapis version are kept here and recomputed by the sweep (`current`).
The checksum finds corruption and edits that do not recompute it; it is not a signature: whoever may write OUT
may write rows.

Nothing under OUT is followed: rows.jsonl, sweep.csv, summary.json, pareto.png, validated.csv and sweep.lock
must each be absent or a regular file (not a symlink, FIFO, folder or device), else CaptureError names it before
anything is read or written; files are opened with O_NOFOLLOW (and a FIFO is never opened: O_NONBLOCK, then
fstat).

The lock: OUT/sweep.lock, made with O_CREAT | O_EXCL, holds the pid, host and start time (UTC) of the sweep that
holds it and is removed when that RowStore is closed or collected, or at exit. A second RowStore on OUT raises
CaptureError naming the holder. A lock whose pid is gone on this host (a sweep that was killed), or that names
no holder (killed while taking it), is taken over with a note on stderr. A lock from another host is never taken
over: the error says to remove it if that sweep is gone. RowStores of one process on one OUT share its lock.
"""

from __future__ import annotations

import datetime
import errno
import hashlib
import json
import math
import os
import socket
import stat
import sys
import uuid
import weakref
from pathlib import Path

from lapis.errors import CaptureError

FORMAT = "lapis.sweep-row/1"
ROWS_FILE = "rows.jsonl"
LOCK_FILE = "sweep.lock"
OUT_FILES = (ROWS_FILE, "sweep.csv", "summary.json", "pareto.png", "validated.csv", LOCK_FILE)
COMPACT_PREFIX = ROWS_FILE + ".compact-"  # + pid-random.tmp: a compaction's new file before its rename
TEXT_FIELDS = ("key", "shape", "mode", "reason", "kernel")
POSITIVE = ("predicted_us", "tflops")  # finite and > 0 where present
COUNTS = ("smem_bytes", "registers", "tmem_columns")  # integers >= 0 where present
SECONDS = ("wall_s", "cpu_s")  # finite and >= 0
CAUSES = ("cut short", "too long", "unreadable", "bad checksum", "not a valid row")
ROW_LINE_BYTES = 1 << 20  # a stored row is a few hundred bytes; a longer line is never read whole
LOCK_BYTES = 4096  # a lock file is a few hundred bytes; more is not read


def _number(v, positive: bool) -> bool:
    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
    return ok and (v > 0 if positive else v >= 0)


def _key_agrees(row: dict) -> bool:
    """The key (schedule|gpu|mode|shape|configuration, evaluate.Task.key) names the row's own mode, shape and
    configuration."""
    parts = row["key"].split("|", 4)
    config = ",".join(f"{k}={v}" for k, v in row["config"])  # lapis.sweep.space.config_text
    return len(parts) == 5 and all(parts[:2]) and parts[2:] == [row["mode"], row["shape"], config]


def valid_row(row) -> bool:
    """Whether `row` (one parsed row) has every field a sweep reads, with sane values: a row that fits has
    positive finite predicted_us and tflops (a NaN would rank first), its stamp is a dict of strings, and its key
    agrees with its mode, shape and configuration."""
    if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in TEXT_FIELDS):
        return False
    cfg = row.get("config")
    if not isinstance(cfg, list) or not all(isinstance(kv, list) and len(kv) == 2 and isinstance(kv[0], str)
                                            for kv in cfg):
        return False
    if not isinstance(row.get("fits"), bool) or not isinstance(row.get("runnable"), bool):
        return False
    st = row.get("stamp")
    if not isinstance(st, dict) or not all(isinstance(v, str) for v in st.values()):
        return False
    if not all(_number(row.get(k), False) for k in SECONDS):
        return False
    if row["fits"] and not all(row.get(k) is not None for k in POSITIVE):
        return False
    return (all(row.get(k) is None or _number(row[k], True) for k in POSITIVE)
            and all(row.get(k) is None or (_number(row[k], False) and row[k] == int(row[k])) for k in COUNTS)
            and _key_agrees(row))


def canonical(obj) -> bytes:
    """obj as the store writes JSON: sorted keys, no spaces, ASCII, no NaN or Infinity (ValueError)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def checksum(row: dict) -> str:
    return hashlib.sha256(canonical(row)).hexdigest()


def line(row: dict) -> bytes:
    """One stored line (newline included) of `row`."""
    return canonical({"format": FORMAT, "row": row, "sha256": checksum(row)}) + b"\n"


def _unique_pairs(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate key")
    return dict(pairs)


def _no_constant(name):
    raise ValueError(f"{name} is not a number JSON allows")


def plain_json(text):
    """json.loads that refuses a duplicate key and NaN/Infinity (ValueError), so a text has one meaning."""
    return json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=_no_constant)


def read_line(raw: bytes) -> tuple[dict | None, str]:
    """(row, "") for a good stored line (without its newline), else (None, cause) with a cause of CAUSES."""
    try:
        rec = plain_json(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError, json.JSONDecodeError, duplicate key, NaN
        return None, "unreadable"
    if not isinstance(rec, dict) or sorted(rec) != ["format", "row", "sha256"] or rec["format"] != FORMAT:
        return None, "unreadable"
    if not isinstance(rec["row"], dict) or rec["sha256"] != checksum(rec["row"]):
        return None, "bad checksum"
    if not valid_row(rec["row"]):
        return None, "not a valid row"
    return rec["row"], ""


def refuse_special(path: Path) -> None:
    """CaptureError when `path` exists and is not a regular file (a symlink, even to a file, a FIFO, a folder,
    a device or a socket); lapis never follows or opens such a path under --out."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISREG(st.st_mode):
        return
    kind = ("a symlink" if stat.S_ISLNK(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode)
            else "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file")
    raise CaptureError(f"{path.name} in a sweep's output folder must be a regular file (lapis never follows links "
                       "or opens special files there)", f"{path} is {kind}",
                       f"remove or rename {path}, or pick another --out")


def _open_regular(path: Path, flags: int, mode: int = 0o644) -> int:
    """os.open with O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, then fstat: a descriptor of a regular file, else
    CaptureError (refuse_special's)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):  # a symlink; a FIFO opened for writing without a reader
            refuse_special(path)
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        refuse_special(path)
    return fd


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _lines(f):
    """(line without its newline, "") for each non-empty line of the binary file `f`, or (b"", cause) for one
    longer than ROW_LINE_BYTES ("too long": read past in bounded pieces, never held whole) or without its
    newline at the end of the file ("cut short"). Memory stays within ROW_LINE_BYTES a line."""
    while raw := f.readline(ROW_LINE_BYTES + 1):
        if len(raw) > ROW_LINE_BYTES and not raw.endswith(b"\n"):  # ROW_LINE_BYTES and its newline fit
            while raw and not raw.endswith(b"\n"):
                raw = f.readline(ROW_LINE_BYTES)
            yield b"", "too long"
        elif not raw.endswith(b"\n"):
            yield b"", "cut short"
        elif raw != b"\n":
            yield raw[:-1], ""


class RowStore:
    """Finished rows of one output folder, by key (`rows`); `add` appends a row and makes it durable. Holds
    OUT/sweep.lock from construction until `close` (or collection, or exit). `dropped` counts the lines dropped
    on reading, `causes` the same by cause. Raises CaptureError for a symlink or special file under OUT
    (refuse_special), or when another sweep holds the lock (the error names it)."""

    def __init__(self, folder: Path, stream=None):
        self.folder = Path(folder)
        self.path = self.folder / ROWS_FILE
        self.stream = stream or sys.stderr
        self.rows: dict[str, dict] = {}
        self.causes = dict.fromkeys(CAUSES, 0)
        for name in OUT_FILES:
            refuse_special(self.folder / name)
        lock_key = _lock(self.folder, self.stream)
        try:
            kept, superseded = self._load()
            if self.dropped or superseded > len(self.rows):
                self._compact(kept)
        except BaseException:
            _unlock(lock_key)
            raise
        self._fds: list[int] = []  # the append descriptor, opened by the first add
        self._closer = weakref.finalize(self, _close, self._fds, lock_key)
        if self.dropped:
            causes = ", ".join(f"{n} {c}" for c, n in self.causes.items() if n)
            self.stream.write(f"lapis sweep: {self.path}: {self.dropped} stored line(s) failed their check "
                              f"({causes}); their rows are recomputed, and the store was compacted\n")

    @property
    def dropped(self) -> int:
        return sum(self.causes.values())

    def _load(self) -> tuple[list[bytes], int]:
        """Read rows.jsonl into `rows`; return the lines to keep (the last good line of each key) and how many
        good lines a later one superseded."""
        for p in self.folder.glob(COMPACT_PREFIX + "*"):  # a compaction killed before its rename
            if not p.is_dir():
                p.unlink(missing_ok=True)
        try:
            fd = _open_regular(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return [], 0
        last: dict[str, bytes] = {}
        good = 0
        with os.fdopen(fd, "rb") as f:
            for raw, cause in _lines(f):
                row, cause = read_line(raw) if not cause else (None, cause)
                if row is None:
                    self.causes[cause] += 1
                    continue
                good += 1
                last.pop(row["key"], None)  # keep the keys in the order of their last line
                last[row["key"]] = raw
                self.rows[row["key"]] = row
        return [raw + b"\n" for raw in last.values()], good - len(last)

    def _compact(self, kept: list[bytes]) -> None:
        """Write `kept` to a new file and rename it over rows.jsonl."""
        tmp = self.folder / f"{COMPACT_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        try:
            _write_all(fd, b"".join(kept))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        _fsync_folder(self.folder)

    def __contains__(self, key: str) -> bool:
        return key in self.rows

    def current(self, key: str, stamp: dict) -> bool:
        """Whether the row of `key` is stored and was made under `stamp` (evaluate.stamp)."""
        return key in self.rows and self.rows[key].get("stamp") == stamp

    def add(self, row: dict) -> None:
        """Append `row` as one line and fsync it. Raises ValueError for a row JSON cannot hold exactly (a NaN)."""
        data = line(row)
        if not self._closer.alive:
            raise CaptureError("a closed resume store takes no rows", str(self.path), "open a new RowStore")
        if not self._fds:
            self._fds.append(_open_regular(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT))
        created = os.fstat(self._fds[0]).st_size == 0
        _write_all(self._fds[0], data)
        os.fsync(self._fds[0])
        if created:
            _fsync_folder(self.folder)
        self.rows[row["key"]] = row

    def close(self) -> None:
        """Close the file and release the lock (once; a closed store takes no more rows)."""
        self._closer()


def _close(fds: list, lock_key: str) -> None:
    while fds:
        os.close(fds.pop())
    _unlock(lock_key)


_HELD: dict[str, list] = {}  # lock path -> [token, RowStores of this process holding it]


def _holder_text(h: dict) -> str:
    return f"pid {h.get('pid')} on host {h.get('host')!r}, started {h.get('started')}"


def _read_lock(path: Path) -> dict | None:
    """The lock's holder, or None when the file names none (empty, cut short, not the lock's JSON)."""
    fd = _open_regular(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as f:
        data = f.read(LOCK_BYTES)
    try:
        h = plain_json(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    ok = isinstance(h, dict) and isinstance(h.get("pid"), int) and isinstance(h.get("host"), str)
    return h if ok else None


def _pid_gone(pid: int) -> bool:
    """Whether no process of this host has `pid` (a pid <= 0 or out of range names none)."""
    if pid <= 0:
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return True
    except PermissionError:  # alive, under another user
        return False
    return False


def _lock(folder: Path, stream) -> str:
    """Take OUT/sweep.lock (or share this process's); return its key for _unlock. CaptureError when another
    sweep holds it."""
    path = folder / LOCK_FILE
    key = os.path.realpath(path)
    if key in _HELD:
        _HELD[key][1] += 1
        return key
    guard = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:  # serialises lapis processes that take or take over this lock at the same moment
            import fcntl
            fcntl.flock(guard, fcntl.LOCK_EX)
        except (ImportError, OSError):
            pass
        token = uuid.uuid4().hex
        me = dict(pid=os.getpid(), host=socket.gethostname(),
                  started=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), token=token)
        for attempt in range(2):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            except FileExistsError:
                if attempt:
                    raise
                refuse_special(path)
                holder = _read_lock(path)
                if holder is not None and (holder["host"] != me["host"] or not _pid_gone(holder["pid"])):
                    raise CaptureError("another lapis sweep is writing to this --out", f"{path} held by "
                                       f"{_holder_text(holder)}", "wait for it to finish or pick another --out; if "
                                       f"that sweep is no longer running, remove {path}") from None
                what = "names no holder" if holder is None else f"was held by {_holder_text(holder)}, which is gone"
                stream.write(f"lapis sweep: took over {path}: it {what}\n")
                os.unlink(path)
                continue
            try:
                _write_all(fd, json.dumps(me).encode() + b"\n")
                os.fsync(fd)
            finally:
                os.close(fd)
            break
    finally:
        os.close(guard)
    _HELD[key] = [token, 1]
    return key


def _unlock(key: str) -> None:
    held = _HELD.get(key)
    if held is None:
        return
    held[1] -= 1
    if held[1] > 0:
        return
    del _HELD[key]
    try:
        holder = _read_lock(Path(key))
    except (OSError, CaptureError):
        return
    if holder is not None and holder.get("token") == held[0]:
        os.unlink(key)

"""The resume store: finished rows, one JSON object per line, appended as each row finishes (rows.jsonl).

A rerun with the same output folder reads the store first and computes only the tasks whose key
(evaluate.Task.key: schedule, GPU, mode, shape, configuration) is not in it, or whose stamp (evaluate.stamp:
profile hash, model hash, lapis version) is not the current one (`stale`). A line cut short by a kill (no
closing newline), one that is not UTF-8 JSON, or one that is not a valid row (valid_row: a dict with the row's
fields, finite positive times and TFLOP/s) is dropped (`dropped`) and its task recomputed; the file is rewritten
without it before anything is appended. A folder in place of rows.jsonl is a CaptureError.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from lapis.errors import CaptureError

ROWS_FILE = "rows.jsonl"
TEXT_FIELDS = ("key", "shape", "mode", "reason", "kernel")
POSITIVE = ("predicted_us", "tflops")  # finite and > 0 where present
COUNTS = ("smem_bytes", "registers", "tmem_columns")  # integers >= 0 where present
SECONDS = ("wall_s", "cpu_s")  # finite and >= 0


def _number(v, positive: bool) -> bool:
    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
    return ok and (v > 0 if positive else v >= 0)


def valid_row(row) -> bool:
    """Whether `row` (one parsed line) has every field a sweep reads, with sane values: a row that fits has
    positive finite predicted_us and tflops (a NaN would rank first)."""
    if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in TEXT_FIELDS):
        return False
    cfg = row.get("config")
    if not isinstance(cfg, list) or not all(isinstance(kv, list) and len(kv) == 2 and isinstance(kv[0], str)
                                            for kv in cfg):
        return False
    if not isinstance(row.get("fits"), bool) or not isinstance(row.get("runnable"), bool):
        return False
    if not all(_number(row.get(k), False) for k in SECONDS):
        return False
    if row["fits"] and not all(row.get(k) is not None for k in POSITIVE):
        return False
    return (all(row.get(k) is None or _number(row[k], True) for k in POSITIVE)
            and all(row.get(k) is None or (_number(row[k], False) and row[k] == int(row[k])) for k in COUNTS))


class RowStore:
    """Finished rows of one output folder, by key; `add` appends a row and flushes it to disk.
    Raises CaptureError when OUT/rows.jsonl is not a file."""

    def __init__(self, folder: Path):
        self.path = Path(folder) / ROWS_FILE
        self.rows: dict[str, dict] = {}
        self.dropped = 0
        if self.path.exists() and not self.path.is_file():
            raise CaptureError(f"the resume store {ROWS_FILE} must be a file", str(self.path),
                               "remove or rename it, or pick another --out")
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        lines = self.path.read_bytes().split(b"\n")
        kept = []
        for i, raw in enumerate(lines):
            if not raw.strip():
                continue
            complete = i < len(lines) - 1  # the last piece has no newline after it: cut short
            try:
                line = raw.decode("utf-8")
                row = json.loads(line) if complete else None
            except ValueError:  # UnicodeDecodeError, json.JSONDecodeError
                row = None
            if not valid_row(row):
                self.dropped += 1
                continue
            self.rows[row["key"]] = row
            kept.append(line)
        if self.dropped:
            self.path.write_text("".join(x + "\n" for x in kept))

    def __contains__(self, key: str) -> bool:
        return key in self.rows

    def current(self, key: str, stamp: dict) -> bool:
        """Whether the row of `key` is stored and was made under `stamp` (evaluate.stamp)."""
        return key in self.rows and self.rows[key].get("stamp") == stamp

    def add(self, row: dict) -> None:
        self.rows[row["key"]] = row
        with open(self.path, "a") as f:
            f.write(json.dumps(row, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())

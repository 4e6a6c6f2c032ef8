"""The resume store: finished rows, one JSON object per line, appended as each row finishes (rows.jsonl).

A rerun with the same output folder reads the store first and computes only the tasks whose key
(evaluate.Task.key: schedule, GPU, mode, shape, configuration) is not in it. A line cut short by a kill (no
closing newline, or not valid JSON) is dropped and its task recomputed; the file is rewritten without it
before anything is appended.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

ROWS_FILE = "rows.jsonl"


class RowStore:
    """Finished rows of one output folder, by key; `add` appends a row and flushes it to disk."""

    def __init__(self, folder: Path):
        self.path = Path(folder) / ROWS_FILE
        self.rows: dict[str, dict] = {}
        self.dropped = 0
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        text = self.path.read_text()
        lines = text.split("\n")
        kept = []
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            complete = i < len(lines) - 1  # the last piece has no newline after it: cut short
            try:
                row = json.loads(line) if complete else None
            except json.JSONDecodeError:
                row = None
            if row is None or "key" not in row:
                self.dropped += 1
                continue
            self.rows[row["key"]] = row
            kept.append(line)
        if self.dropped:
            self.path.write_text("".join(x + "\n" for x in kept))

    def __contains__(self, key: str) -> bool:
        return key in self.rows

    def add(self, row: dict) -> None:
        self.rows[row["key"]] = row
        with open(self.path, "a") as f:
            f.write(json.dumps(row, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())

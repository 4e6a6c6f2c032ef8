"""Run a list of GPU work items so that a fault costs one item, not the campaign.

A CUDA fault poisons its context, so items run in child processes: a child
works through items from a start index, writing work/res_<i>.json per item and
work/progress before each. When a child dies at item k, k is re-run alone (its
fault recorded as data by the child, or here if the child could not) and a new
child continues from k + 1. Standard library only.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path


def run_isolated(n_items: int, child: list[str], work: Path, log, timeout_s: int = 900) -> None:
    """child: argv of the worker; it gets `--start i` or `--only k` appended."""
    start = 0
    while start < n_items:
        p = subprocess.run(child + ["--start", str(start)], capture_output=True, text=True, timeout=timeout_s)
        if p.returncode == 0:
            return
        k = int((work / "progress").read_text())  # the item the child was on
        log(f"item {k} failed in a batch (rc {p.returncode}); re-running it alone")
        q = subprocess.run(child + ["--only", str(k)], capture_output=True, text=True, timeout=300)
        if not (work / f"res_{k}.json").exists() or q.returncode not in (0, 3):
            (work / f"res_{k}.json").write_text(json.dumps(
                dict(status="fault", error=f"rc {q.returncode}: {q.stderr[-400:]}")))
        start = k + 1

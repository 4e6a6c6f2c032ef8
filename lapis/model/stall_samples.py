"""Where a kernel's main loop spends its cycles, from Nsight Compute's warp-stall samples (its source page).

Input: an `ncu --page source --csv --print-source sass` export with stall sampling (lapis.gpu.ncu_units --source
writes one as <kernel>_source.csv.gz): per SASS instruction, its executed count ("Instructions Executed"), its
samples ("Warp Stall Sampling (All Samples)") and the samples per stall reason (the `stall_*` columns, issued and
not issued together). Nsight Compute samples each SM sub-partition's warps at a fixed cycle interval, so a warp's
samples on an instruction are in proportion to the cycles it spent there, waiting to issue it or issuing it.

The hot loop is the span from the first to the last instruction with the largest executed count (the K/V-tile loop
of an attention kernel), cold paths inside it (a wait's retry path) included. Its samples are turned into cycles
per iteration of one warp by the caller's cycles per iteration (a kernel's SM cycles over the iterations each SM
runs): the loop's share of time outside it (prologue, epilogue, per-item work) is not taken out.

segments() splits a ping-pong consumer loop at its GEMM turn: `before_turn` from the loop's head through the
turn's bar.sync (BAR.SYNC), `turn` from there through the last BAR.ARV (the named-barrier wait, the GEMMs' issue
and the operand waits between them), `softmax` the rest (the wgmma waits, the softmax, the P conversion, the O
rescale); `turn_wait`: the samples stalled on a barrier between the bar.sync and the turn's first HGMMA (ncu
attributes a blocked bar.sync's cycles to the instruction that waits for it).
"""

from __future__ import annotations

import csv
import io
import math
import numbers
from dataclasses import dataclass
from pathlib import Path

from lapis.errors import CaptureError
from lapis.model.sass import read_text

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
_FIX = "export with ncu --page source --csv --print-source sass and stall sampling (lapis.gpu.ncu_units --source)"


@dataclass(frozen=True)
class Sampled:
    """One SASS instruction of a source page: text (predicate and operands included), opcode (the mnemonic with
    its modifiers), count (executed warp-level instructions), samples, reasons ({stall reason: samples})."""

    text: str
    opcode: str
    count: int
    samples: int
    reasons: dict


def _count(value: str, column: str, address: str) -> int:
    """A count cell as an int ("" reads 0); CaptureError on anything but a whole number of 0 or more."""
    text = value.strip()
    if not text:
        return 0
    if not text.isascii() or not text.isdigit():
        raise CaptureError(f"an ncu source page's '{column}' cells are whole numbers of 0 or more",
                           f"{value!r} at {address}", _FIX + " (plain numbers: no thousands separators or units)")
    return int(text)


def read_page(source: str | Path) -> list[Sampled]:
    """The instructions of a source page in address order; CaptureError when its stall columns are missing, a row
    after the header has another number of cells than the header (a cut or hand-edited export), a count cell is not
    a whole number of 0 or more, or the CSV itself is malformed."""
    try:
        rows = list(csv.reader(io.StringIO(read_text(source))))
    except csv.Error as e:  # a field over csv's limit, a NUL byte in a quoted field
        raise CaptureError("an ncu source page is well-formed CSV", str(e), _FIX) from None
    header = next((i for i, r in enumerate(rows) if "Source" in r and EXECUTED in r and SAMPLES in r), None)
    if header is None:
        raise CaptureError("an ncu source page has 'Source', 'Instructions Executed' and stall-sample columns",
                           str(rows[:2])[:200], _FIX)
    cols = rows[header]
    i_src, i_n, i_s = cols.index("Source"), cols.index(EXECUTED), cols.index(SAMPLES)
    stall = {i: c[len("stall_"):] for i, c in enumerate(cols) if c.startswith("stall_") and "Not Issued" not in c}
    out = []
    for line, r in enumerate(rows[header + 1:], start=header + 2):
        if not r:
            continue
        if len(r) != len(cols):  # skipping it would drop an instruction (a BAR.SYNC) and move the segments
            raise CaptureError("every row of an ncu source page has as many cells as its header",
                               f"row {line}: {len(r)} cells against {len(cols)}: {str(r)[:120]}", _FIX)
        if not r[i_src].strip():
            continue
        text, where = r[i_src].strip(), f"row {line}"
        words = [w for w in text.split() if not w.startswith("@")]
        reasons = {name: _count(r[i], cols[i], where) for i, name in stall.items()}
        out.append(Sampled(text, words[0] if words else "", _count(r[i_n], EXECUTED, where),
                           _count(r[i_s], SAMPLES, where), {k: n for k, n in reasons.items() if n}))
    return out


def hot_loop(page: list[Sampled]) -> list[Sampled]:
    """The span from the first to the last instruction executed the most times; CaptureError on an empty page."""
    top = max((ins.count for ins in page), default=0)
    if top <= 0:
        raise CaptureError("a source page with executed instructions", f"{len(page)} instructions, none executed",
                           _FIX)
    hot = [i for i, ins in enumerate(page) if ins.count == top]
    return page[hot[0]:hot[-1] + 1]


def segments(loop: list[Sampled], cycles_per_iteration: float) -> dict:
    """Cycles per iteration of one warp in each part of a ping-pong consumer loop (module docstring): before_turn,
    turn, softmax, turn_wait. CaptureError when the loop has no BAR.SYNC, then HGMMA, then BAR.ARV in that order,
    when it holds no stall samples (sampling off), or when cycles_per_iteration is not a finite number above 0."""
    if isinstance(cycles_per_iteration, bool) or not isinstance(cycles_per_iteration, numbers.Real) \
            or not math.isfinite(cycles_per_iteration) or cycles_per_iteration <= 0:
        raise CaptureError("cycles_per_iteration is a finite number of cycles above 0", repr(cycles_per_iteration),
                           "pass the kernel's SM cycles (sm__cycles_elapsed.max) over the iterations each SM runs")
    ops = [ins.opcode for ins in loop]
    sync = next((i for i, op in enumerate(ops) if op.startswith("BAR.SYNC")), None)
    arv = max((i for i, op in enumerate(ops) if op.startswith("BAR.ARV")), default=None)
    gemm = next((i for i, op in enumerate(ops) if op.startswith("HGMMA") and sync is not None and i > sync), None)
    if sync is None or arv is None or gemm is None or not sync < gemm < arv:
        raise CaptureError("a ping-pong consumer loop: a BAR.SYNC, then HGMMAs, then a BAR.ARV",
                           f"BAR.SYNC at {sync}, first HGMMA after it at {gemm}, last BAR.ARV at {arv}",
                           "pass the hot loop of a kernel with GEMM turns (hot_loop)")
    total = sum(ins.samples for ins in loop)
    if total <= 0:  # without samples every part would read 0 cycles
        raise CaptureError("a hot loop with stall samples", f"{len(loop)} instructions, 0 samples",
                           _FIX + " (the SourceCounters section samples warp stalls)")
    scale = cycles_per_iteration / total

    def cycles(part, reason=None):
        return scale * sum(ins.reasons.get(reason, 0) if reason else ins.samples for ins in part)

    return dict(before_turn=cycles(loop[:sync + 1]), turn=cycles(loop[sync + 1:arv + 1]),
                softmax=cycles(loop[arv + 1:]), turn_wait=cycles(loop[sync + 1:gemm], "barrier"))

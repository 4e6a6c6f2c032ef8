"""The colours of every lapis figure: one colour per op kind, one per data series, one (colour, marker) per variant.

Op names differ between the simulator and the hardware timelines: the simulator's schedules
(lapis.pipeline_sim.schedules, recorder events) write "wgmma QK", "TMA K", "S0 pass 2: P (mufu)", "cp.async K+V";
the instrumented kernels' timelines (lapis.captures readers; lapis.gpu.attention_plan.OPS and the GEMM timelines'
"ops" arrays) write "issue QK", "issue wgmma", "issue TMA", "softmax", "O rescale". `op_kind` maps every such name
to one kind by the first matching rule of KIND_RULES, and `op_colour` gives the kind's colour, so a predicted
"wgmma" and a measured "issue wgmma" are one colour in every figure. A name no rule matches keeps its own name as
its kind and gets a fallback colour chosen by a CRC-32 of the name (the same in every run and process);
`unmapped` lists such names so a figure can say so in its legend.
"""

from __future__ import annotations

import re
import zlib

__all__ = ["KIND_COLOURS", "KIND_RULES", "WAIT_COLOUR", "FALLBACK_COLOURS", "SERIES_COLOURS", "VARIANT_COLOURS",
           "VARIANT_MARKERS", "INDEX_COLOURS", "UNTOUCHED_COLOUR", "op_kind", "op_colour", "unmapped", "variant_style"]

# Op kind -> colour (hex). Tensor-core kinds are blues, data movement greens and cyan, the softmax orange, the
# rescale red, the epilogue brown; grey is kept for waits.
KIND_COLOURS = {
    "mma": "#1f77b4",  # a GEMM's wgmma / mma (tensor core)
    "mma QK": "#6baed6",  # S = Q K^T
    "mma PV": "#08519c",  # O += P V
    "TMA issue": "#98df8a",  # a thread issuing cp.async.bulk.tensor (an instant on the producer)
    "wgmma issue": "#c6dbef",  # a GEMM turn's bar.sync hand-over, descriptors and wgmma instructions (simulator)
    "load": "#2ca02c",  # bytes moving into shared memory or registers: TMA transfers, cp.async, ld.global
    "smem copy": "#17becf",  # ldmatrix, P through shared memory
    "softmax": "#ff7f0e",
    "rescale": "#d62728",  # O *= exp(m_old - m_new)
    "epilogue": "#8c564b",  # final O / rowsum, TMEM -> registers, the store of O or C
    "wait": "#d9d9d9",
}
WAIT_COLOUR = KIND_COLOURS["wait"]

# (regex on the lower-cased name, kind): the first match wins, so the specific rules come first
# ("softmax FMA + O rescale" is softmax, "mma.sync QK" is mma QK, "ldmatrix K (+Q)" is smem copy).
KIND_RULES = (
    (r"^wait\b", "wait"),
    (r"^softmax|^s\d* pass|row max|\bex2\b", "softmax"),
    (r"rescale", "rescale"),
    (r"^issue tma\b", "TMA issue"),
    (r"^gemm issue\b|^turn hand-over\b", "wgmma issue"),  # the turn's bar.sync hand-over is part of its issue
    (r"ldmatrix|via smem", "smem copy"),
    (r"\bq\d?k\b", "mma QK"),
    (r"\bp\d?v\b", "mma PV"),
    (r"wgmma|\bmma\b|umma|tcgen05", "mma"),
    (r"\btma\b|^load\b|cp\.async|ld\.global|from (hbm|l2)|\blands?\b", "load"),
    (r"epilogue|^store\b|rowsum|tmem -> registers", "epilogue"),
)
_RULES = tuple((re.compile(p), k) for p, k in KIND_RULES)

# For names no rule knows: pinks, purples and pales that no kind above uses.
FALLBACK_COLOURS = ("#e377c2", "#9467bd", "#c49c94", "#f7b6d2", "#dbdb8d", "#9edae5", "#c5b0d5", "#ff9896",
                    "#bcbd22", "#7b4173")

# Data series of the predicted-against-measured figures.
SERIES_COLOURS = {
    "predicted (blind)": "#9ecae1",
    "predicted": "#3182bd",
    "measured": "#e6550d",
    "reference": "#969696",  # cuBLAS, cuDNN: the vendor library in the same run
}

# Per variant: colour i % 9 and marker (i + i // 9) % 9, so the first 9 variants differ in both and the first 81
# never share the pair. No grey (the reference series) among the colours.
VARIANT_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22",
                   "#17becf")
VARIANT_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h")


def op_kind(name: str) -> str:
    """The kind of an op name (KIND_RULES, first match), or the name itself when no rule matches."""
    low = " ".join(str(name).lower().split())
    return next((kind for rx, kind in _RULES if rx.search(low)), str(name))


def op_colour(name: str) -> str:
    """The hex colour of an op name: its kind's (KIND_COLOURS), else a fallback picked by CRC-32 of the name."""
    kind = op_kind(name)
    if kind in KIND_COLOURS:
        return KIND_COLOURS[kind]
    return FALLBACK_COLOURS[zlib.crc32(str(name).encode()) % len(FALLBACK_COLOURS)]


def unmapped(names) -> list[str]:
    """The names among `names` that no rule of KIND_RULES matches (they get fallback colours), sorted."""
    return sorted({str(n) for n in names if op_kind(n) not in KIND_COLOURS})


def variant_style(i: int) -> tuple[str, str]:
    """(colour, marker) of the i-th variant of a figure (i >= 0): VARIANT_COLOURS[i % 9],
    VARIANT_MARKERS[(i + i // 9) % 9]."""
    n = len(VARIANT_COLOURS)
    return VARIANT_COLOURS[i % n], VARIANT_MARKERS[(i + i // n) % len(VARIANT_MARKERS)]

# Categorical colours for small indices (a 16-B chunk's column, a bank group 0-7): tab10 without its grey, which
# the memory figures keep for untouched (sentinel) bytes.
INDEX_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf")
UNTOUCHED_COLOUR = "#d9d9d9"

"""`lapis validate mma`: replay the H200 wgmma captures against `lapis.layouts.descriptors.mma_read`.

For every case and K-step, D is predicted from the captured shared-memory image
and the two descriptors alone (no knowledge of how the image was built) and
compared with the measured D exactly. The intended D (the tested operand read as
laid out) tells deliberate mismatches apart: a pair counts only when its
predicted D differs from the intended one.

Captures are read by lapis.captures.readers (read_wgmma, read_cutlass_oracle,
read_bank): a capture it cannot read is a CaptureError naming the file and the
field or array. Entries a capture marks as not measured (a wgmma case whose
status is not "ok", a bank pattern without measured wavefronts) are not compared:
they are counted in wgmma.not_compared and bank_conflicts.not_compared ({reason:
count}, present when there are any) and printed; they do not fail the check. A
capture none of whose entries can be compared is a CaptureError (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from lapis.captures.readers import read_bank, read_cutlass_oracle, read_wgmma
from lapis.captures.safe import FIX
from lapis.captures.store import captures_root, manifests
from lapis.errors import CaptureError, LapisError
from lapis.gpu.wgmma_campaign import intended_d
from lapis.layouts.bank_conflicts import wavefronts
from lapis.layouts.canonical import CanonicalLayout
from lapis.layouts.descriptors.mma_read import predict_d
from lapis.layouts.descriptors.sm90 import WgmmaDescriptor, descriptor_for
from lapis.layouts.descriptors.sm100 import umma_descriptor_for
from lapis.validate.layouts import merge_provenance

CASE_KEYS = ("dtype", "n", "ta", "tb", "test", "major", "swizzle", "test_base", "shift", "corrupt", "desc_a",
             "desc_b")


def case_result(case: dict, image: np.ndarray, d: np.ndarray) -> dict:
    """predicted == measured for every K-step, and whether the read is the intended one. ValueError when the
    case's steps, descriptors, D (float, [steps, 64, n], no NaN) and image (1-D uint8) do not fit together."""
    reg, steps, n = case["result"]["region_addr"], case["steps"], case["n"]
    if not (isinstance(steps, int) and steps >= 1 and len(case["desc_a"]) == len(case["desc_b"]) == steps
            and d.shape == (steps, 64, n) and d.dtype.kind == "f" and not np.isnan(d).any() and image.ndim == 1
            and image.dtype == np.uint8):
        raise ValueError(f"case {case.get('id')}: steps, descriptors, D shape, dtypes or values do not fit together "
                         f"(D {d.dtype} {d.shape}, image {image.dtype} {image.shape})")
    exact, intended, predicted_intended = True, True, True
    for s in range(case["steps"]):
        da = WgmmaDescriptor.decode(case["desc_a"][s] + (reg >> 4))  # the kernel adds region >> 4
        db = WgmmaDescriptor.decode(case["desc_b"][s] + (reg >> 4))
        p = predict_d(image, reg, case["dtype"], case["n"], da, db, bool(case["ta"]), bool(case["tb"]))
        want = intended_d(case, s)
        exact &= np.array_equal(p, d[s].astype(np.float64))
        intended &= np.array_equal(d[s].astype(np.float64), want)
        predicted_intended &= np.array_equal(p, want)
    return dict(exact=bool(exact), measured_intended=bool(intended), predicted_intended=bool(predicted_intended))


def validate_cutlass_oracle(root: Path) -> dict:
    """lapis's sm90 and sm100 descriptor builders against CUTLASS's make_gmma_desc / make_umma_desc, bit for bit.
    CaptureError naming the file and the layout for one the builders refuse (lapis.layouts raises)."""
    layouts = steps = bad = 0
    first = None
    provs = []
    for folder in manifests(root, "cutlass_oracle"):
        cap = read_cutlass_oracle(folder)
        man = cap.manifest
        provs.append(dict(man["provenance"], folder=f"cutlass_oracle/{folder.name}"))
        for i, lay in enumerate(man["layouts"]):
            try:
                pairs = _oracle_steps(lay, man["smem_base"])
            except (LapisError, ValueError, TypeError, IndexError, OverflowError) as exc:
                raise CaptureError("a CUTLASS oracle layout can be replayed", f"{cap.file}: layouts[{i}]: "
                                   f"{exc.__class__.__name__}: {exc}", FIX) from None
            layouts += 1
            for s, ours, theirs in pairs:
                steps += 1
                if ours != theirs:
                    bad += 1
                    first = first or dict(layout=lay, step=s, lapis=[hex(v) for v in ours])
    return dict(cases=layouts, k_steps=steps, disagreements=bad, first_disagreement=first, provenance=provs)


def _oracle_steps(lay: dict, base: int) -> list[tuple[int, tuple, tuple]]:
    """(K-step, lapis's descriptors, CUTLASS's) of every K-step of one oracle layout: sm90 and sm100, or sm100
    alone where the layout has no sm90 descriptor."""
    tile = CanonicalLayout(lay["major"], lay["swizzle"], lay["dtype"], lay["mn"], lay["k"], lay["order"])
    out = []
    for s in range(lay["steps"]):
        sm100 = umma_descriptor_for(tile, base, s).encode()
        if "sm90" in lay and any(lay["sm90"]):  # v2 layouts (128B_base32B) have no sm90 descriptor
            out.append((s, (descriptor_for(tile, base, s, wgmma_operand=False).encode(), sm100),
                        (lay["sm90"][s], lay["sm100"][s])))
        else:
            out.append((s, (sm100,), (lay["sm100"][s],)))
    return out


def validate_bank_conflicts(root: Path) -> dict:
    """Wavefronts per pattern: lapis.layouts.bank_conflicts against Nsight Compute on the H200. CaptureError naming
    the file and the pattern for one the model refuses (an unknown access kind, misaligned or too few lanes)."""
    rows, provs, skipped = [], [], {}
    for folder in manifests(root, "bank"):
        cap = read_bank(folder)
        man = cap.manifest
        provs.append(dict(man["provenance"], folder=f"bank/{folder.name}"))
        _add(skipped, cap.not_compared)
        for i, p in enumerate(man["patterns"]):
            if "measured" not in p:
                continue
            try:
                predicted, ideal = wavefronts(p["kernel"], p["offsets"])
            except (LapisError, ValueError, TypeError, IndexError, OverflowError) as exc:
                raise CaptureError("a bank pattern can be replayed", f"{cap.file}: patterns[{i}] (id {p['id']}): "
                                   f"{exc.__class__.__name__}: {exc}", FIX) from None
            rows.append(dict(id=p["id"], kernel=p["kernel"], name=p["name"], ideal=ideal, predicted=predicted,
                             measured=p["measured"]["wavefronts"]))
    out = dict(patterns=len(rows), conflicting_patterns=sum(r["measured"] > r["ideal"] for r in rows),
               degrees=sorted({r["measured"] / r["ideal"] for r in rows if r["measured"] > r["ideal"]}),
               disagreements=sum(r["predicted"] != r["measured"] for r in rows), table=rows, provenance=provs)
    return dict(out, not_compared=skipped) if skipped else out


def _add(total: dict, counts: dict) -> None:
    for reason, n in counts.items():
        total[reason] = total.get(reason, 0) + n


def validate_mma(captures: str | None = None) -> dict:
    """wgmma reads, the CUTLASS oracle and bank conflicts against the captures under `captures` (module
    docstring). CaptureError naming the file for a capture it cannot read, a case it cannot replay, or a capture
    none of whose entries can be compared."""
    root = captures_root(captures, kinds=("wgmma", "cutlass_oracle", "bank"))
    rows, provs, skipped = [], [], {}
    for folder in manifests(root, "wgmma"):
        cap = read_wgmma(folder)
        man, imgs, ds = cap.manifest, cap.arrays["inputs"], cap.arrays["d"]
        provs.append(dict(man["provenance"], folder=f"wgmma/{folder.name}"))
        _add(skipped, cap.not_compared)
        for i, c in enumerate(man["cases"]):
            if c["result"]["status"] != "ok":
                continue
            try:
                rows.append((c, case_result(c, imgs[f"img{c['id']}"], ds[f"d{c['id']}"])))
            except CaptureError:
                raise
            except (LapisError, KeyError, IndexError, TypeError, ValueError, OverflowError) as exc:
                raise CaptureError("a wgmma case can be replayed", f"{cap.file}: cases[{i}] (id {c['id']}): "
                                   f"{exc.__class__.__name__}: {exc}", FIX) from None
    out = summarize(rows, provs)
    if skipped:
        out["wgmma"]["not_compared"] = skipped
    oracle = validate_cutlass_oracle(root)
    banks = validate_bank_conflicts(root)
    out["provenance"] = merge_provenance(provs + oracle.pop("provenance") + banks.pop("provenance"))
    out["cutlass_oracle"] = oracle
    out["bank_conflicts"] = banks
    return out


def _key(c: dict) -> str:
    return json.dumps([c.get(k) for k in CASE_KEYS])


def summarize(rows: list, provs: list) -> dict:
    """Counts over distinct case tuples (an fp8 digit run is not a new case)."""
    by_case: dict[str, list] = {}
    for c, r in rows:
        by_case.setdefault(_key(c), []).append((c, r))
    wrong = [k for k, v in by_case.items() if not all(r["exact"] for _, r in v)]
    canonical = {k: v for k, v in by_case.items() if v[0][0]["tag"] not in ("mismatch", "base-offset-formula")}
    pairs = {k: v for k, v in by_case.items() if k not in canonical}
    counted = {k: v for k, v in pairs.items() if not all(r.get("predicted_intended") for _, r in v)}

    def settled(cases):
        return all(r.get("measured_intended") for v in cases for _, r in v) if cases else None
    first = lambda v: v[0][0]  # noqa: E731
    lbo = [v for v in by_case.values() if first(v)["tag"] == "lbo-ignored?"]
    zero = [v for v in by_case.values() if first(v)["tag"] == "base-offset-zero"]
    formula = [v for v in by_case.values() if first(v)["tag"] == "base-offset-formula"]
    return {
        "wgmma": dict(cases=len(canonical), mismatches=sum(k in wrong for k in canonical),
                      majors=sorted({first(v)["major"] for v in canonical.values()}),
                      swizzles=sorted({first(v)["swizzle"] for v in canonical.values()}),
                      dtypes=sorted({first(v)["dtype"] for v in canonical.values()}),
                      n_values=sorted({first(v)["n"] for v in canonical.values()}),
                      smem_changed=sum(r.get("status") is None and c["result"].get("smem_changed_bytes", 0) > 0
                                       for c, r in rows)),
        "mismatch_pairs": dict(cases=len(counted), prediction_failures=sum(k in wrong for k in counted),
                               harmless=len(pairs) - len(counted),
                               kinds=sorted({(first(v)["corrupt"] or ["base-offset-formula"])[0]
                                             for v in counted.values()})),
        "settled": {
            "lbo_ignored_swizzled_k_major": settled(lbo),
            "base_offset_zero_reads_tma_layout": settled(zero),
            "ptx_formula_base_offset_reads_tma_layout": settled(formula),
        },
        "provenance": merge_provenance(provs),
    }


def not_compared_lines(out: dict) -> list[str]:
    """The text lines that count the entries not compared (wgmma cases by status, bank patterns not measured);
    none when every entry was compared."""
    parts = [(what, out[key].get("not_compared", {})) for what, key in (("wgmma cases", "wgmma"),
                                                                         ("bank patterns", "bank_conflicts"))]
    return ["not compared: " + ", ".join(f"{n} {what} ({why})" for why, n in sorted(counts.items()))
            for what, counts in parts if counts]


def passed(out: dict) -> bool:
    w, p, o, b = out["wgmma"], out["mismatch_pairs"], out["cutlass_oracle"], out["bank_conflicts"]
    return (w["cases"] > 0 and w["mismatches"] == 0 and p["prediction_failures"] == 0 and o["disagreements"] == 0
            and b["patterns"] > 0 and b["disagreements"] == 0)

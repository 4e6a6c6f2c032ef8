"""`lapis validate mma`: replay the H200 wgmma captures against `lapis.layouts.descriptors.mma_read`.

For every case and K-step, D is predicted from the captured shared-memory image
and the two descriptors alone (no knowledge of how the image was built) and
compared with the measured D exactly. The intended D (the tested operand read as
laid out) tells deliberate mismatches apart: a pair counts only when its
predicted D differs from the intended one.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from lapis.captures.store import captures_root, load_capture, manifests
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
    """predicted == measured for every K-step, and whether the read is the intended one."""
    reg, steps, n = case["result"]["region_addr"], case["steps"], case["n"]
    if not (isinstance(steps, int) and steps >= 1 and len(case["desc_a"]) == len(case["desc_b"]) == steps
            and d.shape == (steps, 64, n) and not np.isnan(d).any() and image.ndim == 1):
        raise ValueError(f"case {case.get('id')}: steps, descriptors, D shape or values do not fit together")
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
    """lapis's sm90 and sm100 descriptor builders against CUTLASS's make_gmma_desc / make_umma_desc, bit for bit."""
    layouts = steps = bad = 0
    first = None
    provs = []
    for folder in manifests(root, "cutlass_oracle"):
        man, _ = load_capture(folder, with_dumps=False)
        provs.append(dict(man["provenance"], folder=f"cutlass_oracle/{folder.name}"))
        base = man["smem_base"]
        for lay in man["layouts"]:
            layouts += 1
            tile = CanonicalLayout(lay["major"], lay["swizzle"], lay["dtype"], lay["mn"], lay["k"], lay["order"])
            for s in range(lay["steps"]):
                steps += 1
                sm100 = umma_descriptor_for(tile, base, s).encode()
                if "sm90" in lay and any(lay["sm90"]):  # v2 layouts (128B_base32B) have no sm90 descriptor
                    ours, theirs = (descriptor_for(tile, base, s, wgmma_operand=False).encode(), sm100), \
                        (lay["sm90"][s], lay["sm100"][s])
                else:
                    ours, theirs = (sm100,), (lay["sm100"][s],)
                if ours != theirs:
                    bad += 1
                    first = first or dict(layout=lay, step=s, lapis=[hex(v) for v in ours])
    return dict(cases=layouts, k_steps=steps, disagreements=bad, first_disagreement=first, provenance=provs)


def validate_bank_conflicts(root: Path) -> dict:
    """Wavefronts per pattern: lapis.layouts.bank_conflicts against Nsight Compute on the H200."""
    rows, provs = [], []
    for folder in manifests(root, "bank"):
        man, _ = load_capture(folder, with_dumps=False)
        provs.append(dict(man["provenance"], folder=f"bank/{folder.name}"))
        for p in man["patterns"]:
            predicted, ideal = wavefronts(p["kernel"], p["offsets"])
            rows.append(dict(id=p["id"], kernel=p["kernel"], name=p["name"], ideal=ideal, predicted=predicted,
                             measured=p["measured"]["wavefronts"]))
    return dict(patterns=len(rows), conflicting_patterns=sum(r["measured"] > r["ideal"] for r in rows),
                degrees=sorted({r["measured"] / r["ideal"] for r in rows if r["measured"] > r["ideal"]}),
                disagreements=sum(r["predicted"] != r["measured"] for r in rows), table=rows, provenance=provs)


def validate_mma(captures: str | None = None) -> dict:
    root = captures_root(captures, kinds=("wgmma", "cutlass_oracle", "bank"))
    try:
        return _validate_mma(root)
    except LapisError:  # already names its rule (a capture, layout or bank error): passed on as it is
        raise
    except (KeyError, IndexError, TypeError, ValueError, OSError, AttributeError, zipfile.BadZipFile) as exc:
        raise CaptureError("a capture does not match its manifest", f"{exc.__class__.__name__}: {exc}",
                           "restore lapis/data/captures from git (captures are never edited by hand)") from None


def _validate_mma(root: Path) -> dict:
    rows, provs = [], []
    for folder in manifests(root, "wgmma"):
        man, _ = load_capture(folder, with_dumps=False)
        provs.append(dict(man["provenance"], folder=f"wgmma/{folder.name}"))
        try:
            with np.load(folder / "inputs.npz") as imgs, np.load(folder / "d.npz") as ds:
                for c in man["cases"]:
                    if c["result"]["status"] != "ok":
                        rows.append((c, dict(exact=False, status=c["result"]["status"])))
                        continue
                    rows.append((c, case_result(c, imgs[f"img{c['id']}"], ds[f"d{c['id']}"])))
        except (OSError, KeyError, ValueError, IndexError, TypeError, zipfile.BadZipFile) as exc:
            raise CaptureError("unreadable wgmma capture", f"{folder}: {exc.__class__.__name__}: {exc}",
                               "restore the folder from git (captures are never edited by hand)") from None
    out = summarize(rows, provs)
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


def passed(out: dict) -> bool:
    w, p, o, b = out["wgmma"], out["mismatch_pairs"], out["cutlass_oracle"], out["bank_conflicts"]
    return (w["cases"] > 0 and w["mismatches"] == 0 and p["prediction_failures"] == 0 and o["disagreements"] == 0
            and b["patterns"] > 0 and b["disagreements"] == 0)

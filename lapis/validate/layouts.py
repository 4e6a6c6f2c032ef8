"""Check lapis's models against committed hardware captures (`lapis validate layouts`).

Captures live in folders with a `manifest.json` naming their provenance; the
default root is lapis/data/captures (lapis.data.CAPTURES). Nothing here
edits a capture: a capture is data, the model is what gets checked. Captures are
read by lapis.captures.readers (read_tma, read_tma_encode): a capture it cannot
read is a CaptureError naming the file and the field.

Every TMA configuration gets one verdict (tma.verdicts in the JSON). Those not
compared are counted and printed: "unmodelled" (interleaved placement, whatever
the GPU did), "encode-rejected" (checked by the encode rules instead) and
"timeout" (a modelled load whose copy never completed on the GPU). They do not
fail the check; a capture none of whose configurations can be compared (every
one timed out or unmodelled) is a CaptureError (exit 2).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lapis.captures.readers import read_tma, read_tma_encode
from lapis.captures.safe import FIX, comparable
from lapis.captures.store import captures_root, manifests
from lapis.errors import CaptureError, LapisError, LayoutError
from lapis.layouts.tma import SWIZZLE_CODES, NotModelled, TensorMap, load_box, place_box, tma_type
from lapis.layouts.tma.rules import RULES, EncodeArgs, check


def source_image(cfg: dict, digit: int) -> np.ndarray:
    """The global tensor a dump configuration loaded from (the capture's fill rule, see its manifest)."""
    e = _elem_bytes(cfg)
    n = cfg["strides"][-1] * cfg["dims"][-1] if cfg["rank"] > 1 else cfg["dims"][0] * e
    if "values" in cfg:  # explicit element values, repeated over the tensor
        return np.resize(np.array(cfg["values"], dtype=f"<u{e}"), n // e).view(np.uint8)
    slots = np.arange(n // e, dtype=np.uint64) + 1
    shift = 8 * e * digit
    vals = slots >> np.uint64(shift) if shift < 64 else np.zeros_like(slots)
    return vals.astype(f"<u{e}").view(np.uint8)


def _elem_bytes(cfg: dict) -> int:
    return tma_type(cfg["dtype"]).bytes


def tensor_map(cfg: dict) -> TensorMap:
    return TensorMap.from_driver_args(cfg["dtype"], cfg["dims"], cfg["strides"], cfg["box"], cfg["elem_strides"],
                                      cfg["interleave"], cfg["swizzle"], cfg["l2"], cfg["oob"])


def predict_region(cfg: dict, run: dict) -> np.ndarray:
    """The bytes the model says the dumped region holds after the load(s)."""
    res = cfg["result"]
    smem = np.full(cfg["region_bytes"], run["sentinel"], np.uint8)
    image = source_image(cfg, run["digit"])
    tmap = tensor_map(cfg)
    for coords, dst in zip(cfg["coords"], res["dst_addrs"]):
        load_box(tmap, image, coords, dst, smem, res["region_addr"])
    return smem


def _predicts_fault(cfg: dict) -> bool:
    """Does the model reject this load (a fault on hardware)? Uses the planned addresses."""
    tmap = tensor_map(cfg)
    try:
        for coords, off in zip(cfg["coords"], cfg["dst_offsets"]):
            place_box(tmap, coords, 1 << 20 | off)  # any 1024 B-aligned region start: offsets decide
    except NotModelled:
        return False
    except LayoutError:
        return True
    return False


@dataclass
class DumpCheck:
    """One configuration's verdict."""

    cfg: dict
    verdict: str  # match, mismatch, fault-predicted, fault-missed, unmodelled, encode-rejected, timeout
    bytes_compared: int = 0
    mismatched_bytes: int = 0
    first_mismatch: int | None = None


def check_dump(cfg: dict, dumps) -> DumpCheck:
    status = cfg["result"]["status"]
    if status == "encode_rejected":
        rejected = check(EncodeArgs.from_case(dict(cfg, addr_offset=0), base=256))
        return DumpCheck(cfg, "encode-rejected" if rejected else "encode-missed")
    if status == "fault":
        return DumpCheck(cfg, "fault-predicted" if _predicts_fault(cfg) else "fault-missed")
    try:
        predicted = [predict_region(cfg, run) for run in cfg["result"]["runs"]]
    except NotModelled:
        return DumpCheck(cfg, "unmodelled")
    except LayoutError:
        return DumpCheck(cfg, "fault-false-alarm")
    if status == "timeout":
        return DumpCheck(cfg, "timeout")
    if not cfg["result"]["runs"]:
        raise KeyError("an ok configuration without runs")
    n = bad = 0
    first = None
    for run, p in zip(cfg["result"]["runs"], predicted):
        m = dumps[run["key"]]
        diff = np.nonzero(m != p)[0]
        n, bad = n + m.size, bad + diff.size
        if diff.size and first is None:
            first = int(diff[0])
    return DumpCheck(cfg, "mismatch" if bad else "match", n, bad, first)


def config_key(cfg: dict) -> str:
    keys = ("dtype", "dims", "strides", "box", "elem_strides", "interleave", "swizzle", "l2", "oob", "coords",
            "dst_offsets")
    return json.dumps([cfg[k] for k in keys])


NOT_COMPARED = ("timeout", "unmodelled")  # verdicts of configurations whose bytes tell nothing about the model


def validate_tma(root: Path) -> dict:
    """Replay every TMA dump capture under root/tma against the placement model. CaptureError naming the file for
    a capture it cannot read (lapis.captures.readers.read_tma) or none of whose configurations can be compared
    (every one timed out or unmodelled)."""
    checks, prov = [], []
    for folder in manifests(root, "tma"):
        cap = read_tma(folder)
        prov.append(dict(cap.manifest["provenance"], folder=f"tma/{folder.name}"))
        mine = []
        for i, c in enumerate(cap.manifest["configs"]):
            try:
                mine.append(check_dump(c, cap.arrays))
            except (KeyError, ValueError, IndexError, TypeError, OverflowError) as exc:
                raise CaptureError("a TMA configuration can be replayed", f"{cap.file}: configs[{i}] (id {c['id']}): "
                                   f"{exc.__class__.__name__}: {exc}", FIX) from None
        comparable(cap.file, "tma", len(mine), {v: sum(c.verdict == v for c in mine) for v in NOT_COMPARED})
        checks += mine
    return summarize(checks, prov)


def summarize(checks: list[DumpCheck], prov: list[dict]) -> dict:
    compared = [c for c in checks if c.verdict in ("match", "mismatch")]
    distinct = {config_key(c.cfg) for c in compared}

    def count(pred):
        return len({config_key(c.cfg) for c in compared if pred(c.cfg)})

    verdicts: dict[str, int] = {}
    for c in checks:
        verdicts[c.verdict] = verdicts.get(c.verdict, 0) + 1
    return dict(
        configs=len(distinct),
        bytes_compared=sum(c.bytes_compared for c in compared),
        mismatched_bytes=sum(c.mismatched_bytes for c in compared),
        mismatched_configs=sorted(c.cfg["id"] for c in compared if c.mismatched_bytes),
        verdicts=verdicts,
        faults=dict(observed=sum(c.cfg["result"]["status"] == "fault" for c in checks),
                    predicted=verdicts.get("fault-predicted", 0),
                    missed=verdicts.get("fault-missed", 0), false_alarms=verdicts.get("fault-false-alarm", 0)),
        encode_missed=verdicts.get("encode-missed", 0),
        atom_modes=atom_mode_facts(checks),
        ranks=sorted({c.cfg["rank"] for c in compared}),
        element_bytes=sorted({tma_type(c.cfg["dtype"]).bytes for c in compared}),
        swizzles=sorted({c.cfg["swizzle"] for c in compared}),
        unaligned_bases=count(_off_repeat),
        oob_configs=count(_is_oob),
        elem_strided_configs=count(lambda g: any(s > 1 for s in g["elem_strides"][1:])),
        provenance=prov,
    )


def atom_mode_facts(checks: list[DumpCheck]) -> dict:
    """For each 128B_ATOM_* swizzle, three separate facts from the dumps: did the driver accept the encode,
    did a copy complete on the GPU, did its bytes match a model (None: not observed)."""
    facts = {}
    for name, code in SWIZZLE_CODES.items():
        if not name.startswith("128B_atom"):
            continue
        cs = [c for c in checks if c.cfg["swizzle"] == code]
        accepted = [c for c in cs if c.cfg["result"]["status"] != "encode_rejected"]
        done = [c for c in accepted if c.cfg["result"]["status"] == "ok"]
        compared = [c for c in done if c.verdict in ("match", "mismatch")]
        facts[name] = dict(configs=len(cs), encode_accepted=bool(accepted) if cs else None,
                           copy_completes=bool(done) if accepted else None,
                           bytes_match=all(c.verdict == "match" for c in compared) if compared else None)
    return facts


def _off_repeat(cfg: dict) -> bool:
    """A swizzled box whose destination is not on its swizzle pattern's repeat boundary (8 x span)."""
    span = tensor_map(cfg).row_pitch if cfg["swizzle"] else 0
    return bool(span) and any(d % (8 * span) for d in cfg["dst_offsets"])


def _is_oob(cfg: dict) -> bool:
    p = tensor_map(cfg)
    return any(c < 0 or c + (n - 1) * (s if i else 1) >= d
               for coords in cfg["coords"]
               for i, (c, n, s, d) in enumerate(zip(coords, p.loaded, p.elem_strides, p.dims)))


def merge_provenance(provs: list[dict]) -> dict:
    """Fields every capture shares at the top (gpu, driver, ...), and each capture's full record."""
    shared = {k: v for k, v in provs[0].items() if all(p.get(k) == v for p in provs)} if provs else {}
    shared.pop("source_blobs", None)
    return dict(shared, captures=provs)


ENCODE_KEYS = ("dtype", "rank", "addr_offset", "dims", "strides", "box", "elem_strides", "interleave", "swizzle",
               "l2", "oob", "map_offset", "null_address")


def validate_encode(root: Path) -> dict:
    """Replay every recorded cuTensorMapEncodeTiled decision against lapis's rule checker. CaptureError naming the
    file and the field for a capture it cannot read (lapis.captures.readers.read_tma_encode) or a case it cannot
    replay."""
    seen, disagreements, fired, alone, provs = {}, [], set(), set(), []
    for folder in manifests(root, "tma_encode"):
        cap = read_tma_encode(folder)
        man = cap.manifest
        provs.append(dict(man["provenance"], folder=f"tma_encode/{folder.name}"))
        for i, case in enumerate(man["cases"]):
            try:
                rules = {v.rule for v in check(EncodeArgs.from_case(case, base=256))}
            except (LapisError, TypeError, OverflowError) as exc:
                raise CaptureError("an encode case can be replayed", f"{cap.file}: cases[{i}] (id {case['id']}): "
                                   f"{exc.__class__.__name__}: {exc}", FIX) from None
            accepted = case["result"]["accepted"]
            seen[json.dumps([case.get(k) for k in ENCODE_KEYS])] = accepted
            if bool(rules) == accepted:
                disagreements.append(dict(folder=folder.name, id=case["id"], accepted=accepted, rules=sorted(rules)))
            if not accepted:
                fired |= rules
                alone |= rules if len(rules) == 1 else set()
    return dict(cases=len(seen), rejected=sum(not a for a in seen.values()), disagreements=len(disagreements),
                disagreeing_cases=disagreements[:20], rules=len(RULES), rules_covered=len(fired & set(RULES)),
                rules_isolated=len(alone & set(RULES)), rules_not_covered=sorted(set(RULES) - fired),
                provenance=provs)


def validate_layouts(captures: str | None = None) -> dict:
    root = captures_root(captures)
    tma, encode = validate_tma(root), validate_encode(root)
    return {"tma": tma, "encode": encode,
            "provenance": merge_provenance(tma.pop("provenance") + encode.pop("provenance"))}


def format_validation(out: dict) -> str:
    t, e, p = out["tma"], out["encode"], out["provenance"]
    f, v = t["faults"], t["verdicts"]
    lines = [
        f"TMA placement: {t['configs']} distinct loads, {t['bytes_compared']} bytes compared, "
        f"{t['mismatched_bytes']} mismatched",
        f"  ranks {t['ranks']}, element bytes {t['element_bytes']}, swizzle codes {t['swizzles']}; "
        f"{t['unaligned_bases']} off the swizzle repeat, {t['oob_configs']} out of bounds, "
        f"{t['elem_strided_configs']} element-strided",
        f"TMA faults: {f['observed']} observed, {f['predicted']} predicted, {f['missed']} missed, "
        f"{f['false_alarms']} false alarms",
        f"not compared: {v.get('unmodelled', 0)} interleaved loads (placement not modelled), "
        f"{v.get('encode-rejected', 0)} whose encode the driver rejected (checked by the rules below), "
        f"{v.get('timeout', 0)} modelled loads that timed out on the GPU (the copy never completed)",
        f"cuTensorMapEncodeTiled: {e['cases']} distinct cases, {e['rejected']} rejected, {e['disagreements']} "
        f"disagreements; {e['rules_covered']} of {e['rules']} enforced rules seen rejecting",
    ]
    return "\n".join(lines) + "\n" + format_provenance(p)


def format_provenance(p: dict) -> str:
    """The shared hardware facts, then one line per capture (its blobs: --json)."""
    lines = [f"provenance: {p.get('gpu')} (sm {p.get('compute_capability')}), driver {p.get('driver')}, CUDA driver "
             f"API {p.get('cuda_driver_api')}, runtime {p.get('cuda_runtime')}"]
    lines += [f"  {c['folder']}: {c['date']}, commit {c['commit'][:12]}{' dirty' if c['dirty'] else ''}, "
              f"{len(c['source_blobs'])} source blobs (--json lists them); {c['command']}" for c in p["captures"]]
    return "\n".join(lines)


def passed(out: dict) -> bool:
    """Everything captured agrees with the model, and something was actually compared."""
    t, e = out["tma"], out["encode"]
    return (t["configs"] > 0 and t["bytes_compared"] > 0 and t["mismatched_bytes"] == 0
            and not (t["faults"]["missed"] or t["faults"]["false_alarms"] or t["verdicts"].get("encode-missed"))
            and e["disagreements"] == 0)

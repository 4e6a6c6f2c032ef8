"""`lapis validate micro`: every committed softmax microbenchmark against lapis.model.smsp's prediction.

The constants are single-instruction ones only: lapis.model.smsp.Constants.from_pipes_capture of the pipes capture
(micro/h200-2026-12-01-pipes: throughput and dependent-issue latency of one instruction class per pipe) over
lapis/data/smsp_pending.json for what that capture does not measure (issue_per_clk and the uniform, cbu and adu
pipes: datasheet figures). No capture this command predicts is read for a constant (`constants_from` lists the
files read, tests/validate/test_micro.py checks it).

Loop bodies: each kernel's .cu (lapis/gpu/kernels) compiled here for sm_90a (nvcc, cuobjdump; CaptureError
without them, both looked up before nvcc runs). The softmax role's loop: the innermost loop with MUFU and no
HGMMA; the GEMM role's: the innermost with HGMMA and no MUFU. Forward branches taken in one softmax iteration:
the follower's flag read (a branch over an LDS; the leader never reads the flag) and, for ex2_cond, the O
rescale's skip (the scores repeat, so the row maximum never changes after the first tile: micro_softmax_v1.cu).

Rows (measured = 1 / the capture's `value` median, in cycles per unit counted there):
- softmax.<fl>.wg<1|2> (micro/h200-2026-11-30-v3): SMSP cycles per warp-iteration = smsp.simulate(body, wg)
  (with several warps, here and below, the mean over smsp.PHASES starting phases: the warpgroups run
  unsynchronised).
- contend.<fl>.<state> (micro/h200-2026-11-30-contend-launch, kernels/micro_mix_softmax_v3.cu), the leader
  warpgroup's cycles per unit: s (a softmax tile alone) simulate(body, 1); ss (beside the other warpgroup's softmax:
  two warps per SMSP) 2 x simulate(body, 2); st (a softmax tile while the other warpgroup's wgmma pairs are in
  flight) and ts (a GEMM pair while the other runs softmax): both from one lapis.model.tensor_share.run of the
  softmax body beside the pair's tensor job; t (a GEMM pair alone: its tensor-pipe cycles and completion gap) and
  tt (two warpgroups' pairs on one tensor pipe, 2 x the tensor-pipe cycles).
- contend3.<fl>.<state> (micro/h200-2026-12-02-contend3, kernels/micro_mix_softmax_v4.cu: three warpgroups, the
  GEMM unit one QK group from shared memory), the leader's cycles per unit: s, ss, t as contend's; st and ts from
  tensor_share.run with one softmax warp per SMSP; sst (a softmax tile beside another warpgroup's softmax and a
  third's wgmma) and tss (a GEMM unit beside two softmax warpgroups) with two. `blind_predicted`: the prediction
  committed before the kernel first ran (lapis/data/blind/micro/contend3.json).
- density.<class>_c<CH>.<alone|ss>, density.<class>_c<CH>.ss_tensor, density.wgmma.ss (micro/h200-2026-12-03-density,
  kernels/micro_beside_v2.cu: one class on CH dependent chains alone and beside wgmma in flight, the wgmma
  follower's cycles per unit): lapis.validate.density; the one-chain streams beside wgmma are the tensor_share
  constants and no row. `blind_predicted`: lapis/data/blind/micro/density.json, committed before the kernel ran.
- sweep.<class>_c<CH>.<alone|ss>, .ss_tensor, sweep.wgmma.ss (micro/h200-2026-12-04-sweep, kernels/micro_beside_v3.cu:
  the same states at FFMA 4-8 chains and FMNMX 3-4): as density's. `blind_predicted`: lapis/data/blind/micro/
  sweep.json, committed before the kernels ran, by the model without tensor_share's FMA streak and branch hold:
  those rules were shaped after this capture was seen (their constants come from beside.ffma and
  density.ffma_c1.alone, lapis.model.branch), so these rows test the constants, not the rules' form, blind.
- chain.n128.<ss|rs|pair>.k<K> (micro/h200-2026-12-03-chain, kernels/micro_wgmma_v2.cu: one warpgroup's K wgmmas,
  or the GEMM pair's 8 + 8, fence to wait_group 0; measured = the capture's value, in cycles):
  lapis.model.contend.chain_cycles, the GEMM pair's cost in the contend states; the one-wgmma chains are the
  completion gap's constant measured again, so not rows. `blind_predicted`: lapis/data/blind/micro/chain.json,
  committed before the kernel first ran.
- mixsm.<fl>.<part>, mixsm2.<fl>.<part> (micro/h200-2026-11-30-v3-mix, -v3-mix2; kernels micro_mix_softmax_v1.cu,
  _v2.cu): one job of `tensor_iters` GEMM units and `softmax_iters` softmax tiles on two warpgroups; both: the two
  overlap at the shared-cycle rates until the shorter ends, the rest runs alone.

A GEMM unit: its tensor-pipe cycles, FLOP / the wgmma rate (wgmma_flop_per_clk_sm: the clock capture's full-duty
wgmma m64n128k16 bursts on every SM, FLOP per probed cycle per SM, a single-instruction-class measurement; the pipes
capture times mma.sync only), then its completion gap: the last group's wgmma latency less one wgmma's pipe cycles
(wgmma.latency.n128.<ss|rs> of micro/h200-2026-11-29, one m64n128k16 waited). The cycles the softmax and the tensor
pipe share: lapis.model.tensor_share (each pipe's share of a contested cycle from its single-class stream beside
wgmma, micro/h200-2026-12-02-beside; an isolated instruction's from the one-chain streams of
micro/h200-2026-12-03-density).

`two_captures`: each state both softmax campaigns measured (contend.<fl>.<state> and contend3.<fl>.<state>), and how
far the ratio of its two measurements departs from the ratio of its two predictions.

Errors: CaptureError naming the file (and the field or measurement) for a results.json that is not
{measurements: [{name, ...}]}, whose ok record lacks params or a value.median above zero (with a finite inverse),
or that has two ok records of one name; a value.median whose row error overflows; two captures of one state more
than TWO_CAPTURES_SPAN apart; for the contend and contend3 captures also a name their campaign (version 3, 6) does
not define, a record whose kernel or IDENTITY params are not its campaign item's, or no ok record; for contend3 a
role outside softmax / gemm / null or a measurement without a blind prediction; for the density and sweep
captures a name campaign version 7 (9) does not define, a kernel, params.chains or params.follow other than the
campaign item's, a raw.follower_rate beside wgmma that is not a non-empty list of finite numbers above zero, no
ok record, or a measurement without a blind prediction; for a blind file whose predicted_cycles are not finite
numbers above zero. The contend3,
density and sweep captures, their blind files and the tensor_share captures are read before anything is compiled.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from lapis.captures import safe
from lapis.data import BLIND, CAPTURES, DATA
from lapis.errors import CaptureError
from lapis.model import contend, instruction_mix
from lapis.model import micro_campaign as mc
from lapis.model import sass, smsp, tensor_share
from lapis.model.contend import completion_gap, gemm_cycles, role_loop, softmax_body  # as the schedules take them
from lapis.validate import density

KERNELS = DATA.parent / "gpu" / "kernels"
SOFTMAX_CAPTURE = CAPTURES / "micro" / "h200-2026-11-30-v3" / "micro" / "results.json"
CONTEND_CAPTURE = CAPTURES / "micro" / "h200-2026-11-30-contend-launch" / "micro" / "results.json"
MIX_CAPTURES = {"mixsm": (CAPTURES / "micro" / "h200-2026-11-30-v3-mix" / "micro" / "results.json",
                          "micro_mix_softmax_v1.cu", 8),  # wgmma m64n128k16 per GEMM unit: one QK batch
                "mixsm2": (CAPTURES / "micro" / "h200-2026-11-30-v3-mix2" / "micro" / "results.json",
                           "micro_mix_softmax_v2.cu", 16)}  # QK + PV
CONTEND_SOURCE = "micro_mix_softmax_v3.cu"  # its GEMM unit: contend.PAIR_WGMMAS, PV's A from registers
CONTEND3_SOURCE, CONTEND3_WGMMAS, CONTEND3_LAST_GROUP = "micro_mix_softmax_v4.cu", 8, "ss"  # one QK group per unit
CONTEND3_BLIND = BLIND / "micro" / "contend3.json"  # committed before micro_mix_softmax_v4.cu first ran
CONTEND3_CAPTURE = CAPTURES / "micro" / "h200-2026-12-02-contend3" / "micro" / "results.json"
CHAIN_CAPTURE = CAPTURES / "micro" / "h200-2026-12-03-chain" / "micro" / "results.json"  # kernels/micro_wgmma_v2.cu
CHAIN_BLIND = BLIND / "micro" / "chain.json"  # committed before micro_wgmma_v2.cu first ran
MIX_LAST_GROUP = {"mixsm": "ss", "mixsm2": "rs"}  # the source of A in each GEMM unit's last group
# one nvcc run per source and process, shared with lapis.model.consumer_loop's (the contend kernel's file)
compiled = functools.lru_cache(maxsize=None)(instruction_mix.compiled)


@dataclass(frozen=True)
class Roles:
    """One kernel's two roles on one SMSP: the softmax tile (cycles alone, instructions per tile, the body) and the
    GEMM unit (cycles: the tensor-pipe bound; instructions per unit from its loop; gap: its completion gap)."""

    body: list
    tile_cycles: float
    tile_instr: int
    gemm_cycles: float | None
    gemm_instr: float | None
    gap: float = 0.0  # cycles after a GEMM unit's tensor-pipe work before the next issue (completion_gap)


def constants() -> tuple[smsp.Constants, list[str]]:
    """The SMSP constants and the three files they are read from (paths relative to lapis/data): the pipes capture,
    the pending constants and the bar capture's mbarrier wait (a single-mechanism microbenchmark too)."""
    files = (smsp.PIPES_CAPTURE, smsp.PENDING, smsp.BAR_CAPTURE)
    return smsp.Constants.from_pipes_capture(*files), [str(f.relative_to(DATA)) for f in files]


def gemm_instructions(instrs: list, wgmmas_per_unit: int) -> float:
    """Instructions one warp issues per GEMM unit: its loop's count scaled by the wgmmas per unit (the compiler
    may unroll the loop over two units)."""
    lp = role_loop(instrs, "gemm")
    body = instrs[lp.head:lp.tail + 1]
    return len(body) * wgmmas_per_unit / sum(i.opcode == "HGMMA" for i in body)


def together(r: Roles, consts: smsp.Constants, share: tensor_share.Share) -> tuple[float, float]:
    """(softmax tile cycles, GEMM unit cycles) while both run on the SMSP (tensor_share.run)."""
    return tensor_share.run(r.body, consts, share, r.gemm_cycles, r.gap)


def overlap_job(tensor_iters: int, softmax_iters: int, r: Roles, consts: smsp.Constants,
                share: tensor_share.Share) -> float:
    """Cycles of one mixsm job: both roles at their shared-cycle rates until the first ends, then the other alone
    (a GEMM unit alone: its tensor-pipe cycles and completion gap)."""
    alone = r.gemm_cycles + r.gap
    if not tensor_iters or not softmax_iters:
        return tensor_iters * alone + softmax_iters * r.tile_cycles
    s, g = together(r, consts, share)
    tg, ts = tensor_iters * g, softmax_iters * s
    if tg <= ts:
        return tg + (softmax_iters - tg / s) * r.tile_cycles
    return ts + (tensor_iters - ts / g) * alone


def predict_contend3(state: str, body: list, c: contend.Contend, consts: smsp.Constants,
                     share: tensor_share.Share) -> float:
    """The leader's cycles per unit in a three-warpgroup contend state (mc.CONTEND3_STATES): s, ss, t, st and ts
    the softmax body's Contend `c` beside the GEMM unit (contend.state_cycles, one softmax warp per SMSP beside
    wgmma); sst and tss from tensor_share.run with two (the two softmax warpgroups' warps share each SMSP beside
    the GEMM warpgroup's wgmma)."""
    if len(state) == 2 or state in ("s", "t"):
        return contend.state_cycles(c, state)
    soft, gemm = tensor_share.run(body, consts, share, c.gemm - c.gap, c.gap, warps=2)
    return soft if state.startswith("s") else gemm


def contend3_predictions(consts: smsp.Constants, compile_=compiled,
                         share: tensor_share.Share | None = None) -> dict[str, float]:
    """{contend3.<flavour>.<state>: the leader's predicted cycles per unit} for every version-6 measurement of the
    campaign (mc.items_v6_contend3), from kernels/micro_mix_softmax_v4.cu's SASS and the single-instruction
    constants."""
    share = share or tensor_share.Share.from_capture()
    fns = compile_(KERNELS / CONTEND3_SOURCE)
    cache, out = {}, {}
    for m in mc.items_v6_contend3(132):
        fl, state = m["name"].split(".")[1:]
        if fl not in cache:
            body = softmax_body(fns[f"micro_contend3_{fl}"], fl)
            cache[fl] = body, contend.of(body, consts, share, CONTEND3_WGMMAS, CONTEND3_LAST_GROUP)
        out[m["name"]] = predict_contend3(state, *cache[fl], consts, share)
    return out


def roles(functions: dict, kernel: str, flavour: str, wgmmas: int | None, consts: smsp.Constants,
          last_group: str = "rs") -> Roles:
    body = softmax_body(functions[kernel], flavour)
    tile = smsp.simulate(body, 1, consts)
    if wgmmas is None:
        return Roles(body, tile, len(body), None, None)
    return Roles(body, tile, len(body), gemm_cycles(wgmmas), gemm_instructions(functions[kernel], wgmmas),
                 completion_gap(last_group))


RESULTS = {"measurements": [{"name": safe.STR}]}  # a micro capture's results.json, as the rows read it
OK_RECORD = {"value": {"median": safe.POS}, "params": safe.DICT}  # each measurement with status "ok"
ROLE = safe.One("softmax", "gemm")
CONTEND3_PARAMS = {"lead": ROLE, "follow": safe.One(None, "softmax", "gemm"),
                   "follow2?": safe.One(None, "softmax", "gemm")}


def _measurements(path: Path) -> dict:
    """{name: record} of the capture's measurements with status "ok"; CaptureError naming the file and the field
    when it is not {measurements: [{name, ...}]} or an ok record lacks params or a value.median that is a finite
    number above zero (units per clock; the row's measured cycles are its inverse)."""
    return _checked(path)[1]


def _checked(path: Path) -> tuple[int, dict]:
    """(measurement records in the file, _measurements(path)); CaptureError also for a value.median whose inverse
    overflows (5e-324) and for two ok records of one name (which one a row reads would be the file's order)."""
    doc = smsp._read_json(path)
    safe.check(doc, RESULTS, path, "micro")
    found = {}
    for i, m in enumerate(doc["measurements"]):
        if m.get("status") == "ok":
            safe.check(m, OK_RECORD, path, "micro", f"measurements[{i}]")
            if not math.isfinite(1.0 / m["value"]["median"]):
                raise CaptureError("a micro capture's value.median has a finite inverse (the row's cycles per unit)",
                                   f"{path}: measurements[{i}].value.median {m['value']['median']!r}",
                                   "restore the capture from git (captures are never edited by hand)")
            if m["name"] in found:
                raise CaptureError("a micro capture has at most one measurement of a name with status ok",
                                   f"{path}: measurements[{i}] is a second {m['name']}",
                                   "restore the capture from git (captures are never edited by hand)")
            found[m["name"]] = m
    return len(doc["measurements"]), found


IDENTITY = ("flavour", "lead", "follow", "follow2", "roles")  # the params that say what a contend record ran


def _as_defined(m: dict, item: dict, path: Path) -> None:
    """CaptureError naming the file and the measurement unless its kernel and its IDENTITY params are those of the
    campaign's item of the same name (a record relabelled, or its roles changed, would be read as another state)."""
    want = dict(kernel=item["kernel"], **{k: item["params"].get(k) for k in IDENTITY})
    got = dict(kernel=m.get("kernel"), **{k: m["params"].get(k) for k in IDENTITY})
    if got != want:
        bad = {k: got[k] for k in want if got[k] != want[k]}
        raise CaptureError("a contend measurement ran the kernel and roles its campaign defines for its name",
                           f"{path}: {m['name']}: {bad} (the campaign's: {({k: want[k] for k in bad})})"[:400],
                           "restore the capture from git (captures are never edited by hand)")


def _contend_measurements(path: Path) -> dict:
    """The contend capture's ok contend.* measurements (_measurements), each a name campaign version 3 defines
    (mc.items_v3_contend) as that item ran it (_as_defined); CaptureError naming the file and the measurement
    otherwise, or when none is ok."""
    total, found = _checked(path)
    found = {n: m for n, m in found.items() if n.startswith("contend.")}
    if not found:
        raise CaptureError("the contend capture holds at least one contend measurement with status ok",
                           f"{path}: {total} measurements, no ok contend.*", "restore the capture from git")
    items = {m["name"]: m for m in mc.items_v3_contend(132)}
    for name, m in found.items():
        if name not in items:
            raise CaptureError("a contend measurement is one campaign version 3 defines (contend.<flavour>.<state>)",
                               f"{path}: {name}", "restore the capture from git (captures are never edited by hand)")
        _as_defined(m, items[name], path)
    return found


def _contend3_measurements(path: Path, blind: dict[str, float]) -> dict:
    """The contend3 capture's ok measurements (_measurements), each a name campaign version 6 defines
    (mc.items_v6_contend3) with lead, follow and follow2 roles, and each with a blind prediction in `blind`;
    CaptureError naming the file and the measurement otherwise, or when none is ok."""
    total, found = _checked(path)
    if not found:
        raise CaptureError("the contend3 capture holds at least one measurement with status ok",
                           f"{path}: {total} measurements, none ok", "restore the capture from git, or capture it "
                           "again: benchmarks/h200_contend3.sh")
    items = {m["name"]: m for m in mc.items_v6_contend3(132)}
    for name, m in found.items():
        if name not in items:
            raise CaptureError("a contend3 measurement is one campaign version 6 defines (contend3.<flavour>."
                               "<s|ss|st|t|ts|sst|tss>)", f"{path}: {name}",
                               "restore the capture from git (captures are never edited by hand)")
        safe.check(m["params"], CONTEND3_PARAMS, path, "micro", f"{name}.params")
        _as_defined(m, items[name], path)
        if name not in blind:
            raise CaptureError("every contend3 measurement has a blind prediction (committed before the kernel "
                               "ran)", f"{CONTEND3_BLIND}: no {name}",
                               "restore lapis/data/blind/micro/contend3.json from git")
    return found


def _contend3_blind(path: Path | None = None) -> dict[str, float]:
    """{measurement: cycles} of the committed blind contend3 predictions (`path`, else CONTEND3_BLIND as it is at
    the call): _blind_cycles."""
    return _blind_cycles(CONTEND3_BLIND if path is None else path, "contend3")


def _blind_cycles(path: Path, what: str) -> dict[str, float]:
    """{measurement: cycles} of a committed blind file (lapis/data/blind/micro/<what>.json); CaptureError naming
    the file when it is not a JSON object whose predicted_cycles maps names to finite numbers above zero."""
    rule, fix = (f"the blind {what} predictions are {{predicted_cycles: {{name: cycles, a finite number > 0}}}}",
                 f"restore lapis/data/blind/micro/{what}.json from git")
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as exc:  # missing, unreadable, not UTF-8, not JSON
        raise CaptureError(rule, f"{path}: {type(exc).__name__}: {exc}", fix) from None
    vals = doc.get("predicted_cycles") if isinstance(doc, dict) else None
    if not isinstance(vals, dict):
        raise CaptureError(rule, f"{path}: predicted_cycles is {type(vals).__name__}", fix)
    for k, v in vals.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise CaptureError(rule, f"{path}: predicted_cycles[{k}] = {v!r}", fix)
    return {k: float(v) for k, v in vals.items()}


def density_campaigns() -> dict[str, tuple]:
    """{kind: (campaign items, campaign version, blind file, capture, kernel source)} of the two density campaigns,
    read from lapis.validate.density when called: "density" (version 7) and "sweep" (version 9)."""
    return {"density": (mc.items_v7_density, 7, density.BLIND_FILE, density.CAPTURE, density.SOURCE),
            "sweep": (mc.items_v9_sweep, 9, density.SWEEP_BLIND_FILE, density.SWEEP_CAPTURE, density.SWEEP_SOURCE)}


def density_blind(kind: str = "sweep") -> dict:
    """A density campaign's blind-prediction file, as written before its kernels first ran: predicted cycles per
    unit of every measurement of kind "density" (campaign version 7) or "sweep" (9) (lapis.validate.density
    .predictions with constants() and tensor_share.Share.from_capture()), the constants' sources and the model.
    lapis/data/blind/micro/sweep.json is density_blind("sweep") at the commit that added micro_beside_v3.cu."""
    consts, files = constants()
    source = density_campaigns()[kind][4]
    predicted = density.predictions(compiled(KERNELS / source), consts, tensor_share.Share.from_capture(),
                                    gemm_cycles(density.WGMMAS), kind)
    share = [_in_data(p) for p in (tensor_share.BESIDE_CAPTURE, tensor_share.DENSITY_CAPTURE)]
    return dict(constants_from=[*files, *share],
                model="lapis.model.smsp + lapis.model.tensor_share (single-instruction constants, dense class "
                      "streams and one-chain streams beside wgmma)",
                predicted_cycles=dict(sorted(predicted.items())),
                what=f"{source} {kind} states: predicted cycles per unit (the leader's; _tensor: the wgmma "
                     "follower's)")


def _density_measurements(path: Path, blind: dict[str, float], kind: str = "density") -> dict:
    """The density (kind "density", campaign version 7) or sweep (kind "sweep", version 9) capture's ok
    measurements (_measurements), each a name its campaign defines (density_campaigns) with the campaign item's
    kernel, params.chains and params.follow (None alone, "ss" beside wgmma), a raw.follower_rate when beside wgmma
    (density._follower) and a blind prediction in `blind` (and <name>_tensor for one beside wgmma); CaptureError
    naming the file and the measurement otherwise, or when none is ok."""
    items, version, blind_file, _, _ = density_campaigns()[kind]
    total, found = _checked(path)
    fix = "restore the capture from git (captures are never edited by hand)"
    if not found:
        raise CaptureError(f"the {kind} capture holds at least one measurement with status ok",
                           f"{path}: {total} measurements, none ok", fix)
    defined = {m["name"]: m for m in items(132)}
    known = {n: m["params"]["follow"] for n, m in defined.items()}
    for name, m in found.items():
        if name not in known:
            raise CaptureError(f"a {kind} measurement is one campaign version {version} defines ({kind}.wgmma.ss, "
                               f"{kind}.<class>_c<chains>.<alone|ss>)", f"{path}: {name}", fix)
        item = defined[name]
        if (m.get("kernel"), m["params"].get("chains")) != (item["kernel"], item["params"].get("chains")):
            raise CaptureError(f"a {kind} measurement's kernel and params.chains are its campaign item's",
                               f"{path}: {name} kernel {m.get('kernel')!r}, chains {m['params'].get('chains')!r}, "
                               f"not {item['kernel']!r}, {item['params'].get('chains')!r}", fix)
        follow = m["params"].get("follow")
        if follow != known[name]:
            raise CaptureError(f"a {kind} measurement's params.follow is campaign version {version}'s (None alone, "
                               "'ss' beside wgmma)", f"{path}: {name}.params.follow {follow!r}, not {known[name]!r}",
                               fix)
        if follow:
            density._follower(m, name, path)
        for n in (name, f"{name}_tensor") if follow else (name,):
            if n not in blind:
                raise CaptureError(f"every {kind} measurement has a blind prediction (committed before the kernel "
                                   "ran)", f"{blind_file}: no {n}",
                                   f"restore lapis/data/blind/micro/{blind_file.name} from git")
    return found


def chain_rows() -> list[dict]:
    """The chain capture's rows: cycles from wgmma.fence to wait_group 0 (the capture's value, in cycles), predicted
    by contend.chain_cycles, with the blind prediction; the one-wgmma chains (k1) measure what the completion gap's
    constant (wgmma.latency.n128.<src>) measures, so they are not rows. CaptureError naming the capture for a name
    campaign version 8 does not define or no ok record, and the blind file for a measurement it has no prediction
    of."""
    blind = _blind_cycles(CHAIN_BLIND, "chain")
    total, found = _checked(CHAIN_CAPTURE)
    fix = "restore the capture from git (captures are never edited by hand)"
    known = {m["name"]: m["params"] for m in mc.items_v8_chain(132)}
    if not found:
        raise CaptureError("the chain capture holds at least one measurement with status ok",
                           f"{CHAIN_CAPTURE}: {total} measurements, none ok", fix)
    out = []
    where = CHAIN_CAPTURE.relative_to(CAPTURES) if CHAIN_CAPTURE.is_relative_to(CAPTURES) else CHAIN_CAPTURE
    for name, m in found.items():
        if name not in known:
            raise CaptureError("a chain measurement is one campaign version 8 defines", f"{CHAIN_CAPTURE}: {name}",
                               fix)
        if name not in blind:
            raise CaptureError("every chain measurement has a blind prediction (committed before the kernel ran)",
                               f"{CHAIN_BLIND}: no {name}", "restore lapis/data/blind/micro/chain.json from git")
        p = known[name]
        if p["k"] == 1:  # the constant's own measurement, taken again
            continue
        wgmmas = 2 * p["k"] if p["src"] == "pair" else p["k"]
        predicted, measured = contend.chain_cycles(wgmmas, "ss" if p["src"] == "ss" else "rs"), m["value"]["median"]
        out.append(dict(name=name, capture=str(where), state=f"{wgmmas} wgmma m64n128k16 ({p['src']}), waited",
                        predicted=predicted, measured=measured, error_pct=100.0 * (predicted / measured - 1),
                        blind_predicted=blind[name]))
    return out


def _row(m: dict, capture: Path, state: str, predicted: float) -> dict:
    """One row; CaptureError naming the capture and the measurement when its error is not a finite number (a
    value.median so large that the prediction over its cycles overflows)."""
    measured = 1.0 / m["value"]["median"]
    where = capture.relative_to(CAPTURES) if capture.is_relative_to(CAPTURES) else capture
    error = 100.0 * (predicted / measured - 1)
    if not math.isfinite(error):
        raise CaptureError("a micro measurement's cycles give a finite error against the prediction",
                           f"{capture}: {m['name']} value.median {m['value']['median']!r}",
                           "restore the capture from git (captures are never edited by hand)")
    return dict(name=m["name"], capture=str(where), state=state, predicted=predicted, measured=measured,
                error_pct=error)


def rows(consts: smsp.Constants, compile_=compiled, share: tensor_share.Share | None = None) -> list[dict]:
    """Every softmax microbenchmark row (module docstring), in capture order. CaptureError naming the contend capture
    for a contend.* measurement campaign version 3 does not define (before any compile)."""
    blind = _contend3_blind()
    measured3 = _contend3_measurements(CONTEND3_CAPTURE, blind)  # read before any compile: a bad file fails fast
    campaigns = density_campaigns()
    blind_d = {k: _blind_cycles(c[2], k) for k, c in campaigns.items()}
    measured_d = {k: _density_measurements(c[3], blind_d[k], k) for k, c in campaigns.items()}
    measured_c = _contend_measurements(CONTEND_CAPTURE)
    share = share or tensor_share.Share.from_capture()
    out = []
    fns = compile_(smsp.SOFTMAX_SOURCE)
    for name, m in _measurements(SOFTMAX_CAPTURE).items():
        if name.startswith("softmax."):
            fl, wg = m["params"]["flavour"], m["params"]["warpgroups"]
            body = softmax_body(fns[f"micro_softmax_{fl}_wg{wg}"], fl)
            out.append(_row(m, SOFTMAX_CAPTURE, f"softmax alone, {wg} warp(s) per SMSP",
                            smsp.simulate(body, wg, consts, phases=smsp.PHASES)))
    fns = compile_(KERNELS / CONTEND_SOURCE)
    cache: dict = {}
    for name, m in measured_c.items():
        fl, state = name.split(".")[1:]
        if fl not in cache:  # the schedules' own cost of this softmax body
            cache[fl] = contend.of(softmax_body(fns[f"micro_contend_{fl}"], fl), consts, share)
        lead, follow = m["params"]["lead"], m["params"]["follow"]
        out.append(_row(m, CONTEND_CAPTURE, f"{lead} beside {follow}" if follow else f"{lead} alone",
                        contend.state_cycles(cache[fl], state)))
    predicted3 = contend3_predictions(consts, compile_, share)
    for name, m in measured3.items():
        p = m["params"]
        who = [r for r in (p["follow"], p.get("follow2")) if r]
        row = _row(m, CONTEND3_CAPTURE, f"{p['lead']} beside {' and '.join(who)}" if who else f"{p['lead']} alone",
                   predicted3[name])
        row["blind_predicted"] = blind[name]
        out.append(row)
    out += chain_rows()
    for kind, (_, _, _, capture, source) in campaigns.items():
        predicted_d = density.predictions(compile_(KERNELS / source), consts, share, gemm_cycles(density.WGMMAS),
                                          kind)
        out += density.rows(measured_d[kind], blind_d[kind], predicted_d, capture)
    for prefix, (path, source, wgmmas) in MIX_CAPTURES.items():
        fns = compile_(KERNELS / source)
        for name, m in _measurements(path).items():
            if not name.startswith(prefix + "."):
                continue
            fl, p = m["params"]["flavour"], m["params"]
            r = roles(fns, f"micro_{prefix}_{fl}", fl, wgmmas, consts, MIX_LAST_GROUP[prefix])
            out.append(_row(m, path, f"one job: {p['tensor_iters']} GEMM units, {p['softmax_iters']} softmax "
                            "tiles", overlap_job(p["tensor_iters"], p["softmax_iters"], r, consts, share)))
    return out


TWO_CAPTURES_SPAN = 100  # contend3's GEMM unit is half contend's (about 0.5); a ratio past 100 is a damaged file


def two_captures(rs: list[dict]) -> list[dict]:
    """Each state both softmax campaigns measured (contend.<fl>.<state> and contend3.<fl>.<state>, one flavour's
    softmax in kernels/micro_mix_softmax_v3.cu and _v4.cu): both measured and predicted values, and `departure_pct`,
    how far the hardware's ratio between the two kernels departs from the model's (100 x (measured ratio / predicted
    ratio - 1)). A state whose cost the code alone sets (a softmax alone, a GEMM alone or beside one warp) keeps the
    ratio the two bodies give; two warps running unsynchronised lock into a relative phase the hardware does not
    fix, and the ratio can move with it: no prediction that reads the two bodies alike meets both within half
    that departure."""
    by_name = {r["name"]: r for r in rs}
    out = []
    for r in rs:
        if not r["name"].startswith("contend."):
            continue
        other = by_name.get("contend3." + r["name"].split(".", 1)[1])
        if other is None:
            continue
        measured = other["measured"] / r["measured"]
        predicted = other["predicted"] / r["predicted"]
        if not 1 / TWO_CAPTURES_SPAN <= measured <= TWO_CAPTURES_SPAN:
            raise CaptureError(f"the two captures of one state agree within a factor {TWO_CAPTURES_SPAN}",
                               f"{r['name']} {r['measured']:.4g} and {other['name']} {other['measured']:.4g} cycles",
                               "restore the captures from git (captures are never edited by hand)")
        out.append(dict(state=r["name"].split(".", 1)[1], measured=[r["measured"], other["measured"]],
                        predicted=[r["predicted"], other["predicted"]],
                        departure_pct=100.0 * (measured / predicted - 1)))
    return out


def validate_micro() -> dict:
    """The rows, mean and max |error| per group and overall, the states both softmax campaigns measured
    (two_captures), and the constants' sources."""
    consts, files = constants()
    rs = rows(consts)
    groups: dict = {}
    for r in rs:
        groups.setdefault(r["name"].split(".")[0] + "." + r["name"].split(".")[-1], []).append(abs(r["error_pct"]))
    summary = {g: dict(mean_abs_error_pct=statistics.fmean(v), max_abs_error_pct=max(v), n=len(v))
               for g, v in groups.items()}
    errs = [abs(r["error_pct"]) for r in rs]
    files = [*files, _in_data(contend.WGMMA_CAPTURE) + " (wgmma rate)",
             _in_data(contend.LATENCY_CAPTURE) + " (wgmma latency)",
             _in_data(tensor_share.BESIDE_CAPTURE) + " (classes beside wgmma)",
             _in_data(tensor_share.DENSITY_CAPTURE) + " (one-chain streams alone and beside wgmma)"]
    return dict(model="lapis.model.smsp (single-instruction constants)", constants_from=files,
                constants_pending=consts.pending, rows=rs, groups=summary, two_captures=two_captures(rs),
                mean_abs_error_pct=statistics.fmean(errs), max_abs_error_pct=max(errs),
                units="cycles per unit the measurement counts (1 / its value; the chain rows: its value)",
                campaign_units=mc.UNITS["rate"])


def _in_data(path: Path) -> str:
    """path relative to lapis/data, or whole when it lies elsewhere (a copy read in its place)."""
    return str(path.relative_to(DATA)) if path.is_relative_to(DATA) else str(path)


def render(r: dict) -> str:
    """The table `lapis validate micro` prints."""
    lines = [f"model: {r['model']}; constants from {', '.join(r['constants_from'])}",
             f"{'measurement':<26}{'predicted':>10}{'measured':>10}{'error':>9}  state"]
    for x in r["rows"]:
        blind = x.get("blind_predicted")
        note = f" (blind {blind:.0f}, {100 * (blind / x['measured'] - 1):+.1f}%)" if blind else ""
        lines.append(f"{x['name']:<26}{x['predicted']:>10.0f}{x['measured']:>10.0f}{x['error_pct']:>+8.1f}%  "
                     f"{x['state']}{note}")
    for g, s in r["groups"].items():
        lines.append(f"{g:<26} mean |error| {s['mean_abs_error_pct']:.1f}%, max {s['max_abs_error_pct']:.1f}% "
                     f"({s['n']} rows)")
    lines.append("one state in two kernels (contend.<state>: micro_mix_softmax_v3.cu, contend3.<state>: _v4.cu); "
                 "departure = (contend3 / contend measured) / (contend3 / contend predicted) - 1")
    lines.append(f"  {'state':<22}{'measured':>16}{'predicted':>18}{'departure':>11}")
    lines.append(f"  {'':<22}{'contend':>8}{'contend3':>9}{'contend':>9}{'contend3':>9}")
    for x in r["two_captures"]:
        lines.append(f"  {x['state']:<22}{x['measured'][0]:>8.0f}{x['measured'][1]:>9.0f}{x['predicted'][0]:>9.0f}"
                     f"{x['predicted'][1]:>9.0f}{x['departure_pct']:>+10.1f}%")
    lines.append(f"all {len(r['rows'])} rows: mean |error| {r['mean_abs_error_pct']:.1f}%, max "
                 f"{r['max_abs_error_pct']:.1f}%; {r['units']}")
    lines.append("every row is a prediction: the model reads the files named on the first line, and none of those "
                 "measurements is a row; blind: the prediction committed before the row's capture ran")
    lines.append("density.<class>_c<N>, sweep.<class>_c<N>: the class on N dependent chains "
                 "(kernels/micro_beside_v2.cu, _v3.cu), alone or beside wgmma (ss); .ss_tensor: the wgmma unit "
                 "beside it; the one-chain streams are constants (tensor_share's isolated shares, smsp's "
                 "taken_branch), so not rows; the sweep's blind column is the model before the FMA streak and "
                 "branch hold, which were shaped after it ran")
    return "\n".join(lines)

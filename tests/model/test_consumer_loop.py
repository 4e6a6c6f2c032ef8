"""lapis.model.consumer_loop: a GEMM turn's segments in a consumer loop's SASS, one warp's issue time through them,
the softmax side, and the committed loops of lapis's ping-pong kernels."""

import dataclasses
import gzip
import json
import shutil
from pathlib import Path

import pytest

from lapis.errors import CaptureError
from lapis.model import consumer_loop, sass

# round textbook latencies, for arithmetic only (test_smsp.py's BOOK)
from tests.model.test_smsp import BOOK


def _loop(body):
    """`body` (text, stall, write_sb, wait_mask) as a loop: addresses 16 apart, a backward branch to the head."""
    out = []
    for k, (text, stall, wsb, wait) in enumerate(body + [("BRA 0x0", 1, None, 0)]):
        i = sass.parse_instruction(text, 16 * k)
        out.append(dataclasses.replace(i, control=sass.Control(stall, False, wsb, None, wait, 0)))
    return out


# the loop is longer than instruction_mix.TINY and holds a MUFU (a consumer loop holds its softmax)
FILL = [("MUFU.EX2 R3, R2", 1, None, 0)] + [("FFMA R1, R2, R2, R2", 1, None, 0)] * 11
TURN = [("BAR.SYNC.DEFER_BLOCKING 0x1, 0x100", 1, None, 0),
        ("R2UR UR4, R10", 2, 0, 0),                        # writes scoreboard 0 (adu latency 4 in BOOK)
        ("UIADD3 UR5, UR4, 0x2, URZ", 1, None, 0b1),       # waits on it
        ("HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT", 1, None, 0),
        ("HGMMA.64x128x16.F32.BF16 R24, gdesc[UR5], R24, gsb0", 3, None, 0),
        ("UMOV UR6, 0x40", 1, None, 0),
        ("HGMMA.64x128x16.F32.BF16 R88, R152, gdesc[UR6].tnspB, R88, gsb0", 2, None, 0),
        ("BAR.ARV 0x2, 0x100", 6, None, 0)]


def test_the_turn_is_cut_at_its_wgmma_groups():
    seg = consumer_loop.turn_slice(_loop(FILL + TURN))
    assert [i.opcode for i in seg["pre"]] == ["R2UR", "UIADD3"]
    assert [i.opcode for i in seg["first"]] == ["HGMMA", "HGMMA", "UMOV"]
    assert [i.opcode for i in seg["second"]] == ["HGMMA", "BAR"]


def test_issue_time_follows_stall_counts_and_scoreboards():
    seg = consumer_loop.turn_slice(_loop(FILL + TURN))
    # R2UR at 0 (stall 2); UIADD3 waits for scoreboard 0: R2UR's adu latency 4 -> issues at 4, done at 5
    assert consumer_loop.issue_cycles(seg["pre"], BOOK) == 5
    # HGMMA 1 + 3 stall cycles, UMOV 1: HGMMA is accepted at one per cycle, not at the tensor pipe's mma rate
    assert consumer_loop.issue_cycles(seg["first"], BOOK) == 5
    # HGMMA at 0 (stall 2), BAR.ARV at 2: the turn is handed over when the arrive issues, its own stall aside
    assert consumer_loop.issue_cycles(seg["second"], BOOK) == 3
    assert consumer_loop.issue_cycles([], BOOK) == 0


def test_kernels_without_a_turn_are_named_errors():
    with pytest.raises(CaptureError, match="no GEMM turn"):
        consumer_loop.turn_slice(_loop(FILL + [t for t in TURN if not t[0].startswith("BAR")]))
    with pytest.raises(CaptureError, match="no consumer loop .* into QK's and PV's accumulators"):
        consumer_loop.turn_slice(_loop(FILL + [t for t in TURN if "R88" not in t[0]]))
    with pytest.raises(CaptureError, match="no consumer loop"):
        consumer_loop.turn_slice(_loop(FILL))
    with pytest.raises(CaptureError, match="control bits"):
        consumer_loop.issue_cycles([sass.parse_instruction("UMOV UR6, 0x40")], BOOK)


def test_segments_scale_with_their_k_steps():
    turn = {"cycles": {"pre": 100.0, "first": 80.0, "second": 40.0}, "hgmma": {"first": 8, "second": 8}}
    assert consumer_loop.segment_cycles(turn, 8, 4) == {"pre": 100.0, "first": 80.0, "second": 20.0}
    assert consumer_loop.segment_cycles(turn, 16, 11) == {"pre": 100.0, "first": 160.0, "second": 55.0}


def test_the_softmax_side_is_the_loop_less_its_turn():
    code = _loop(FILL + TURN)
    side = consumer_loop.kernel_side(code)
    assert len(side) == len(FILL) + 2  # the 12 FFMA, the BAR.SYNC before the turn, the loop's branch
    assert [i.opcode for i in side[-2:]] == ["BAR", "BRA"] and "SYNC" in side[-2].modifiers


def test_committed_loops():
    d = consumer_loop.load()
    s9 = d["loops"]["s9"]
    assert s9["function"] == "attn_s9_tuned_s3_n128_c2" and s9["schedule"] == "h200-s9-tuned"
    # QK^T and PV at D = block_n = 128: 8 k16 steps each
    assert s9["turn"]["hgmma"] == {"first": 8, "second": 8}
    # s9's side: the ex2 flavour's 64 scores and 2 corrections on MUFU, every tile
    assert s9["softmax_side"]["pipes"]["xu"] == 66 and s9["softmax_side"]["flavour"] == "ex2_cond"
    # each ping-pong schedule is costed from the first kernel that mirrors it; s10..s14 share s9's schedule
    assert d["schedules"] == {"h200-s4-pingpong": "s4", "h200-s5-intra-overlap": "s5", "h200-s6-exp2": "s6",
                              "h200-s7-cond-rescale": "s7", "h200-s8-persistent": "s8", "h200-s9-tuned": "s9"}
    assert {"s10", "s13", "s14", "s6_emu8"} <= set(d["loops"]) and "s5_noload" not in d["loops"]
    assert all(0 < c < 1000 for lp in d["loops"].values() for c in lp["turn"]["cycles"].values())
    # s14 advances its descriptors by constants: no R2UR or mask-and-shift per k-step, a shorter turn than s13's
    turn = {k: sum(d["loops"][k]["turn"]["instructions"].values()) for k in ("s13", "s14")}
    assert turn["s14"] < 0.8 * turn["s13"]


def test_the_early_pack_shows_with_one_softmax_warp_per_smsp():
    """s16 packs P_j before the rescale's branch: the same 368 instructions as s15, its 32 F2FP interleaved with the
    MUFU.EX2 stream. One warp alone issues its side 47 cycles sooner (932 against 979 of the ex2_cond loop's 1010,
    each with its taken branches' redirects); with a second softmax warp on the SMSP the block of packs hides under
    that warp's issue (783 against 812)."""
    d = consumer_loop.load()
    s15, s16 = d["loops"]["s15"]["softmax_side"], d["loops"]["s16"]["softmax_side"]
    assert s15["instructions"] == s16["instructions"] == 368 and s15["pipes"] == s16["pipes"]
    assert (s15["alone_cycles"], s16["alone_cycles"], d["micro_reference"]["ex2_cond"]["alone_cycles"]) == (
        979.0, 932.0, 1010.0)
    assert (s15["cycles"], s16["cycles"]) == (812.0, 783.0)
    assert s16["softmax_scale_alone"] == pytest.approx(932 / 1010) and s15["softmax_scale_alone"] == pytest.approx(
        979 / 1010)


def test_the_one_sync_turn_wait_shortens_side_and_turn():
    """s17 waits for its turn with one BAR.SYNC on a register barrier id where s16 has two predicated BAR.SYNC +
    WARPSYNC pairs and a WARPSYNC.ALL; the descriptor arithmetic ptxas interleaved with them moves to the uniform
    datapath (no R2UR). Its side is 359 instructions, not 368, with 2 CBU instructions, not 4; one warp alone issues
    it in 904 cycles (s16 932), two warps in 765.5 (783); the turn's first group (with the V_{j-1} wait and its
    46-cycle TRYWAIT) issues in 180 cycles, not 190."""
    d = consumer_loop.load()
    s16, s17 = d["loops"]["s16"], d["loops"]["s17"]
    assert (s16["softmax_side"]["instructions"], s17["softmax_side"]["instructions"]) == (368, 359)
    assert (s16["softmax_side"]["pipes"]["cbu"], s17["softmax_side"]["pipes"]["cbu"]) == (4, 2)
    assert (s16["softmax_side"]["alone_cycles"], s17["softmax_side"]["alone_cycles"]) == (932.0, 904.0)
    assert (s16["softmax_side"]["cycles"], s17["softmax_side"]["cycles"]) == (783.0, 765.5)
    assert s16["turn"]["cycles"] == {"pre": 14.0, "first": 190.0, "second": 94.0}
    assert s17["turn"]["cycles"] == {"pre": 11.0, "first": 180.0, "second": 94.0}
    assert s16["turn"]["instructions"] == s17["turn"]["instructions"] == {"pre": 9, "first": 52, "second": 27}


def test_the_hoisted_barrier_addresses_shorten_the_turn():
    """s18 holds its mbarrier addresses in uniform registers where s17 rebuilds each from SR_CgaCtaId at every wait
    and arrive: the turn's first group (QK_j, the V_{j-1} wait, PV_{j-1}) loses an S2UR, two ULEA, two UIADD3 and four
    UMOV, 43 instructions and 161 cycles against 52 and 180. Its side counts 370 instructions against 359: the K_j
    wait's retry path, which ptxas separates from its TRYWAIT by one IMAD.MOV, is not dropped as a retry path
    (instruction_mix.WAIT_GAP), and one warp alone issues it in 1058 cycles against 904."""
    d = consumer_loop.load()
    s17, s18 = d["loops"]["s17"], d["loops"]["s18"]
    assert s18["turn"]["instructions"] == {"pre": 10, "first": 43, "second": 26}
    assert s18["turn"]["cycles"] == {"pre": 12.0, "first": 161.0, "second": 94.0}
    assert s18["turn"]["pipes"]["first"]["uniform"] == s17["turn"]["pipes"]["first"]["uniform"] - 8 == 29
    assert (s17["softmax_side"]["instructions"], s18["softmax_side"]["instructions"]) == (359, 370)
    assert (s17["softmax_side"]["alone_cycles"], s18["softmax_side"]["alone_cycles"]) == (904.0, 1058.0)


def test_a_malformed_loops_file_is_refused(tmp_path):
    bad = tmp_path / "loops.json"
    bad.write_text(json.dumps({"schema": consumer_loop.SCHEMA, "schedules": {}, "loops": {"x": {"turn": {}}}}))
    with pytest.raises(CaptureError, match="not a consumer-loop file"):
        consumer_loop.load(bad)
    ok = json.loads(consumer_loop.LOOPS.read_text())
    ok["loops"]["s9"]["softmax_side"]["softmax_scale"] = 40.0
    bad.write_text(json.dumps(ok))
    with pytest.raises(CaptureError, match="softmax_scale"):
        consumer_loop.load(bad)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
@pytest.mark.xdist_group("attention_h200_sass")  # one compile of attention_h200.cu per run
def test_a_rebuild_gives_the_committed_loops():
    built = consumer_loop.build()
    committed = json.loads(consumer_loop.LOOPS.read_text())
    assert built["source_sha256"] == committed["source_sha256"], "rebuild: python -m lapis.model.consumer_loop --write"
    assert built["loops"] == committed["loops"] and built["micro_reference"] == committed["micro_reference"]
    assert built["schedules"] == committed["schedules"] and built["third_party"] == committed["third_party"]


def _corrupt(tmp_path, edit):
    d = json.loads(consumer_loop.LOOPS.read_text())
    edit(d)
    bad = tmp_path / "loops.json"
    bad.write_text(json.dumps(d))
    return bad


@pytest.mark.parametrize("edit, why", [
    # each of these was read as it stood and costed runs (s14's loop on s4 with its turn order reversed, ...)
    (lambda d: d["loops"]["s14"].__setitem__("overlap", False), "loop 's14': schedule 'h200-s9-tuned', overlap False"),
    (lambda d: d["loops"]["s9"].__setitem__("schedule", "h200-s4-pingpong"), "loop 's9': schedule 'h200-s4-pingpong'"),
    (lambda d: d["schedules"].__setitem__("h200-s9-tuned", "s14"), "schedules, not each .*'h200-s9-tuned': 's14'"),
    (lambda d: d["schedules"].__setitem__("h200-s9-tuned", "zz"), "schedules, not each .*'h200-s9-tuned': 'zz'"),
    (lambda d: d["loops"].pop("s9"), "schedules, not each the catalog's default with its loop here"),
    (lambda d: d["loops"].__setitem__("zz", d["loops"]["s9"]), "loop 'zz': not a ping-pong kernel"),
    (lambda d: d["loops"]["s9"]["turn"]["cycles"].__setitem__("pre", 99999), r"turn cycles .*'pre': 99999"),
    (lambda d: d["loops"]["s9"]["turn"]["cycles"].__setitem__("pre", True), r"turn cycles .*'pre': True"),
    (lambda d: d["loops"]["s9"]["turn"]["hgmma"].__setitem__("first", 1), r"turn hgmma \{'first': 1"),
    (lambda d: d["loops"]["s9"]["softmax_side"].__setitem__("softmax_scale", 3.9),
     "softmax_scale 3.9 is not its side's cycles 893.0 over the 'ex2_cond' reference's 770.5"),
    (lambda d: d["loops"]["s9"]["softmax_side"].__setitem__("softmax_scale_alone", 3.9),
     "softmax_scale_alone 3.9 is not its side's alone_cycles 1129.0 over the 'ex2_cond' reference's 1010.0"),
    (lambda d: d["loops"]["s16"]["softmax_side"].pop("softmax_scale_alone"), "softmax_scale_alone None, not in"),
    (lambda d: d["loops"]["s9"].__setitem__("turn", []), "loop 's9': not an object"),  # was an AttributeError
    (lambda d: d.__setitem__("loops", []), "no loops or schedules object"),
    (lambda d: d["micro_reference"]["ex2"]["contend"].__setitem__("pair", -1.0), r"micro_reference 'ex2': contend"),
    (lambda d: d["micro_reference"]["ex2"]["contend"].__setitem__("gap", 5000.0), "gap not below"),
    (lambda d: d["micro_reference"].pop("emu4"), "micro_reference, not one entry per flavour"),
    (lambda d: d["loops"]["s9"]["softmax_side"].pop("contend"), r"loop 's9': contend None"),
    (lambda d: d.pop("third_party"), "third_party, not one loop per kernel"),
    (lambda d: d["third_party"]["fa4_sm90_d128"]["turn"]["cycles"].__setitem__("pre", -1),
     r"third_party loop 'fa4_sm90_d128': turn cycles"),
    # these loaded, and Contend.factors divided by zero (or gave a negative rate)
    (lambda d: (c := d["third_party"]["fa4_sm90_d128"]["softmax_side"]["contend"]).__setitem__(
        "gemm_under_softmax", c["gap"]),
     r"third_party loop 'fa4_sm90_d128': contend .* gap not below the GEMM pair's cycles"),
    (lambda d: d["micro_reference"]["ex2"]["contend"].__setitem__("gemm_under_softmax", 1.0),
     r"micro_reference 'ex2': contend .* gap not below"),
    # a TypeError (unhashable list) in the scale check
    (lambda d: d["third_party"]["fa4_sm90_d128"]["softmax_side"].__setitem__("flavour", ["ex2"]),
     r"softmax_side flavour \['ex2'\], not one of"),
    (lambda d: d["loops"]["s9"]["softmax_side"].__setitem__("flavour", "ex2"),
     "loop 's9': softmax_side flavour 'ex2'; the catalog says 'ex2_cond'"),
])
def test_a_loops_file_that_disagrees_with_the_catalog_or_itself_is_refused(tmp_path, edit, why):
    with pytest.raises(CaptureError, match=why):
        consumer_loop.load(_corrupt(tmp_path, edit))


@pytest.mark.parametrize("content", [b"\xff\xfe\x00 not UTF-8", b"[" * 100_000 + b"]" * 100_000, b"[]"])
def test_an_unreadable_loops_file_is_a_capture_error(tmp_path, content):
    bad = tmp_path / "loops.json"
    bad.write_bytes(content)  # the first two were a UnicodeDecodeError and a RecursionError
    with pytest.raises(CaptureError, match="JSON file unreadable|schema 'list'"):
        consumer_loop.load(bad)


def test_write_replaces_the_file_through_a_temporary_one_in_its_folder(tmp_path, monkeypatch):
    target = tmp_path / "consumer_loops.json"
    target.write_text('{"old": 1}\n')
    replaced = []

    def replace(src, dst):
        replaced.append((src, dst, target.read_text(), open(src).read()))
        real_replace(src, dst)
    real_replace = consumer_loop.os.replace
    monkeypatch.setattr(consumer_loop.os, "replace", replace)
    consumer_loop.write(target, '{"new": 2}\n')
    (src, dst, before, staged), = replaced
    assert Path(src).parent == tmp_path and Path(dst) == target
    assert before == '{"old": 1}\n' and staged == '{"new": 2}\n'  # the old file stays whole until the swap
    assert target.read_text() == '{"new": 2}\n' and sorted(p.name for p in tmp_path.iterdir()) == [target.name]


def test_a_write_that_fails_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "consumer_loops.json"
    target.write_text('{"old": 1}\n')

    def fail(src, dst):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(consumer_loop.os, "replace", fail)
    monkeypatch.setattr(consumer_loop, "LOOPS", target)
    monkeypatch.setattr(consumer_loop, "build", lambda: {"new": 2})
    assert consumer_loop.main(["--write"]) == 2
    assert target.read_text() == '{"old": 1}\n' and sorted(p.name for p in tmp_path.iterdir()) == [target.name]


@pytest.mark.parametrize("bar, form", [("BAR.SYNC.DEFER_BLOCKING 0x1, 0x100", "imm"),
                                       ("BAR.SYNC.DEFER_BLOCKING R7, 0x100", "reg"),
                                       ("@!P1 BAR.SYNC.DEFER_BLOCKING 0x2, 0x100", "pred")])
def test_the_turns_bar_sync_form_is_read_from_the_sass(bar, form):
    turn = [(bar, 1, None, 0)] + TURN[1:]
    assert consumer_loop.sync_form(_loop(FILL + turn)) == form


def test_the_committed_loops_name_each_kernels_bar_sync_form():
    """s4..s16 wait with a predicated BAR.SYNC pair (one per warpgroup, immediate ids); s17 and s18 with one BAR.SYNC
    on a register id (attention_h200.cu ONE_SYNC)."""
    loops = consumer_loop.load()["loops"]
    assert {k: v["turn"]["sync_form"] for k, v in loops.items() if k in ("s4", "s9", "s16", "s17", "s18")} == \
        {"s4": "pred", "s9": "pred", "s16": "pred", "s17": "reg", "s18": "reg"}


def test_the_early_tests_take_the_waits_off_the_turn():
    """s19 tests K_j and V_{j-1} before its bar.sync and waits only if a test saw a tile not yet landed: with both
    landed, the turn's first group (QK_j, then PV_{j-1}'s V wait) issues in 114 cycles, not s18's 161 (the V wait's
    46-cycle TRYWAIT gone), and one warp alone issues the side in 857 cycles, not 1058 (the K wait and the retry
    path s18's side counts)."""
    d = consumer_loop.load()
    s18, s19 = d["loops"]["s18"], d["loops"]["s19"]
    assert (s18["turn"]["cycles"]["first"], s19["turn"]["cycles"]["first"]) == (161.0, 114.0)
    assert (s18["softmax_side"]["alone_cycles"], s19["softmax_side"]["alone_cycles"]) == (1058.0, 857.0)
    assert s19["turn"]["sync_form"] == "reg"


def test_fa4s_committed_sass_gives_its_ping_pong_loop():
    """FA4's sm90 forward (capture sass/fa4-sm90-2026-12-03), read by hand from d128.sass.gz: its consumer loop
    is the one with MUFU and HGMMA into two accumulators (a peeled loop of PV's eight HGMMA alone comes before it
    in the listing); the turn waits on `BAR.SYNC.DEFER_BLOCKING R8, 0x100` (a register id), issues QK's eight
    HGMMA into R88 then PV's eight (A from registers) into R24, and ends at `BAR.ARV R8, 0x100`."""
    instrs = consumer_loop.third_party_sass("fa4_sm90_d128")
    seg = consumer_loop.turn_slice(instrs)
    assert [sum(i.opcode == "HGMMA" for i in seg[k]) for k in ("pre", "first", "second")] == [0, 8, 8]
    assert {i.operands[0] for i in seg["first"] if i.opcode == "HGMMA"} == {"R88"}
    assert {i.operands[0] for i in seg["second"] if i.opcode == "HGMMA"} == {"R24"}
    assert consumer_loop.sync_form(instrs) == "reg"
    side = consumer_loop.kernel_side(instrs, rescale=True)
    # the side holds the tile's 64 MUFU.EX2 and the two for the row's rescale factor, and no HGMMA
    assert sum(i.opcode == "MUFU" for i in side) == 66 and not any(i.opcode == "HGMMA" for i in side)
    d = consumer_loop.load()["third_party"]
    assert set(d) == {"fa4_sm90_d64", "fa4_sm90_d128", "fa4_sm90_d256"}
    assert d["fa4_sm90_d128"]["softmax_side"]["instructions"] == len(side)


def test_fa4s_d256_loop_has_no_turn_and_its_side_is_scaled_to_128_keys():
    """FA4's d256 forward (d256.sass.gz, read by hand): no bar.sync in its consumer loop (no ping-pong), QK's 16
    HGMMA.64x80x16 into R152 then PV's 5 HGMMA.64x256x16 into R24; 80-key tiles, so its side's 40 scores per thread
    take 40 MUFU.EX2 and the row's two rescale factors 2 more."""
    instrs = consumer_loop.third_party_sass("fa4_sm90_d256")
    side = consumer_loop.kernel_side(instrs, rescale=True, turn=False)
    assert sum(i.opcode == "MUFU" for i in side) == 42 and not any(i.opcode == "HGMMA" for i in side)
    loop = consumer_loop.load()["third_party"]["fa4_sm90_d256"]
    ref = consumer_loop.load()["micro_reference"]["ex2"]
    assert loop["turn"] is None and loop["softmax_side"]["block_n"] == 80
    assert loop["softmax_side"]["softmax_scale"] == pytest.approx(loop["softmax_side"]["cycles"] * 128 / 80
                                                                  / ref["cycles"])


@pytest.mark.parametrize("content, why", [
    (b"", r"got .*d128.sass.gz: 0 'Function :' headers"),
    (b"not gzip", "not a readable gzip stream"),
    ("gzip", "0 'Function :' headers"),  # an empty listing: it said "SASS file not found: got ." naming no file
    ("two", "2 'Function :' headers"),  # d128's and d64's listings (one function name): it read d64's as d128's
])
def test_a_bad_third_party_listing_is_refused_naming_it(tmp_path, monkeypatch, content, why):
    src = consumer_loop.FA4_SASS
    if content == "gzip":
        content = gzip.compress(b"")
    elif content == "two":
        content = gzip.compress(gzip.decompress((src / "d128.sass.gz").read_bytes())
                                + gzip.decompress((src / "d64.sass.gz").read_bytes()))
    (tmp_path / "d128.sass.gz").write_bytes(content)
    monkeypatch.setitem(consumer_loop.THIRD_PARTY, "fa4_sm90_d128", (tmp_path, "d128.sass.gz", "ex2", True, 128))
    with pytest.raises(CaptureError, match=why):
        consumer_loop.third_party_sass("fa4_sm90_d128")
    with pytest.raises(CaptureError, match=r"one of consumer_loop.THIRD_PARTY: got 'fa4_sm90_d96'"):  # a KeyError
        consumer_loop.third_party_sass("fa4_sm90_d96")


def test_the_cli_reads_loops_as_patched_and_exits_2_on_a_bad_file(tmp_path, monkeypatch, capsys):
    d = json.loads(consumer_loop.LOOPS.read_text())
    d["third_party"]["fa4_sm90_d64"]["softmax_side"]["contend"]["extra"] = 1.0
    bad = tmp_path / "loops.json"
    bad.write_text(json.dumps(d))
    monkeypatch.setattr(consumer_loop, "LOOPS", bad)  # load() bound the committed file at import and exited 0
    assert consumer_loop.main([]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "third_party loop 'fa4_sm90_d64': contend" in err and str(bad) in err

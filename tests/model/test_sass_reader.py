"""lapis.model.sass: instruction parsing, control bits, loops, pipe mix against Nsight Compute's per-pipe counts of
FA2 (the committed ncu capture), RAW chains."""

import gzip
import json
from pathlib import Path

import pytest

from lapis.errors import CaptureError
from lapis.model import sass

NCU = Path(__file__).resolve().parents[2] / "lapis" / "data" / "captures" / "ncu" / "h200-2026-12-01-units"

# A hand-written cuobjdump-style function: a loop 0x10..0x60 with a forward branch over 0x40, a MUFU setting
# scoreboard 0 and a consumer waiting on it. Upper words: 0x000fe2... = stall 1, no scoreboard; 0x000e22... =
# stall 1, write scoreboard 0; 0x001fe2... = stall 1, waits on scoreboard 0; 0x000fec... = stall 6.
TOY = """
	code for sm_90a
		Function : toy
	.headerflags	@"EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   MOV R0, RZ ;                                  /* 0x000000ff00007202 */
                                                                                 /* 0x000fe20000000f00 */
        /*0010*/                   FMUL R1, R0, R0 ;                             /* 0x0000000000017220 */
                                                                                 /* 0x000fe20000400000 */
        /*0020*/                   MUFU.EX2 R2, R1 ;                             /* 0x0000000100027308 */
                                                                                 /* 0x000e220000000800 */
        /*0030*/              @!P0 BRA 0x50 ;                                    /* 0x0000000000008947 */
                                                                                 /* 0x000fe20003800000 */
        /*0040*/                   FADD R3, R3, R3 ;                             /* 0x0000000303037221 */
                                                                                 /* 0x000fe20000000000 */
        /*0050*/                   FFMA R0, R2, R1, R0 ;                         /* 0x0000000102007223 */
                                                                                 /* 0x001fe20000000000 */
        /*0060*/               @P1 BRA 0x10 ;                                    /* 0xfffffffc00a81947 */
                                                                                 /* 0x000fec000383ffff */
        /*0070*/                   EXIT ;                                        /* 0x000000000000794d */
                                                                                 /* 0x000fea0003800000 */
"""


def test_instruction_fields():
    i = sass.parse_instruction("@!P0 FFMA.FTZ R3, R2, R4, -R5 ;")
    assert (i.opcode, i.modifiers, i.predicate) == ("FFMA", ("FTZ",), "!P0")
    assert i.dests == ("R3",) and i.srcs == ("P0", "R2", "R4", "R5") and i.pipe == "fma"


@pytest.mark.parametrize("text, dests, srcs", [
    ("HMMA.16816.F32.BF16 R4, R8, R12, R4 ;", ["R4", "R5", "R6", "R7"],
     ["R8", "R9", "R10", "R11", "R12", "R13", "R4", "R5", "R6", "R7"]),
    ("LDS.128 R4, [R2+0x10] ;", ["R4", "R5", "R6", "R7"], ["R2"]),
    ("STS.64 [R2], R4 ;", [], ["R2", "R4", "R5"]),
    ("LDSM.16.MT88.4 R8, [R3+UR4+0x800] ;", ["R8", "R9", "R10", "R11"], ["R3", "UR4"]),
    ("FSETP.GEU.AND P0, PT, R1, R2, PT ;", ["P0"], ["R1", "R2"]),
    ("SHFL.BFLY PT, R0, R2, 0x1, 0x1f ;", ["R0"], ["R2"]),
    ("IADD3 R4, P0, PT, R2, R3, RZ ;", ["R4", "P0"], ["R2", "R3"]),
    ("STG.E.128 desc[UR16][R10.64+0x80], R44 ;", [], ["UR16", "R10", "R11", "R44", "R45", "R46", "R47"]),
    ("IMAD.WIDE.U32 R2, R3, 0x4, R6 ;", ["R2", "R3"], ["R3", "R6", "R7"]),
    ("F2FP.BF16.F32.PACK_AB R0, R5, R4 ;", ["R0"], ["R5", "R4"]),
])
def test_operand_registers(text, dests, srcs):
    i = sass.parse_instruction(text)
    assert list(i.dests) == dests and list(i.srcs) == srcs


@pytest.mark.parametrize("op, pipe", [("FMUL", "fma"), ("IMAD", "fma"), ("VIADD", "fma"), ("FMNMX", "alu"),
                                      ("F2FP", "alu"), ("MOV", "alu"), ("MUFU", "xu"), ("I2F", "xu"),
                                      ("LDSM", "lsu"), ("SHFL", "lsu"), ("BAR", "lsu"), ("HMMA", "tensor"),
                                      ("HGMMA", "tensor"), ("USHF", "uniform"), ("BSSY", "cbu")])
def test_pipe_table(op, pipe):
    assert sass.pipe_of(op) == pipe


@pytest.mark.parametrize("op, pipe", [("UTCHMMA", "tensor"), ("UTCBAR", "tensor"), ("LDTM", "tmem"),
                                      ("STTM", "tmem"), ("FMNMX3", "alu"), ("FFMA2", "fma"), ("R2UR", "adu"),
                                      ("UTMALDG", "lsu"), ("SYNCS", "lsu"), ("UTCATOMSWS", "uniform")])
def test_pipe_table_sm100(op, pipe):
    assert sass.pipe_of(op) == pipe


@pytest.mark.parametrize("text, dests, srcs", [
    ("LDTM.x8 R4, tmem[UR4+0x8] ;", [f"R{r}" for r in range(4, 12)], ["UR4"]),
    ("STTM.x4 tmem[UR4+0x80], R12 ;", [], ["UR4", "R12", "R13", "R14", "R15"]),
    ("UTCHMMA gdesc[UR6], gdesc[UR10], tmem[UR5], tmem[UR8], idesc[UR9], !UPT ;", [],
     ["UR6", "UR10", "UR5", "UR8", "UR9"]),
    ("FMNMX3 R4, R4, -3.40282346638528859812e+38, R5, !PT ;", ["R4"], ["R4", "R5"]),
])
def test_operand_registers_sm100(text, dests, srcs):
    i = sass.parse_instruction(text)
    assert list(i.dests) == dests and list(i.srcs) == srcs


def test_unknown_opcode_is_a_named_error():
    with pytest.raises(CaptureError, match="no pipe"):
        sass.pipe_of("FROB")


def test_control_bits_of_real_encodings():
    # from micro_softmax_v1.cu's SASS: MUFU.EX2 R72, R72 (stall 1, write scoreboard 0) and the loop's BRA (stall 6)
    c = sass.Control.from_word(0x000E220000000800)
    assert (c.stall, c.write_sb, c.read_sb, c.wait_mask) == (1, 0, None, 0)
    c = sass.Control.from_word(0x000FEC000383FFFF)
    assert (c.stall, c.write_sb, c.read_sb, c.wait_mask) == (6, None, None, 0)
    assert sass.Control.from_word(0x001FE20000000000).wait_mask == 1


def test_cuobjdump_function_loop_and_body():
    ins = sass.parse_cuobjdump(TOY)["toy"]
    assert [i.opcode for i in ins] == ["MOV", "FMUL", "MUFU", "BRA", "FADD", "FFMA", "BRA", "EXIT"]
    assert ins[2].control.write_sb == 0 and ins[5].control.wait_mask == 1
    (lp,) = sass.loops(ins)
    assert (lp.head, lp.tail, lp.head_address, lp.branch_address) == (1, 6, 0x10, 0x60)
    assert sass.loop_body(ins, lp) == [1, 2, 3, 4, 5, 6]
    assert sass.loop_body(ins, lp, {0x30}) == [1, 2, 3, 5, 6]
    with pytest.raises(CaptureError, match="forward"):
        sass.loop_body(ins, lp, {0x60})


def test_no_function_is_a_named_error():
    with pytest.raises(CaptureError, match="Function"):
        sass.parse_cuobjdump("nothing here\n")


def test_critical_path_counts_loop_carried_chains():
    body = [sass.parse_instruction(t) for t in (
        "FMUL R1, R0, R0", "FADD R2, R1, R1", "FFMA R3, R2, R2, R0", "FMUL R9, R8, R8", "MOV R0, R3")]
    c = sass.critical_path(body)
    assert c.first == 4 and c.per_iteration == 4 and c.path == [0, 1, 2, 4]
    lat = {"fma": 4, "alu": 2}
    assert sass.critical_path(body, lambda i: lat[i.pipe]).per_iteration == 14
    independent = [sass.parse_instruction("FMUL R1, R2, R2")]
    assert sass.critical_path(independent).per_iteration == 0


def test_fa2_pipe_mix_reproduces_nsight_compute_pipe_totals():
    ins = sass.parse_ncu_source_csv(NCU / "flash_sass_counts.csv.gz")
    loops = [lp for lp in sass.loops(ins) if ins[lp.head].count == 1_032_192]
    assert len(loops) == 1 and loops[0].tail - loops[0].head + 1 == 1189  # the mainloop: 16384 warps x 63
    body = [ins[k] for k in sass.loop_body(ins, loops[0])]
    assert all(i.count == 1_032_192 for i in body)
    inside = set(range(loops[0].head, loops[0].tail + 1))
    rest = [i for k, i in enumerate(ins) if k not in inside]
    mix, rest_mix = sass.pipe_mix(body), sass.pipe_mix(rest, [i.count for i in rest])
    metrics = json.loads((NCU / "manifest.json").read_text())["kernels"]["flash"]["metrics"]
    for pipe in ("fma", "alu", "xu", "lsu", "tensor"):
        hw = metrics[f"sm__inst_executed_pipe_{pipe}.sum"]["value"]
        assert mix[pipe] * 1_032_192 + rest_mix[pipe] == pytest.approx(hw, rel=0.002), pipe


@pytest.mark.parametrize("raw, why", [
    (gzip.compress(b"\t\tFunction : f\n")[:-9], "gzip"),  # truncated: the end-of-stream marker cut off
    (b"plain text, not gzip", "gzip"),
    (gzip.compress(b"\xff\xfe not UTF-8\n"), "UTF-8"),
], ids=["truncated", "not-gzip", "not-utf8"])
def test_a_corrupt_sass_file_is_a_named_error(tmp_path, raw, why):
    path = tmp_path / "k.sass.gz"
    path.write_bytes(raw)
    with pytest.raises(CaptureError, match=why) as e:
        sass.parse_cuobjdump(path)
    assert str(path) in str(e.value)


def test_read_text_reads_a_file_a_gzip_file_or_the_text_itself(tmp_path):
    text = "\t\tFunction : f\n        /*0000*/ EXIT ;\n"
    (tmp_path / "k.sass").write_text(text)
    (tmp_path / "k.sass.gz").write_bytes(gzip.compress(text.encode()))
    assert sass.read_text(tmp_path / "k.sass") == text
    assert sass.read_text(str(tmp_path / "k.sass.gz")) == text
    assert sass.read_text(text) == text  # a string holding a newline is the text, not a path
    with pytest.raises(CaptureError) as e:
        sass.read_text(tmp_path / "missing.sass")
    assert (e.value.rule, e.value.value) == ("SASS file not found", str(tmp_path / "missing.sass"))


def test_a_gzip_that_inflates_past_the_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(sass, "MAX_TEXT_BYTES", 1000)
    path = tmp_path / "k.sass.gz"
    path.write_bytes(gzip.compress(b"\t\tFunction : f\n" + b" " * 5000))  # 5 kB inflated from about 50 B
    with pytest.raises(CaptureError, match="1000 bytes"):
        sass.parse_cuobjdump(path)

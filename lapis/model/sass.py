"""SASS as data: instructions, loops, a loop body's instruction mix per pipe and its register dependency chain.

Reads the text `cuobjdump -sass` prints for an sm_90a or sm_100a cubin (one `/*addr*/ OPCODE.MODS operands ;` line per
instruction, its two 64-bit encoding words in comments) and the source page of an Nsight Compute report exported
as CSV (`ncu --page source --csv --print-source sass`: columns "Address", "Source", "Instructions Executed").

Pipes (PIPE_OF): the instruction pipes Nsight Compute counts in sm__inst_executed_pipe_<pipe> (Kernel Profiling
Guide, section Pipelines): fma (FP32 multiply-add and IMAD; fmaheavy + fmalite), alu (integer, logic, compares,
min/max, moves, conversions packing two floats: F2FP), xu (MUFU transcendentals and int<->float conversions),
lsu (shared/global/local memory, shuffles, special registers, CTA barriers), tensor (HMMA: mma.sync; HGMMA:
wgmma), uniform (U* datapath, R2UR), cbu (convergence barriers, exit), adu (branches, constant loads). The table is
checked against hardware: the FA2 forward kernel's per-instruction executed counts, summed per pipe, reproduce
that capture's sm__inst_executed_pipe_{fma,alu,xu,lsu,tensor}.sum within 0.1 % (tests/model/test_sass_reader.py,
lapis/data/captures/ncu/h200-2026-12-01-units). The cbu/adu/uniform rows, I2FP and VIMNMX (alu: integer-to-float
conversion outside MUFU, integer min/max) and FENCE (lsu, as MEMBAR) are not checked that way.

sm_100 (Blackwell) opcodes, named after the CUDA Binary Utilities' "Blackwell Instruction Set" table (section 4.4)
and classed by what the PTX they come from does (PTX ISA 9.7.16, tcgen05; 9.7.9.25, cp.async.bulk.tensor):
UTCHMMA / UTCQMMA / UTCIMMA / UTCOMMA (tcgen05.mma, one thread issues it from the uniform datapath; the tensor core
runs it) and UTCBAR (tcgen05.commit: an mbarrier arrive queued behind those MMAs) and UTCCP (tcgen05.cp, shared
memory into TMEM) -> tensor; LDTM / STTM (tcgen05.ld / tcgen05.st, TMEM <-> registers, a datapath of their own)
-> tmem; UTCATOMSWS (tcgen05.alloc / dealloc, the TMEM allocator) -> uniform; FMNMX3 (three-input FP32 max/min),
VIMNMX / VIMNMX3 / VIADDMNMX -> alu; FFMA2 / FMUL2 / FADD2 (the packed f32x2 ops) -> fma; R2UR / S2UR / LDCU (a
register or constant into a uniform register) -> adu with the other constant-bank and special-register reads;
FENCE, ENDCOLLECTIVE, ACQBULK -> adu with the other scoreboard-only instructions; VOTEU, UFLO -> uniform. These
are not yet checked against an sm_100 Nsight Compute capture (lapis has none): a per-pipe count from them is the
table's reading, not a measurement.

Register operands: R<n>, UR<n>, P<n>, UP<n> (RZ, URZ, PT, UPT are constants). Vector widths (REGISTERS_OF) follow
the instruction: .64 / .128 data of loads and stores, `R2.64` addresses, LDSM .x1/.x2/.x4, LDTM / STTM .xN (N),
HMMA.16816 (D, C: 4
registers, A: 4, B: 2), IMAD.WIDE and CS2R (2). Destinations: the first operand, the predicates that follow it
(IADD3's carry, xSETP's second result), nothing for stores, branches and barriers.

Control bits (Volta and later): the upper word of each 128-bit instruction holds, from bit 41, stall cycles (4
bits), yield (1), write scoreboard (3; 7 = none), read scoreboard (3), wait mask (6), register reuse (4).
"""

from __future__ import annotations

import csv
import gzip
import io
import re
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from lapis.errors import CaptureError

MAX_TEXT_BYTES = 64 << 20  # a SASS dump or ncu CSV larger than this is not one kernel's

PIPES = ("fma", "alu", "xu", "lsu", "tensor", "tmem", "uniform", "cbu", "adu")

# opcode (without modifiers) -> pipe; instructions starting with U (uniform datapath) go to "uniform" unless listed
PIPE_OF = {
    **dict.fromkeys(("FFMA", "FMUL", "FADD", "FFMA32I", "FMUL32I", "FADD32I", "IMAD", "IMAD32I", "IDP", "VIADD",
                     "IMNMX_FMA", "HFMA2", "HMUL2", "HADD2", "FFMA2", "FMUL2", "FADD2"), "fma"),
    **dict.fromkeys(("FMNMX", "FSETP", "FSEL", "FSET", "FCHK", "ISETP", "IADD3", "IADD", "LOP3", "LOP", "SHF", "SHL",
                     "SHR", "LEA", "SEL", "MOV", "PRMT", "IABS", "IMNMX", "CS2R", "P2R", "R2P", "PLOP3", "F2FP",
                     "POPC", "FLO", "BREV", "BMSK", "SGXT", "HMNMX2", "HSETP2", "VOTE", "ISCADD", "IMNMX",
                     "FMNMX3", "VIMNMX", "VIMNMX3", "VIADDMNMX", "I2FP"), "alu"),
    **dict.fromkeys(("MUFU", "I2F", "F2I", "F2F", "I2I", "FRND"), "xu"),
    **dict.fromkeys(("LDS", "LDSM", "STS", "LDG", "STG", "LDL", "STL", "LD", "ST", "LDGSTS", "ATOM", "ATOMS", "ATOMG",
                     "RED", "SHFL", "S2R", "BAR", "MEMBAR", "FENCE", "SYNCS", "MATCH", "STSM", "CCTL", "UBLKCP",
                     "UTMALDG", "UTMASTG", "UTMAPF", "ARRIVES", "REDUX"), "lsu"),
    **dict.fromkeys(("HMMA", "HGMMA", "IMMA", "IGMMA", "QGMMA", "BMMA", "DMMA",
                     "UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCOMMA", "UTCBAR", "UTCCP"), "tensor"),
    **dict.fromkeys(("LDTM", "STTM"), "tmem"),
    **dict.fromkeys(("UTCATOMSWS", "VOTEU", "UFLO"), "uniform"),
    **dict.fromkeys(("BSSY", "BSYNC", "EXIT", "WARPSYNC", "BPT", "BREAK", "CALL", "RET", "KILL", "NANOSLEEP",
                     "YIELD", "WARPGROUP", "ENDCOLLECTIVE"), "cbu"),
    "R2UR": "uniform", "VOTEU": "uniform",  # write the uniform datapath's registers
    **dict.fromkeys(("BRA", "BRX", "JMP", "LDC", "ULDC", "DEPBAR", "LDGDEPBAR", "NOP", "ERRBAR", "CGAERRBAR", "ACQBULK",
                     "ELECT", "S2UR", "R2UR", "LDCU", "FENCE", "ENDCOLLECTIVE"), "adu"),
}

_REG = re.compile(r"(?<![\w.])(U?R\d+|U?P\d)(\.64|\.128)?(?![\w])")
_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*/\*\s*(0x[0-9a-f]{16})\s*\*/")
_HI = re.compile(r"^\s*/\*\s*(0x[0-9a-f]{16})\s*\*/\s*$")
_NO_DEST = ("ST", "STS", "STG", "STL", "STSM", "RED", "BAR", "BRA", "BRX", "JMP", "EXIT", "DEPBAR", "WARPSYNC", "NOP",
            "BSSY", "BSYNC", "MEMBAR", "ERRBAR", "LDGDEPBAR", "LDGSTS", "CCTL", "CALL", "RET", "YIELD", "NANOSLEEP",
            "ARRIVES", "UTMASTG", "UTMALDG", "UTMAPF", "UBLKCP", "WARPGROUP", "BPT", "KILL", "BREAK",
            "STTM", "UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCOMMA", "UTCBAR", "UTCCP", "FENCE", "ENDCOLLECTIVE")


@dataclass(frozen=True)
class Control:
    """The scheduling word of one instruction: stall cycles before the next issue, yield, the scoreboard it sets
    on write and on read (None: none), the scoreboards it waits on (bit mask), register reuse flags."""

    stall: int
    yield_: bool
    write_sb: int | None
    read_sb: int | None
    wait_mask: int
    reuse: int

    @classmethod
    def from_word(cls, hi: int) -> Control:
        c = (hi >> 41) & 0x1FFFFF
        wb, rb = (c >> 5) & 7, (c >> 8) & 7
        return cls(c & 0xF, bool((c >> 4) & 1), None if wb == 7 else wb, None if rb == 7 else rb,
                   (c >> 11) & 0x3F, (c >> 17) & 0xF)


@dataclass(frozen=True)
class Instruction:
    """One SASS instruction. opcode: the mnemonic before the first dot (FFMA); modifiers: the rest (FTZ, ...);
    predicate: the guard without '@' ("P0", "!P0", None); dests / srcs: register names, vectors expanded (R4..R7
    for an HMMA accumulator); address: byte offset (cuobjdump) or absolute (ncu); count: executed warp-level
    instructions (ncu), None from cuobjdump; target: a branch's destination address."""

    text: str
    opcode: str
    modifiers: tuple[str, ...]
    predicate: str | None
    operands: tuple[str, ...]
    dests: tuple[str, ...]
    srcs: tuple[str, ...]
    address: int | None = None
    control: Control | None = None
    count: int | None = None
    target: int | None = None

    @property
    def pipe(self) -> str:
        return pipe_of(self.opcode)


@dataclass(frozen=True)
class Loop:
    """A backward branch and its target: instructions [head, tail] (indices into the function's list, tail is the
    branch), by address head_address .. branch_address."""

    head: int
    tail: int
    head_address: int
    branch_address: int


@dataclass
class Chain:
    """The longest RAW dependency path of a loop body: `first` (one iteration from registers all ready) and
    `per_iteration` (the growth per iteration in steady state, loop-carried dependencies included), in the unit of
    the weights (instructions when every weight is 1, else cycles); `path`: the instruction indices of the first."""

    first: float
    per_iteration: float
    path: list[int] = field(default_factory=list)


def pipe_of(opcode: str) -> str:
    """The pipe of an opcode (modifiers stripped); unknown U* opcodes -> uniform. Raises CaptureError otherwise."""
    op = opcode.split(".")[0]
    if op in PIPE_OF:
        return PIPE_OF[op]
    if op.startswith("U"):
        return "uniform"
    raise CaptureError("SASS opcode has no pipe in lapis.model.sass.PIPE_OF", op,
                       "add the opcode to PIPE_OF with its Nsight Compute pipe (Kernel Profiling Guide, Pipelines)")


def _width(op: str, mods: tuple[str, ...], index: int, token_suffix: str | None, in_address: bool) -> int:
    """Registers an operand spans (see the module docstring)."""
    if token_suffix:
        return 2 if token_suffix == ".64" else 4
    if in_address:
        return 1
    if op == "HMMA" and mods[:1] == ("16816",):
        return (4, 4, 2, 4)[index] if index < 4 else 1
    if op == "HMMA" and mods[:1] == ("1688",):
        return (4, 2, 1, 4)[index] if index < 4 else 1
    if (op, index) in (("LDTM", 0), ("STTM", 1)):  # .xN of the 32x32b shape: N 32-bit registers a thread
        return next((int(m[1:]) for m in mods if re.fullmatch(r"x\d+", m)), 1)
    if op == "LDSM" and index == 0:
        return {"1": 1, "2": 2, "4": 4}.get(mods[-1], 1)
    if op in ("LDS", "LDG", "LDL", "LD", "STS", "STG", "STL", "ST", "LDC") and index in (0, 1):
        data = 0 if op.startswith("LD") else 1
        if index == data:
            return 4 if "128" in mods else 2 if "64" in mods else 1
    if (op == "IMAD" and "WIDE" in mods and index in (0, 3)) or (op == "CS2R" and index == 0):
        return 2
    return 1


def _expand(name: str, width: int) -> list[str]:
    if width == 1:
        return [name]
    prefix = "UR" if name.startswith("UR") else "R"
    base = int(name[len(prefix):])
    return [f"{prefix}{base + k}" for k in range(width)]


def _split_operands(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "[" or ch == "{"
        depth -= ch == "]" or ch == "}"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + ([cur.strip()] if cur.strip() else [])


def parse_instruction(text: str, address: int | None = None, control: Control | None = None,
                      count: int | None = None) -> Instruction:
    """One instruction from its SASS text (`@!P0 FFMA.FTZ R3, R2, R4, -R5` with or without the trailing ';')."""
    body = text.strip().rstrip(";").strip()
    predicate = None
    if body.startswith("@"):
        guard, _, body = body.partition(" ")
        predicate, body = guard[1:], body.strip()
    if not body:
        raise CaptureError("SASS instruction text is empty", repr(text), "pass one instruction line")
    mnemonic, _, rest = body.partition(" ")
    op, *mods = mnemonic.split(".")
    mods = tuple(mods)
    operands = tuple(_split_operands(rest))
    ndest = 0 if op in _NO_DEST else 1
    if op == "SHFL":
        ndest = 2
    while ndest and ndest < len(operands) and re.fullmatch(r"U?P(\d|T)", operands[ndest]):
        ndest += 1  # IADD3's carry-out, xSETP's second predicate
    dests, srcs = [], [predicate.lstrip("!")] if predicate and predicate.lstrip("!") not in ("PT", "UPT") else []
    for i, opnd in enumerate(operands):
        in_address = "[" in opnd
        for m in _REG.finditer(opnd):
            inside = in_address and opnd.find("[") < m.start()
            regs = _expand(m.group(1), _width(op, mods, i, m.group(2), inside))
            (dests if i < ndest and not inside else srcs).extend(regs)
    target = None
    if op in ("BRA", "BRX", "JMP", "CALL") and operands:
        hexes = re.findall(r"0x[0-9a-f]+", operands[-1])
        target = int(hexes[-1], 16) if hexes else None
    return Instruction(text.strip(), op, mods, predicate, operands, tuple(dests), tuple(srcs), address, control,
                       count, target)


def read_text(source: str | Path) -> str:
    """A file's text (gzip when it ends in .gz), or the string itself when it holds a newline. CaptureError when
    the file is missing, over MAX_TEXT_BYTES (compressed or inflated, or the string itself), a broken gzip stream
    (truncated, or a corrupt deflate block: zlib.error) or not UTF-8."""
    if isinstance(source, str) and "\n" in source:
        if len(source) > MAX_TEXT_BYTES:
            raise CaptureError(f"SASS text longer than {MAX_TEXT_BYTES} characters", len(source),
                               "pass one kernel's dump")
        return source
    path = Path(source)
    if not path.is_file():
        raise CaptureError("SASS file not found", str(path), "pass a cuobjdump -sass dump or an ncu source CSV")
    if path.stat().st_size > MAX_TEXT_BYTES:
        raise CaptureError(f"SASS file larger than {MAX_TEXT_BYTES} bytes", path.stat().st_size,
                           "pass one kernel's dump")
    try:
        if path.suffix == ".gz":
            with gzip.open(path) as f:  # read one byte past the limit: a small file can inflate without bound
                raw = f.read(MAX_TEXT_BYTES + 1)
        else:
            raw = path.read_bytes()
        if len(raw) > MAX_TEXT_BYTES:
            raise CaptureError(f"SASS file inflates past {MAX_TEXT_BYTES} bytes", str(path), "pass one kernel's dump")
        return raw.decode()
    except (OSError, EOFError, zlib.error) as e:  # BadGzipFile is an OSError; a cut stream ends in EOFError
        raise CaptureError("SASS file not a readable gzip stream", f"{path}: {type(e).__name__}: {e}"[:400],
                           "re-extract it (python -m lapis.gpu.capture_fa2_sass) or gunzip -t it") from None
    except UnicodeDecodeError as e:
        raise CaptureError("SASS file not UTF-8 text", f"{path}: {e}"[:400],
                           "pass the text output of cuobjdump -sass") from None


def parse_cuobjdump(source: str | Path) -> dict[str, list[Instruction]]:
    """{function name: [Instruction, ...]} from `cuobjdump -sass` text (or a file holding it), in address order."""
    text = read_text(source)
    functions: dict[str, list[Instruction]] = {}
    current, pending = None, None
    for line in text.splitlines():
        if "Function : " in line:
            current = line.split("Function : ", 1)[1].strip()
            functions[current] = []
            continue
        m = _LINE.search(line)
        if m and current is not None:
            pending = (int(m.group(1), 16), m.group(2))
            continue
        h = _HI.match(line)
        if h and pending is not None:
            functions[current].append(parse_instruction(pending[1], pending[0], Control.from_word(int(h.group(1), 16))))
            pending = None
    if not functions:
        raise CaptureError("no 'Function :' section in the SASS text", text[:80].replace("\n", " "),
                           "pass the output of cuobjdump -sass on a cubin")
    return functions


def parse_ncu_source_csv(source: str | Path) -> list[Instruction]:
    """The instructions of an `ncu --page source --csv` export, each with its "Instructions Executed" count."""
    text = read_text(source)
    rows = list(csv.reader(io.StringIO(text)))
    header = next((i for i, r in enumerate(rows) if "Source" in r and "Instructions Executed" in r), None)
    if header is None:
        raise CaptureError("ncu source CSV has no 'Source' and 'Instructions Executed' columns", rows[:2],
                           "export with ncu --page source --csv --print-source sass")
    cols = rows[header]
    i_src, i_n, i_addr = cols.index("Source"), cols.index("Instructions Executed"), cols.index("Address")
    return [parse_instruction(r[i_src], int(r[i_addr], 16), None, int(r[i_n] or 0))
            for r in rows[header + 1:] if len(r) == len(cols) and r[i_src].strip()]


def loops(instrs: list[Instruction]) -> list[Loop]:
    """Every backward branch (target at or before the branch) whose target is an instruction of `instrs`,
    innermost first (shortest span first). A branch to itself (the trailing `BRA .` trap) is not a loop."""
    index = {ins.address: i for i, ins in enumerate(instrs)}
    out = [Loop(index[ins.target], i, ins.target, ins.address) for i, ins in enumerate(instrs)
           if ins.opcode == "BRA" and ins.target is not None and ins.address is not None
           and ins.target < ins.address and ins.target in index]
    return sorted(out, key=lambda lp: lp.tail - lp.head)


def loop_body(instrs: list[Instruction], loop: Loop, taken: frozenset[int] | set[int] = frozenset()) -> list[int]:
    """Indices of the instructions one iteration of `loop` issues: straight through from head to tail, except
    that each forward branch whose address is in `taken` jumps to its target (a branch not in `taken` falls
    through; its own instruction is issued either way)."""
    index = {ins.address: i for i, ins in enumerate(instrs)}
    out, i = [], loop.head
    while i <= loop.tail:
        out.append(i)
        ins = instrs[i]
        if ins.address in taken and ins.opcode == "BRA":
            if ins.target not in index or not (ins.address < ins.target <= instrs[loop.tail].address):
                raise CaptureError("a taken branch must jump forward inside the loop", hex(ins.address),
                                   "list only forward branches of the loop body in `taken`")
            i = index[ins.target]
            continue
        i += 1
    return out


def pipe_mix(instrs: list[Instruction], weights: list[int] | None = None) -> Counter:
    """Instructions per pipe (PIPES), each counted once or with its weight (e.g. ncu executed counts)."""
    mix: Counter = Counter()
    for k, ins in enumerate(instrs):
        mix[ins.pipe] += 1 if weights is None else weights[k]
    return mix


def critical_path(instrs: list[Instruction], weight=None, iterations: int = 4) -> Chain:
    """The longest read-after-write path through `instrs` (one loop iteration, in issue order), run `iterations`
    times back to back so loop-carried dependencies count. weight(ins) is the latency an instruction adds
    (default 1: the path in instructions). RZ/PT and constants are no dependency; a predicated write counts as a
    write. per_iteration = the growth of the path over the last iteration (steady state for a periodic chain)."""
    if iterations < 2:
        raise CaptureError("critical_path needs at least 2 iterations to see loop-carried chains", iterations,
                           "pass iterations >= 2")
    w = weight or (lambda ins: 1)
    ready: dict[str, float] = {}
    via: dict[str, tuple[float, list[int]]] = {}
    lengths, first_path = [], []
    for it in range(iterations):
        best = 0.0
        for k, ins in enumerate(instrs):
            start = max((ready.get(r, 0.0) for r in ins.srcs), default=0.0)
            end = start + w(ins)
            if it == 0:
                prev = max(ins.srcs, key=lambda r: ready.get(r, 0.0), default=None)
                path = (via[prev][1] if prev in via and ready.get(prev, 0.0) > 0 else []) + [k]
                for d in ins.dests:
                    via[d] = (end, path)
                if end > best:
                    best, first_path = end, path
            for d in ins.dests:
                ready[d] = end
            best = max(best, end)
        lengths.append(max(best, lengths[-1] if lengths else 0.0))
    return Chain(lengths[0], lengths[-1] - lengths[-2], first_path)

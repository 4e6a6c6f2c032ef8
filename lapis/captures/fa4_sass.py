"""FA4's sm90 attention forward SASS, compiled without a GPU: a capture folder OUT/ holding <case>.sass.gz per
case and manifest.json.

    python -m lapis.captures.fa4_sass --out OUT [--python PY] [--site DIR] [--cases d128,d128_causal,d64,d256]
                                      [--ncu CSV] [--timeout S]

benchmarks/fa4_sass.sh runs it (and says, in comments, how the Python 3.12 venv PY was built). Each case of CASES
(FA4's flash_attn_func, bf16 q, k, v of shape B x L x H x D) is compiled in its own child process, `PY -m
lapis.captures.fa4_sass --child CASE` (default PY /tmp/fa4venv/bin/python, a venv with torch; FA4's wheels, flash-attn-4
and nvidia-cutlass-dsl with its libraries, unpacked into DIR, default /tmp/fa4d/site, which the child adds with
site.addsitedir): under torch's FakeTensorMode, with q, k, v on device "cuda", flash_attn_func compiles FA4's
FlashAttentionForwardSm90 kernel for sm_90a with the CuTe DSL's own compiler and, with ENV set, keeps the cubin and
the PTX in the child's dump folder; no kernel runs (there is no GPU). Only the child
imports torch and FA4; this process needs cuobjdump on PATH and nothing else outside the standard library.

Per case it writes OUT/<case>.sass.gz: `cuobjdump -sass` of the cubin, as printed (instruction text and the two
64-bit words whose upper one holds the control bits lapis.model.sass decodes), gzip level 9, mtime 0. And
OUT/manifest.json:
{"schema", "provenance": {"gpu" and "driver": none, "date", "command", "commit", "dirty", "source_blobs" (git blobs
of this file and benchmarks/fa4_sass.sh, lapis.captures.provenance), "flash_attn_4", "nvidia_cutlass_dsl",
"torch", "python" (the child's versions), "compiler": {"ptx": the PTX header's compiler line, "ptxas": the
cubin's ELF note tool version}, "cuobjdump": its last two version lines (release, build), "env": ENV},
"kernels": {case: {"shape" BxHxLxD, "causal", "file", "function", "instructions", "hgmma", "mufu" (instructions
whose opcode is HGMMA, MUFU)}}, "device_check": `compare` of the d128 case with --ncu (default:
lapis/data/captures/ncu/h200-2026-12-02-source/fa4_source.csv.gz, the listing Nsight Compute recorded of that
kernel on the H200), or null when d128 is not among the cases}.

Errors (CaptureError, nothing written before the first child runs): an unknown case, --python not an executable
file, --site not a folder, --out a file, cuobjdump not on PATH, --ncu missing; then a child that fails or runs past
--timeout, a dump folder without exactly one cubin, a listing without exactly one function. main prints the
error and exits 2.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from lapis.captures.provenance import git_provenance
from lapis.data import CAPTURES
from lapis.errors import CaptureError, LapisError
from lapis.model import sass

SCHEMA = "lapis.fa4-sass/1"
ROOT = Path(__file__).resolve().parents[2]  # the repository root: the child imports lapis from here
SOURCES = ("lapis/captures/fa4_sass.py", "benchmarks/fa4_sass.sh")
# case -> (B, H, L, D, causal): FA4's flash_attn_func takes q, k, v as B x L x H x D
CASES = {"d128": (8, 16, 4096, 128, False), "d128_causal": (8, 16, 4096, 128, True),
         "d64": (8, 16, 4096, 64, False), "d256": (8, 16, 4096, 256, False)}
ENV = {"FLASH_ATTENTION_ARCH": "sm_90", "CUTE_DSL_ARCH": "sm_90a", "FLASH_ATTENTION_NUM_SMS": "132",
       "CUTE_DSL_KEEP": "ptx,cubin", "CUTE_DSL_NO_CACHE": "1"}  # and CUTE_DSL_DUMP_DIR, per case
NCU = "ncu/h200-2026-12-02-source/fa4_source.csv.gz"  # under lapis/data/captures: Nsight Compute's d128 listing
TOOLS = re.compile(rb"Cuda compilation tools, release [\d.]+, V[\d.]+")
DESCRIPTOR = "desc["  # the TMA descriptor operand: Nsight Compute prints it first, cuobjdump last


def cases(names: str) -> list[str]:
    """The comma-separated case names, checked against CASES; CaptureError naming an unknown one."""
    out = [n.strip() for n in names.split(",") if n.strip()]
    for n in out:
        if n not in CASES:
            raise CaptureError("a case is one of " + ", ".join(CASES), n, "pass --cases from that list")
    if not out:
        raise CaptureError("at least one case", repr(names), "pass --cases, e.g. d128")
    return out


def shape(case: str) -> str:
    b, h, length, d, _ = CASES[case]
    return f"{b}x{h}x{length}x{d}"


def child(case: str, site: str) -> None:
    """The child's work (runs under --python): compile `case` (its cubin lands in CUTE_DSL_DUMP_DIR) and print
    the versions as one JSON line."""
    import importlib.metadata
    import platform
    import site as site_module
    if site:
        site_module.addsitedir(site)
    import torch
    from flash_attn.cute.interface import flash_attn_func
    from torch._subclasses.fake_tensor import FakeTensorMode
    b, h, length, d, causal = CASES[case]
    with FakeTensorMode():
        q, k, v = (torch.empty(b, length, h, d, dtype=torch.bfloat16, device="cuda") for _ in range(3))
        flash_attn_func(q, k, v, causal=causal)
    print(json.dumps(dict(flash_attn_4=importlib.metadata.version("flash-attn-4"),
                          nvidia_cutlass_dsl=importlib.metadata.version("nvidia-cutlass-dsl"),
                          torch=torch.__version__, python=platform.python_version())))


def compile_case(case: str, python: str, site: str, dump: Path, timeout_s: float) -> tuple[dict, Path]:
    """(the child's versions, the cubin) of one case compiled into the empty folder `dump`. CaptureError when the
    child fails or runs past timeout_s seconds, or leaves not exactly one cubin."""
    env = dict(os.environ, **ENV, CUTE_DSL_DUMP_DIR=str(dump), PYTHONPATH=str(ROOT))
    cmd = [python, "-m", "lapis.captures.fa4_sass", "--child", case, "--site", site]
    try:
        r = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise CaptureError("a case compiles within --timeout", f"{case}: {timeout_s:g} s",
                           "raise --timeout (seconds per case)") from None
    if r.returncode != 0:
        raise CaptureError("the FA4 compile child exits 0", f"{case}: rc {r.returncode}: {r.stderr[-600:]}",
                           "check --python (torch) and --site (FA4's unpacked wheels)")
    cubins = sorted(dump.rglob("*.cubin"))
    if len(cubins) != 1:
        raise CaptureError("one compile leaves one cubin in CUTE_DSL_DUMP_DIR", f"{case}: {[c.name for c in cubins]}",
                           "check that the DSL honours CUTE_DSL_KEEP=ptx,cubin and CUTE_DSL_NO_CACHE=1")
    return json.loads(r.stdout.strip().splitlines()[-1]), cubins[0]


def compiler(cubin: Path) -> dict:
    """The compiler versions the case's PTX header (the .ptx beside the cubin) and the cubin's ELF note state."""
    ptx = next(iter(sorted(cubin.parent.glob("*.ptx"))), None)
    head = ptx.read_bytes()[:2000] if ptx else b""
    out = {}
    for key, data in (("ptx", head), ("ptxas", cubin.read_bytes())):
        m = TOOLS.search(data)
        out[key] = m.group(0).decode() if m else None
    return out


def _cuobjdump(args: list[str], timeout_s: float) -> str:
    r = subprocess.run(["cuobjdump", *args], capture_output=True, text=True, timeout=timeout_s, check=False)
    if r.returncode != 0:
        raise CaptureError("cuobjdump exits 0", f"cuobjdump {' '.join(args)}: rc {r.returncode}: {r.stderr[-300:]}",
                           "pass a cubin cuobjdump reads")
    return r.stdout


def _key(ins: sass.Instruction, base: int, size: int) -> tuple:
    """(address from the function's start, guard, opcode, modifiers, operands without .reuse), each hex literal
    in [base, base + size) taken as an absolute code address and made relative to base (size 0: none is)."""
    def rel(m):
        value = int(m.group(0), 16)
        return hex(value - base) if base <= value < base + size else m.group(0)
    ops = tuple(re.sub(r"0x[0-9a-f]+", rel, o).replace(".reuse", "") for o in ins.operands)
    return ins.address - base, ins.predicate, ins.opcode, ins.modifiers, ops


def _descriptor_last(key: tuple) -> tuple:
    ops = key[4]
    return key[:4] + (tuple(o for o in ops if not o.startswith(DESCRIPTOR))
                      + tuple(o for o in ops if o.startswith(DESCRIPTOR)),)


def compare(listing: list[sass.Instruction], ncu: list[sass.Instruction]) -> dict:
    """A cuobjdump listing of one function against Nsight Compute's source listing of it (absolute addresses, no
    .reuse flags): {"compared": the longer one's length, "equal": instructions equal in address from the start,
    guard, opcode, modifiers and operands, once .reuse is dropped and the branch targets Nsight Compute prints as
    absolute addresses are made relative, "descriptor_order": those equal only once the desc[...] operand is
    moved last (Nsight Compute prints UTMALDG/UTMASTG's descriptor first, cuobjdump last), "differ": the rest,
    "first_differ": [cuobjdump text, ncu text] of the first that differs, or null}."""
    base, size = ncu[0].address if ncu else 0, 16 * (len(ncu) + 1)
    equal = moved = 0
    first = None
    for a, b in zip(listing, ncu):
        ka, kb = _key(a, 0, 0), _key(b, base, size)
        if ka == kb:
            equal += 1
        elif _descriptor_last(ka) == _descriptor_last(kb):
            moved += 1
        elif first is None:
            first = [a.text, b.text]
    compared = max(len(listing), len(ncu))
    return dict(compared=compared, equal=equal, descriptor_order=moved, differ=compared - equal - moved,
                first_differ=first)


def record(case: str, listing: str, file: str) -> dict:
    """One case's manifest record from its cuobjdump text; CaptureError when it holds not exactly one function."""
    functions = sass.parse_cuobjdump(listing)
    if len(functions) != 1:
        raise CaptureError("a case's cubin holds one function", f"{case}: {list(functions)}",
                           "check the dump folder holds only this case's cubin")
    (name, instrs), = functions.items()
    b, h, length, d, causal = CASES[case]
    return dict(shape=shape(case), causal=causal, file=file, function=name, instructions=len(instrs),
                hgmma=sum(i.opcode == "HGMMA" for i in instrs), mufu=sum(i.opcode == "MUFU" for i in instrs))


def check(a: argparse.Namespace) -> list[str]:
    """The checked case names; CaptureError for the module docstring's input errors."""
    names = cases(a.cases)
    if not (Path(a.python).is_file() and os.access(a.python, os.X_OK)):
        raise CaptureError("--python is an executable file", a.python, "pass the 3.12 venv's bin/python "
                           "(benchmarks/fa4_sass.sh says how to build it)")
    if a.site and not Path(a.site).is_dir():
        raise CaptureError("--site is a folder", a.site, "pass the folder FA4's wheels were unpacked into, or ''")
    if Path(a.out).exists() and not Path(a.out).is_dir():
        raise CaptureError("--out is a folder", a.out, "pass a folder path")
    if shutil.which("cuobjdump") is None:
        raise CaptureError("cuobjdump on PATH", os.environ.get("PATH", ""), "add the CUDA toolkit's bin/ (or the "
                           "nvidia cu13 wheel's nvidia/cu13/bin) to PATH")
    if "d128" in names and not Path(a.ncu).is_file():
        raise CaptureError("--ncu is a file", a.ncu, f"pass lapis/data/captures/{NCU}")
    return names


def capture(a: argparse.Namespace, names: list[str], argv: list[str]) -> dict:
    """Compile and list every case into a.out (module docstring); the manifest written."""
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    kernels, versions, tools, listings = {}, {}, {}, {}
    for case in names:
        with tempfile.TemporaryDirectory(prefix=f"lapis-fa4-{case}-") as tmp:
            versions, cubin = compile_case(case, a.python, a.site, Path(tmp), a.timeout)
            tools = compiler(cubin)
            text = _cuobjdump(["-sass", str(cubin)], a.timeout)
        file = f"{case}.sass.gz"
        (out / file).write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))
        kernels[case] = record(case, text, file)
        listings[case] = text
        print(f"{case}: {kernels[case]['instructions']} instructions", flush=True)
    check_d128 = None
    if "d128" in listings:
        check_d128 = dict(capture=NCU, case="d128", **compare(
            next(iter(sass.parse_cuobjdump(listings["d128"]).values())), sass.parse_ncu_source_csv(a.ncu)))
    version = _cuobjdump(["--version"], a.timeout).strip().splitlines()
    prov = dict(gpu="none (compiled only, not run)", driver="none",
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                command="python -m lapis.captures.fa4_sass " + " ".join(argv),
                **git_provenance(SOURCES, cwd=ROOT), **versions, compiler=tools,
                cuobjdump="; ".join(version[-2:]), env=dict(ENV, CUTE_DSL_DUMP_DIR="<a scratch folder per case>"))
    man = dict(schema=SCHEMA, provenance=prov, kernels=kernels, device_check=check_d128)
    (out / "manifest.json").write_text(json.dumps(man, indent=1) + "\n")
    return man


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m lapis.captures.fa4_sass", description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="capture folder to write <case>.sass.gz and manifest.json into")
    ap.add_argument("--python", default="/tmp/fa4venv/bin/python", help="Python with torch (default: %(default)s)")
    ap.add_argument("--site", default="/tmp/fa4d/site", help="FA4's unpacked wheels (default: %(default)s)")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated (default: %(default)s)")
    ap.add_argument("--ncu", help=f"Nsight Compute's d128 listing (default: lapis/data/captures/{NCU})")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per compile (default: %(default)s)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if not (a.out or a.child):
        ap.error("--out is required")
    if a.ncu is None:
        a.ncu = str(CAPTURES / NCU)
    try:
        if a.child:
            child(cases(a.child)[0], a.site)
            return 0
        names = check(a)
        man = capture(a, names, argv)
    except LapisError as e:
        print(f"{ap.prog}: {e}", file=sys.stderr)
        return 2
    print(json.dumps(man["device_check"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())

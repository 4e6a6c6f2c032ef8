"""FA2's forward kernels' SASS, with control bits, from torch's CUDA library: DIR/fa2_sass/{manifest.json,
flash_fwd_hdim<D>[_causal].sass.gz}.

    python -m lapis.gpu.capture_fa2_sass --out DIR --lib PATH/libtorch_cuda.so --wheel WHEEL

reads the library of a torch wheel unpacked here (no GPU: cuobjdump only); on the GPU machine, without --lib, the
installed torch's (its torch/lib/*.so, largest first). The manifest records the library's sha256, so that the one
the timed runs used can be checked against it (`sha256sum` there).

torch's SDPA flash backend runs FlashAttention-2's flash_fwd_kernel (namespace pytorch_flash) with the traits
Flash_fwd_kernel_traits<D, kBlockM, kBlockN, kNWarps, ...> that flash_fwd_launch_template.h picks per head dim
(TRAITS). In each shared library of torch/lib (functions(): its sm_90 ELF images that name such a kernel), each
`Function :` block whose mangled name holds `TRAITS[d]` and the template flags torch's SDPA launches for dense
bf16 attention at L a multiple of the tiles (Is_dropout, Is_causal, Is_local, Has_alibi, Is_even_MN,
Is_even_K, Is_softcap, Return_softmax of flash_fwd_kernel: bools(); Is_causal 0 and 1) is kept, whole, as cuobjdump prints
it (the instruction text and the two 64-bit encoding words, whose upper word holds the control bits lapis.model.sass
decodes). One gzip file per head dim and mask; the manifest names the library, the function and its instruction
count.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import hashlib
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lapis.errors import CaptureError, LapisError
from lapis.gpu import capture_tma

# head dim -> the traits' mangled prefix: Flash_fwd_kernel_traits<D, kBlockM, kBlockN, kNWarps, Is_Q_in_regs=false,
# Share_Q_K_smem=false, bf16> (flash_fwd_launch_template.h run_mha_fwd_hdim64/128/256 on sm90, as
# lapis.pipeline_sim.schedules.fa2_flash.TRAITS)
TRAITS = {64: "ILi64ELi128ELi128ELi4ELb0ELb0EN7cutlass10bfloat16_t",
          128: "ILi128ELi128ELi64ELi4ELb0ELb0EN7cutlass10bfloat16_t",
          256: "ILi256ELi64ELi64ELi4ELb0ELb0EN7cutlass10bfloat16_t"}
# flash_fwd_kernel's bools after the traits (Is_dropout, Is_causal, Is_local, Has_alibi, Is_even_MN, Is_even_K,
# Is_softcap, Return_softmax) for dense attention with L a multiple of the tiles: flash_fwd_launch_template.h
# run_flash_fwd passes Is_even_MN only where kHeadDim <= 128. The non-causal hdim 128 one is the name Nsight
# Compute reported for torch's SDPA at 8x16x4096x128 (capture ncu/h200-2026-12-01-units).
def bools(d: int, causal: bool) -> str:
    even_mn = int(d <= 128)
    return f"ELb0ELb{int(causal)}ELb0ELb0ELb{even_mn}ELb1ELb0ELb0EEEvNS_16Flash_fwd_paramsE"


FUNCTION = re.compile(r"^\s*Function : (\S+)")
KERNEL = "pytorch_flash16flash_fwd_kernel"
INSTRUCTION = re.compile(r"/\*[0-9a-f]{4,}\*/")


def libraries(lib: str | None) -> list[Path]:
    """[lib], or the installed torch's torch/lib/*.so, largest first (libtorch_cuda holds the attention kernels).
    CaptureError without --lib where torch is not installed."""
    if lib:
        return [Path(lib)]
    try:
        import torch
    except ImportError as e:
        raise CaptureError("no --lib and torch not importable", str(e)[:200],
                           "pass --lib PATH/libtorch_cuda.so (and --wheel) or run where torch is installed") from None
    lib = Path(torch.__file__).parent / "lib"
    return sorted(lib.glob("*.so*"), key=lambda p: -p.stat().st_size)


def functions(lib: Path, timeout_s: float) -> dict[str, list[str]]:
    """{mangled name: its cuobjdump lines} of the flash_fwd_kernel functions with TRAITS in lib's sm_90 code: the
    library's ELF images are extracted (`cuobjdump -xelf all`, into a scratch folder), and only the sm_90 images
    whose string table names such a function are disassembled. CaptureError when a cuobjdump call runs past
    timeout_s seconds."""
    out: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory(prefix="lapis-fa2-") as tmp:
        _cuobjdump(["-xelf", "all", str(lib.resolve())], timeout_s, cwd=tmp)
        for cubin in sorted(Path(tmp).glob("*.sm_90.cubin")):
            data = cubin.read_bytes()
            if KERNEL.encode() not in data or not any(t.encode() in data for t in TRAITS.values()):
                continue
            text = _cuobjdump(["-sass", str(cubin)], timeout_s)
            cur = None
            for line in text.splitlines(keepends=True):
                m = FUNCTION.match(line)
                if m:
                    cur = m.group(1) if KERNEL in m.group(1) and any(t in m.group(1) for t in TRAITS.values()) \
                        else None
                    if cur is not None:
                        out[cur] = []
                if cur is not None:
                    out[cur].append(line)
    return out


def _cuobjdump(args: list[str], timeout_s: float, cwd=None) -> str:
    """cuobjdump's stdout for args (its exit status is not checked: a library without device code is no error
    here). CaptureError past timeout_s seconds."""
    try:
        return subprocess.run(["cuobjdump", *args], cwd=cwd, capture_output=True, text=True, errors="replace",
                              timeout=timeout_s, check=False).stdout
    except subprocess.TimeoutExpired:
        raise CaptureError("cuobjdump ran past --timeout", f"cuobjdump {' '.join(args)[:200]}: {timeout_s:g} s",
                           "raise --timeout (seconds per call)") from None


def check(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """Refuses (argparse's error, exit 2) a --timeout that is not a positive number of seconds, a --lib that is not
    an ELF file, a --wheel that is not a file, a --provenance that is not a JSON object, an --out (or its
    fa2_sass/) that is a file; then CaptureError when cuobjdump is not on PATH. Nothing is written before."""
    if not (math.isfinite(a.timeout) and a.timeout > 0):
        ap.error(f"--timeout {a.timeout}: not a positive number of seconds")
    if a.lib:
        lib = Path(a.lib)
        if not lib.is_file():
            ap.error(f"--lib {lib}: not a file (pass torch/lib/libtorch_cuda.so of an unpacked torch wheel)")
        with open(lib, "rb") as f:
            head = f.read(4)
        if head != b"\x7fELF":
            ap.error(f"--lib {lib}: not an ELF shared library (starts {head!r}; pass torch/lib/libtorch_cuda.so)")
    if a.wheel and not Path(a.wheel).is_file():
        ap.error(f"--wheel {a.wheel}: not a file (pass the torch wheel --lib was unpacked from)")
    if a.provenance:
        try:
            prov = json.loads(Path(a.provenance).read_text())
        except (OSError, ValueError) as e:
            ap.error(f"--provenance {a.provenance}: unreadable as JSON ({type(e).__name__}: {e})")
        if not isinstance(prov, dict):
            ap.error(f"--provenance {a.provenance}: not a JSON object "
                     "(write it with python -m lapis.captures.provenance)")
    for d in (Path(a.out), Path(a.out) / "fa2_sass"):
        if d.exists() and not d.is_dir():
            ap.error(f"--out {a.out}: {d} is a file, not a folder (pass a folder)")
    if shutil.which("cuobjdump") is None:
        raise CaptureError("cuobjdump not on PATH", "PATH", "put the CUDA toolkit's bin/ (or the "
                           "nvidia-cuda-cuobjdump wheel's) on PATH")


def pick(found, d: int, causal: bool) -> str | None:
    """The name in `found` with head dim d's traits and bools(d, causal), or None."""
    return next((n for n in found if TRAITS[d] in n and n.endswith(bools(d, causal))), None)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m lapis.gpu.capture_fa2_sass", description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output folder; gets fa2_sass/")
    ap.add_argument("--provenance", help="JSON from `python -m lapis.captures.provenance` (commit, dirty, blobs)")
    ap.add_argument("--lib", help="a torch CUDA library to read (default: the installed torch's libraries)")
    ap.add_argument("--wheel", help="the wheel --lib was unpacked from (recorded with its sha256)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds of cuobjdump per library (default 300)")
    a = ap.parse_args(argv)
    try:
        check(ap, a)
        return capture(a, argv)
    except LapisError as e:
        print(f"{ap.prog}: {e}", file=sys.stderr)
        return 2


def capture(a: argparse.Namespace, argv: list[str]) -> int:
    """main's work on checked arguments: exit status 0 when every head dim and mask was found, else 1."""
    t_start = time.time()
    prov = (capture_tma.provenance(a.provenance, argv, "python -m lapis.gpu.capture_fa2_sass") if not a.lib
            else dict(json.loads(Path(a.provenance).read_text()) if a.provenance else {},
                      gpu="none: read on a CPU machine from the library of --wheel", driver="none",
                      command="python -m lapis.gpu.capture_fa2_sass " + " ".join(argv),
                      cuobjdump=_cuobjdump(["--version"], a.timeout).strip().splitlines()[-1:],
                      date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")))
    if a.wheel:
        prov["wheel"] = dict(name=Path(a.wheel).name, sha256=sha256(Path(a.wheel)))
    dest = Path(a.out) / "fa2_sass"
    dest.mkdir(parents=True, exist_ok=True)
    found, scanned = {}, []
    wanted = [(d, c) for d in TRAITS for c in (False, True)]
    for lib in libraries(a.lib):
        t0 = time.time()
        got = functions(lib, a.timeout)
        scanned.append(dict(library=lib.name, bytes=lib.stat().st_size, sha256=sha256(lib),
                            flash_functions=len(got), seconds=round(time.time() - t0, 1)))
        print(f"{lib.name}: {len(got)} flash_fwd_kernel functions in {time.time() - t0:.0f} s", flush=True)
        for n, lines in got.items():
            found.setdefault(n, (lib.name, lines))
        if all(pick(found, d, c) for d, c in wanted):
            break
    kept = {}
    for d, c in wanted:
        name = pick(found, d, c)
        if name is None:
            continue
        lib, lines = found[name]
        key = f"hdim{d}" + ("_causal" if c else "")
        path = dest / f"flash_fwd_{key}.sass.gz"
        path.write_bytes(gzip.compress("".join(lines).encode(), mtime=0))
        kept[key] = dict(function=name, library=lib, file=path.name, head_dim=d, causal=c,
                         instructions=sum(bool(INSTRUCTION.search(x)) for x in lines))
    (dest / "manifest.json").write_text(json.dumps(dict(
        provenance=prov, kind="fa2_sass", traits=TRAITS, scanned=scanned, kernels=kept,
        candidates=sorted(found), wall_s=round(time.time() - t_start, 1),
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")), indent=1))
    print(json.dumps(kept, indent=1))
    return 0 if len(kept) == len(wanted) else 1


if __name__ == "__main__":
    sys.exit(main())

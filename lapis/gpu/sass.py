"""SASS digests of the package's kernels: whether a change to the .cu sources changed a single instruction.

Every lapis/gpu/kernels/*.cu is built for sm_90a (harness.NVCC_FLAGS; attention_h200.cu and gemm_ws.cu also with
-DLAPIS_TIMELINE=1) and disassembled with `cuobjdump -sass`; each kernel function gets the sha256 of its instruction
encodings (the two 64-bit words cuobjdump prints per 128-bit instruction), listed in cuobjdump's order. Equal
digests are equal SASS, whatever cuobjdump version prints them. The CUTLASS oracles include CuTe: the headers come
from the nvidia-cutlass wheel (cutlass_library), and cuobjdump and nvdisasm from the nvidia-cuda-cuobjdump and
nvidia-cuda-nvdisasm wheels (site-packages/nvidia/cu13/bin) when they are not on PATH.

    python -m lapis.gpu.sass OUT.json          # writes {nvcc, builds: {file: {build: [[function, sha256], ...]}}}
    python -m lapis.gpu.sass --check FILE.json  # exit 1, naming each build whose digests differ
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from lapis.errors import CaptureError, LapisError
from lapis.gpu import harness
from lapis.gpu.harness import NVCC_FLAGS, build_key

KERNELS = Path(__file__).resolve().parent / "kernels"
BUILDS = {"plain": {}, "timeline": {"LAPIS_TIMELINE": 1}}
TIMELINE_SOURCES = ("attention_h200.cu", "gemm_ws.cu")  # the files built twice
ENCODING = re.compile(r"/\* (0x[0-9a-f]{16}) \*/")


def tool_dir() -> Path | None:
    """The folder holding cuobjdump and nvdisasm: PATH's, else the nvidia-cuda-cuobjdump wheel's."""
    if shutil.which("cuobjdump") and shutil.which("nvdisasm"):
        return Path(shutil.which("cuobjdump")).parent
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations if spec else None) or []:
        for d in sorted(Path(root).glob("cu*/bin")):
            if (d / "cuobjdump").exists() and (d / "nvdisasm").exists():
                return d
    return None


def cutlass_include() -> Path | None:
    """CUTLASS's include folder inside the nvidia-cutlass wheel, or None without it."""
    spec = importlib.util.find_spec("cutlass_library")
    return Path(spec.origin).parent / "source" / "include" if spec and spec.origin else None


def nvcc_version() -> str:
    """nvcc's release line, e.g. 'Cuda compilation tools, release 13.0, V13.0.88'."""
    out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=True).stdout
    return next(line for line in out.splitlines() if line.startswith("Cuda compilation tools"))


def builds(kernels: Path = KERNELS) -> list[tuple[str, str]]:
    """(file name, build name) of every build, in file order."""
    return [(cu.name, b) for cu in sorted(kernels.glob("*.cu"))
            for b in (BUILDS if cu.name in TIMELINE_SOURCES else ("plain",))]


def digests(sass: str) -> list[list[str]]:
    """[[function, sha256 of its instruction encodings], ...] from `cuobjdump -sass` text, in its order."""
    out = []
    for part in re.split(r"^\s*Function : ", sass, flags=re.M)[1:]:
        name, body = part.split("\n", 1)
        words = ENCODING.findall(body)
        out.append([name.strip(), hashlib.sha256(" ".join(words).encode()).hexdigest()])
    return out


def includes_cutlass(source: Path) -> bool:
    """Whether `source` itself includes a CuTe or CUTLASS header (#include <cute/...> or <cutlass/...>)."""
    return re.search(r"^\s*#include\s*<(cute|cutlass)/", Path(source).read_text(), re.M) is not None


def build_digests(source: Path, build: str, tools: Path, work: Path, cache: Path | None = None) -> list[list[str]]:
    """Compile one build of `source`, disassemble it, and digest each function. With `cache`, a source that
    includes no CuTe or CUTLASS header is built by harness.build into that folder (the same flags and key as the
    benches' and tests' builds, so a cubin built there before is not compiled again); otherwise the cubin is
    compiled into `work` with the CUTLASS headers' folder on the include path."""
    if cache is not None and not includes_cutlass(source):
        return _disassembled(harness.build(source, BUILDS[build], cache)[0], tools)
    cubin = work / f"{source.stem}.{build}.cubin"
    inc = cutlass_include()
    cmd = ["nvcc", *NVCC_FLAGS, *(["-I", str(inc)] if inc else []),
           *[f"-D{k}={v}" for k, v in BUILDS[build].items()], "-o", str(cubin), str(source)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"nvcc failed for {source.name} ({build}): {p.stderr[-2000:]}")
    return _disassembled(cubin, tools)


def _disassembled(cubin: Path, tools: Path) -> list[list[str]]:
    """digests of `cuobjdump -sass cubin` (cuobjdump from `tools`)."""
    env = dict(os.environ, PATH=f"{tools}{os.pathsep}{os.environ.get('PATH', '')}")
    sass = subprocess.run([str(tools / "cuobjdump"), "-sass", str(cubin)], capture_output=True, text=True,
                          check=True, env=env).stdout
    return digests(sass)


def _cached_digests(source: Path, build: str, tools: Path, work: Path, cache: Path | None) -> list[list[str]]:
    """build_digests, read from `cache` when a build with the same key was digested before (key: harness.build_key
    over the source, its local headers, the build's defines, the flags, the CUTLASS headers' folder and version,
    and nvcc's release)."""
    if cache is None:
        return build_digests(source, build, tools, work)
    from importlib.metadata import PackageNotFoundError, version
    try:
        cutlass = version("nvidia-cutlass")
    except PackageNotFoundError:
        cutlass = None
    key = build_key(source, BUILDS[build], f"{nvcc_version()} {NVCC_FLAGS} {cutlass_include()} {cutlass}")
    path = cache / f"{source.stem}.{build}-{key}.sass.json"
    if path.exists():
        return json.loads(path.read_text())
    d = build_digests(source, build, tools, work, cache)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(d))
    tmp.replace(path)
    return d


def collect(kernels: Path = KERNELS, jobs: int | None = None, cache: Path | None = None) -> dict:
    """{nvcc, builds: {file: {build: [[function, sha256], ...]}}} of every build (nvcc runs `jobs` at a time).
    cache: a folder of digests keyed by build (see _cached_digests) and of harness.build's cubins (see
    build_digests): only changed builds are compiled, and a cubin harness.build left there is not compiled again."""
    tools = tool_dir()
    if tools is None:
        raise RuntimeError("cuobjdump and nvdisasm not found: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm")
    todo = builds(kernels)
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(jobs or os.cpu_count() or 1) as pool:
        done = list(pool.map(lambda fb: _cached_digests(kernels / fb[0], fb[1], tools, Path(tmp), cache), todo))
    out: dict = {}
    for (name, build), d in zip(todo, done):
        out.setdefault(name, {})[build] = d
    return dict(nvcc=nvcc_version(), builds=out)


def differences(expected: dict, got: dict) -> list[str]:
    """One line per build whose function list or digests differ ('file build: ...')."""
    lines = []
    for name in sorted(set(expected["builds"]) | set(got["builds"])):
        a, b = expected["builds"].get(name, {}), got["builds"].get(name, {})
        for build in sorted(set(a) | set(b)):
            x, y = a.get(build), b.get(build)
            if x == y:
                continue
            if x is None or y is None:
                lines.append(f"{name} {build}: {'new' if x is None else 'gone'}")
            elif [f for f, _ in x] != [f for f, _ in y]:
                lines.append(f"{name} {build}: functions {[f for f, _ in x]} -> {[f for f, _ in y]}")
            else:
                lines.append(f"{name} {build}: SASS differs in {[f for (f, h), (_, g) in zip(x, y) if h != g]}")
    return lines


def dumps(got: dict) -> str:
    """The digests as JSON, one [function, sha256] a line."""
    return re.sub(r'\[\s+("[^"]+"),\s+("[0-9a-f]{64}")\s+\]', r"[\1, \2]", json.dumps(got, indent=1)) + "\n"


def parser() -> argparse.ArgumentParser:
    """The options of `python -m lapis.gpu.sass` (the module docstring's two forms)."""
    ap = argparse.ArgumentParser(prog="python -m lapis.gpu.sass",
                                 description="SASS digests of lapis/gpu/kernels/*.cu (sm_90a): write them, or compare "
                                 "them with a committed file.")
    ap.add_argument("file", metavar="FILE.json", help="where to write the digests, or with --check the file to "
                    "compare with")
    ap.add_argument("--check", action="store_true", help="compare with FILE.json; exit 1 naming each build whose "
                    "digests differ")
    return ap


def read_digests(path: Path) -> dict:
    """A digests file ({nvcc, builds: {file: {build: [[function, sha256], ...]}}}); CaptureError if unreadable."""
    try:
        d = json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError, RecursionError) as e:
        raise CaptureError("--check reads a digests file", f"{path}: {type(e).__name__}: {e}"[:300],
                           "pass the FILE.json python -m lapis.gpu.sass wrote") from None
    if not (isinstance(d, dict) and isinstance(d.get("nvcc"), str) and isinstance(d.get("builds"), dict)
            and all(isinstance(b, dict) and all(isinstance(x, list) for x in b.values()) for b in d["builds"].values())):
        raise CaptureError("--check reads a digests file: a JSON object with nvcc and builds {file: {build: list}}",
                           str(path) if d is None else f"{path}: {str(d)[:120]}",
                           "pass the FILE.json python -m lapis.gpu.sass wrote (or write one: python -m "
                           "lapis.gpu.sass FILE.json)")
    return d


def _check_out(path: Path) -> None:
    """CaptureError where FILE.json cannot be written: a directory, or in a folder that does not exist."""
    if path.is_dir() or not path.parent.is_dir():
        raise CaptureError("FILE.json is a file in an existing folder", str(path),
                           "pass a path such as tests/data/sass/kernels.json")


def main(argv: list[str]) -> int:
    """Write the digests to FILE.json (whole or not at all), or with --check compare them with it (exit 1 on a
    difference). --help prints the usage; a missing or extra argument is a usage error (argparse: exit 2), and so
    is, before anything is built, a FILE.json --check cannot read or one that cannot be written."""
    a = parser().parse_args(argv)
    try:  # before collect(): a bad FILE.json is told in a second, not after every kernel is built
        expected = read_digests(Path(a.file)) if a.check else _check_out(Path(a.file))
    except LapisError as e:
        print(f"python -m lapis.gpu.sass: {e}", file=sys.stderr)
        return 2
    got = collect()
    if not a.check:
        tmp = Path(a.file).with_name(f".{Path(a.file).name}.{os.getpid()}.tmp")
        tmp.write_text(dumps(got))
        os.replace(tmp, a.file)  # a run killed while writing leaves the old file, not half a new one
        return 0
    if expected["nvcc"] != got["nvcc"]:
        print(f"built with {got['nvcc']!r}, the digests are of {expected['nvcc']!r}", file=sys.stderr)
        return 1
    lines = differences(expected, got)
    print("\n".join(lines) or "identical SASS")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

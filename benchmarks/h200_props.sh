#!/usr/bin/env bash
# One device call on the H200: the example property suite (examples/test_my_layouts.py) against the GPU oracles
# (lapis.gpu.oracle), as written and with the planted SBO bug, plus the oracle's own request rate.
# Usage on the device, from the repo root (lapis need not be installed: PYTHONPATH=.):
#   bash benchmarks/h200_props.sh [provenance.json]
# provenance.json (optional, made here where git is): python -m lapis.captures.provenance > props-provenance.json
# The example suite needs hypothesis, pytest and tensor-layouts on the device (the H200 image lacked
# tensor-layouts): carry wheels in .wheels/ (e.g. pip download tensor-layouts==0.3.2 --no-deps -d .wheels, name
# .wheels in `carry`) and they are installed first, offline.
# Writes $OUT/props.json: examples run and per second per suite run, failures, whether the planted bug was found,
# oracle requests per second (tma_load, encode, wgmma_read), the model-vs-GPU byte check, and provenance
# (lapis.gpu.capture_tma.provenance). Logs: $OUT/props_clean.log, $OUT/props_planted.log.
set -u
export PYTHONPATH=.
OUT=${OUT:-/tmp/lapis-props}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv
if [ -d .wheels ]; then python3 -m pip install -q --no-index --find-links .wheels .wheels/*.whl; echo "wheels rc $?"; fi
python3 -c "import hypothesis, pytest; print('hypothesis', hypothesis.__version__, 'pytest', pytest.__version__)"
echo "import hypothesis, pytest: rc $?"
python3 -c "import tensor_layouts, numpy, cupy; print('tensor_layouts ok, numpy', numpy.__version__, 'cupy', cupy.__version__)"
echo "import tensor_layouts, numpy, cupy: rc $?"
timeout 560 python3 - "${1:-}" <<'EOF'
import json, os, re, subprocess, sys, time
import numpy as np
from lapis.gpu.capture_tma import provenance
from lapis.gpu.oracle import Oracle, OracleFault, SENTINEL, global_image

out = os.environ.get("OUT", "/tmp/lapis-props")
res = {"provenance": provenance(sys.argv[1] or None, sys.argv[1:], "bash benchmarks/h200_props.sh")}

# 1. The oracle alone: requests per second after the kernels are built (first request of each kind).
from lapis.layouts.tma import TensorMap, load_box
o = Oracle("gpu", timeout_s=300)
pong = o.ping()
res["ping"] = pong if not isinstance(pong, OracleFault) else repr(pong)
print("ping", res["ping"], flush=True)
t = TensorMap("bf16", (512, 1024), (1024,), (64, 128), swizzle="128B")
first = time.perf_counter(); warm = o.tma_load(t, (0, 0), 0); build_s = time.perf_counter() - first
rates, mism = {}, 0
t0 = time.perf_counter()
for i in range(200):
    c, off = (64 * (i % 8) - 64, 128 * (i % 9) - 64), 128 * (i % 40)
    got = o.tma_load(t, c, off)
    want = np.full(t.smem_footprint, SENTINEL, np.uint8)
    load_box(t, global_image(t), c, 1024 + off, want, 1024 + off)
    mism += not (isinstance(got, np.ndarray) and np.array_equal(got, want))
rates["tma_load_per_s"] = 200 / (time.perf_counter() - t0)
t0 = time.perf_counter()
enc = [o.encode(TensorMap("bf16", (64 * (i + 1), 256), (128 * (i + 1),), (64, 64), swizzle="128B")) for i in range(200)]
rates["encode_per_s"] = 200 / (time.perf_counter() - t0)
img = np.zeros(64 * 1024, np.uint8)
first = time.perf_counter(); o.wgmma_read(img, 0, 0, "bf16", 64); wgmma_build_s = time.perf_counter() - first
t0 = time.perf_counter()
ds = [o.wgmma_read(img, 0, 0, "bf16", 64) for _ in range(100)]
rates["wgmma_read_per_s"] = 100 / (time.perf_counter() - t0)
fault = o.tma_load(t, (0, 0), 64)  # misaligned destination: a fault as data, then a fresh child
after = o.tma_load(t, (0, 0), 128)
res["oracle"] = dict(rates, tma_build_s=build_s, wgmma_build_s=wgmma_build_s, model_vs_gpu_mismatches=mism,
                     loads=200, encode_accepted=sum(bool(e) and e.accepted for e in enc),
                     wgmma_faults=sum(isinstance(d, OracleFault) for d in ds),
                     misaligned_fault=repr(fault), child_starts=o.starts,
                     load_after_fault_ok=isinstance(after, np.ndarray))
o.close()
print(json.dumps(res["oracle"], indent=1), flush=True)

# 2. The example suite, as written and with the planted bug.
def suite(bug):
    env = dict(os.environ, PYTHONPATH=".", LAPIS_ORACLE_BACKEND="gpu")
    env.pop("LAPIS_EXAMPLE_BUG", None)
    if bug:
        env["LAPIS_EXAMPLE_BUG"] = bug
    cmd = [sys.executable, "-m", "pytest", "examples/test_my_layouts.py", "--lapis-gpu", "-q", "-p",
           "lapis.testing.pytest_plugin", "-p", "no:cacheprovider", "--hypothesis-show-statistics", "-rfs"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    wall = time.perf_counter() - t0
    text = p.stdout + p.stderr
    open(f"{out}/props_{'planted' if bug else 'clean'}.log", "w").write(text)
    stats = [tuple(map(int, m)) for m in re.findall(r"(\d+) passing, (\d+) failing, and (\d+) invalid", text)]
    gen_s = sum(float(s) for s in re.findall(r"during generate phase \(([\d.]+) seconds\)", text))
    n = sum(a + b for a, b, _ in stats)
    summary = text.strip().splitlines()[-1] if text.strip() else ""
    return dict(command=" ".join(cmd), rc=p.returncode, summary=summary, examples=n, wall_s=wall,
                examples_per_s_wall=n / wall if wall else None, generate_s=gen_s,
                examples_per_s_generate=n / gen_s if gen_s else None,
                failed=re.findall(r"FAILED (\S+)", text), skipped="skipped" in summary)

res["clean"] = suite(None)
print(json.dumps(res["clean"], indent=1), flush=True)
res["planted"] = suite("sbo")
res["planted"]["planted_bug_found"] = any("test_b_" in f for f in res["planted"]["failed"]) and \
    "SBO should be 1024 B" in open(f"{out}/props_planted.log").read()
print(json.dumps(res["planted"], indent=1), flush=True)
json.dump(res, open(f"{out}/props.json", "w"), indent=1)
print("wrote", f"{out}/props.json")
EOF
echo "props rc $?"

#!/usr/bin/env bash
# One device call on the H200 (lapis `run` tool), from the repo root: the user-header example
# examples/ws_gemm_timeline.cu at 4096^3, plain (TL_ON=0) vs instrumented (TL_ON=1), for three samplings:
# every CTA and K block (1:1), every 4th CTA (4:1), every 16th CTA at every 8th K block (16:8). The instrumented
# build reads %clock64 on the wgmma path and writes its records while the wgmma run (tests/gpu/test_user_header.py
# checks that SASS on the CPU). Goal: 1:1 at most ~50% over plain, and 4:1 and 16:8 below 1:1.
# Everything lands under $OUT (at most 8 files come back):
#   ws_gemm_example.log       nvidia-smi, each build's ptxas line, correctness, times, overhead per sampling
#   ws_gemm_example.json      {"1:1": overhead_pct, ...} and the plain/timeline µs of each
#   ws_gemm_timeline_4_1.npz  the every-4th-CTA timeline (decoded at the end of the log)
# Usage: bash benchmarks/h200_header_example.sh   (SAMPLINGS="1:1 4:1 16:8" by default, RUNS=20)
set -u
export PYTHONPATH=.
OUT=${OUT:-/tmp/lapis-header-example}
rm -f /tmp/ws_gemm_*_*.npz  # the summary reads these
mkdir -p "$OUT"
LOG="$OUT/ws_gemm_example.log"
shape=4096x4096x4096
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$LOG" 2>&1
for s in ${SAMPLINGS:-1:1 4:1 16:8}; do
  n=${s%%:*}; m=${s##*:}
  out=/tmp/ws_gemm_${n}_${m}.npz
  [ "$s" = "4:1" ] && out="$OUT/ws_gemm_timeline_4_1.npz"
  echo "== example, cta_every $n, iter_every $m" >> "$LOG"
  timeout 150 python3 examples/run_ws_gemm_timeline.py --shape $shape --cta-every "$n" --iter-every "$m" \
    --runs "${RUNS:-20}" --out "$out" >> "$LOG" 2>&1
  echo "example rc $?" >> "$LOG"
done
python3 - "$OUT" >> "$LOG" 2>&1 <<'PY'
import glob, json, os, sys
import numpy as np
out = sys.argv[1]
summary = {}
for f in sorted(glob.glob("/tmp/ws_gemm_*_*.npz") + glob.glob(os.path.join(out, "ws_gemm_timeline_4_1.npz"))):
    meta = json.loads(bytes(np.load(f)["meta"]).decode())
    smp = meta["sampling"]
    summary[f"{smp['cta_every']}:{smp['iter_every']}"] = dict(overhead_pct=round(meta["overhead_pct"], 1),
                                                               plain_us=meta["plain_us"], timeline_us=meta["timeline_us"])
json.dump(summary, open(os.path.join(out, "ws_gemm_example.json"), "w"), indent=1)
print("summary", json.dumps(summary))
from lapis.captures import user_timeline
p = os.path.join(out, "ws_gemm_timeline_4_1.npz")
if os.path.exists(p):
    d = user_timeline.read(p)
    print(f"decoded: {len(d['events'])} spans from {len(d['ctas'])} CTAs, header {d['header']}")
PY
grep -E "==|built|TL_ON|overhead|rc |summary|decoded|Error" "$LOG"
# One manifest with provenance (made from hdr-provenance.json, written where git is) for the whole call.
python3 - "$OUT" <<'PY'
import json, sys
from pathlib import Path
from lapis.gpu.capture_tma import provenance
out = Path(sys.argv[1])
git = "hdr-provenance.json" if Path("hdr-provenance.json").exists() else None
res = out / "ws_gemm_example.json"
man = dict(provenance=provenance(git, [], "bash benchmarks/h200_header_example.sh"), kind="user_timeline",
           kernel="examples/ws_gemm_timeline.cu", log="ws_gemm_example.log",
           results=json.loads(res.read_text()) if res.exists() else None)
(out / "manifest.json").write_text(json.dumps(man, indent=1))
print("manifest written")
PY

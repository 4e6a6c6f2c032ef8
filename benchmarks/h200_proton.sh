#!/usr/bin/env bash
# One device call on the H200 (lapis `run` tool), from the repo root: Triton Proton's intra-kernel
# (instrumentation-mode) trace of small kernels (benchmarks/h200_proton.py). By default: a Gluon persistent
# warp-specialized GEMM with examples/ws_gemm.py's roles and ops (warps 0, 4, 10 sampled: the producer runs on
# warp 10, Triton's padding warps on 8, 9, 11), and the same GEMM at 1024x1024x512 with every warp recorded.
# Named on the command line: triton_add (a Triton vector add), gluon_matmul (Proton's tutorial Gluon GEMM).
# Each kernel runs in its own process and fails soft: its capture.json says "ok", or "unsupported"/"failed"
# with the exception text; what the process printed (Proton's warnings included) goes into capture.json's
# log_tail and into $OUT/proton/h200_proton.log.
# Files (at most 8 come back from a device call): $OUT/proton/<name>/{<name>.chrome_trace, capture.json} and
# $OUT/proton/h200_proton.log. About 30 s of GPU time (imports and compiles included).
# Usage: python -m lapis.captures.provenance benchmarks/h200_proton.py benchmarks/h200_proton.sh > proton-provenance.json
#        (where git is), then on the device: bash benchmarks/h200_proton.sh proton-provenance.json [names...]
set -u
export PYTHONPATH=.
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/lapis-proton}
export OUT
mkdir -p "$OUT/proton"
LOG="$OUT/proton/h200_proton.log"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
  python3 -c "import triton, torch; print('triton', triton.__version__, 'torch', torch.__version__)"
} > "$LOG" 2>&1
prov="${1:-}"
shift || true

run_case() {  # $1: name; the process's output goes to /tmp (not $OUT: the file count is limited)
  local name=$1 tmp=/tmp/lapis_proton_$1.log
  mkdir -p "$OUT/proton/$name"
  timeout 150 python3 benchmarks/h200_proton.py "$prov" "$name" > "$tmp" 2>&1
  local rc=$?
  echo "== $name rc $rc" >> "$LOG"
  cat "$tmp" >> "$LOG"
  # the log's tail into the manifest; a process that died before writing one (a crash, a timeout) gets one
  python3 - "$OUT/proton/$name" "$rc" "$prov" "$tmp" >> "$LOG" 2>&1 <<'PY'
import json, sys
from pathlib import Path
d, rc, prov, tmp = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], Path(sys.argv[4])
log = tmp.read_text(errors="replace")[-6000:] if tmp.exists() else ""
f = d / "capture.json"
if f.exists():
    man = json.loads(f.read_text())
else:
    man = dict(schema="lapis.capture/1", kind="proton_timeline", name=d.name, status="failed", trace=None,
               error=f"the capture process ended with exit status {rc} before writing its manifest"
                     + (" (timeout 150 s)" if rc == 124 else ""),
               provenance=json.loads(Path(prov).read_text()) if prov and Path(prov).exists() else None)
man.update(exit_status=rc, log_tail=log)
f.write_text(json.dumps(man, indent=1))
print(f"{d.name}: status {man['status']}")
PY
}


for name in ${*:-gluon_ws_matmul gluon_ws_matmul_all}; do
  run_case "$name"
done
python3 - "$OUT/proton" >> "$LOG" 2>&1 <<'PY'
import json, sys
from pathlib import Path
root = Path(sys.argv[1])
keys = ("status", "error", "plain_us", "clock_mhz", "x_events", "trace_bytes", "warps_seen", "scopes", "roles_note")
summary = {d.name: {k: json.loads((d / "capture.json").read_text()).get(k) for k in keys}
           for d in sorted(root.iterdir()) if (d / "capture.json").exists()}
print("summary", json.dumps(summary, indent=1)[:8000])
PY
ls -la "$OUT"/proton/* >> "$LOG" 2>&1
cat "$LOG"

#!/usr/bin/env bash
# One device call on the H200 (lapis `run` tool), from the repo root: the user-header example and the cost of
# sampled timelines on attention s9. Everything lands under $OUT (at most 8 files come back):
#   ws_gemm.log         build, correctness and plain vs instrumented times of examples/ws_gemm_timeline.cu, for
#                       the full timeline, every 16th CTA at every 8th K block, and every 4th CTA (the file)
#   ws_gemm_timeline.npz the sampled example timeline (every 4th CTA), with provenance in its meta: the input
#                       of `lapis compare --measured ... --schedule examples/ws_gemm.py:WS_GEMM --shape 4096x4096x4096`
#   s9.log, s9_overhead.json  lapis.gpu.bench_attention's s9 at 8x16x4096x128, its timeline build compiled with
#                       harness.cuh's sampling (-DLAPIS_TIMELINE_CTA_EVERY=N -DLAPIS_TIMELINE_ITER_EVERY=M) for each
#                       N:M in $S9_SAMPLINGS; instrumentation_overhead_pct per sampling (the goal: <= 10%)
# Usage: bash benchmarks/h200_header.sh   (S9_SAMPLINGS="1:1 16:1 16:4 16:8" by default; EXAMPLE=0 skips the
# example). Each run has its own timeout (120 s); a call is 10 minutes at most, so where one call does not hold
# everything, split it: EXAMPLE=1 S9_SAMPLINGS="1:1 16:8", then EXAMPLE=0 S9_SAMPLINGS="16:1 16:4".
# s9 and the example are persistent (one CTA per SM): the kernel takes as long as its slowest CTA, so sampling
# CTAs bounds the records, not the time; sampling iterations (the second number) bounds the recorded CTAs' cost.
set -u
export PYTHONPATH=.
OUT=${OUT:-/tmp/lapis-header}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
shape=4096x4096x4096
if [ "${EXAMPLE:-1}" = 1 ]; then
{
  for s in "1 1" "16 8"; do
    set -- $s
    echo "== example, cta_every $1, iter_every $2"
    timeout 120 python3 examples/run_ws_gemm_timeline.py --shape $shape --cta-every "$1" --iter-every "$2" \
      --out "/tmp/ws_gemm_$1_$2.npz"; echo "example rc $?"
  done
  echo "== example, every 4th CTA, every iteration (the file that comes back)"
  timeout 120 python3 examples/run_ws_gemm_timeline.py --shape $shape --cta-every 4 --out "$OUT/ws_gemm_timeline.npz"
  echo "example rc $?"
  python3 - "$OUT/ws_gemm_timeline.npz" <<'EOF'
import sys
from lapis.captures import user_timeline
d = user_timeline.read(sys.argv[1])
print(f"decoded: {len(d['events'])} spans from {len(d['ctas'])} CTAs, header {d['header']}")
EOF
} > "$OUT/ws_gemm.log" 2>&1
grep -E "TL_ON|overhead|rc |decoded|==" "$OUT/ws_gemm.log"
fi

# s9's timeline build with the harness's sampling, through bench_attention (its BUILDS hold the defines).
: > "$OUT/s9.log"
for s in ${S9_SAMPLINGS:-1:1 16:1 16:4 16:8}; do
  n=${s%%:*}; m=${s##*:}
  timeout 120 python3 - "$n" "$m" "$OUT/s9_${n}_${m}" >> "$OUT/s9.log" 2>&1 <<'EOF'
import sys
from lapis.gpu import bench_attention as b
n, m, out = sys.argv[1:4]
b.BUILDS["timeline"] = {"LAPIS_TIMELINE": 1, "LAPIS_TIMELINE_CTA_EVERY": int(n), "LAPIS_TIMELINE_ITER_EVERY": int(m)}
print(f"== s9, cta_every {n}, iter_every {m}", flush=True)
prov = ["--provenance", "hdr-provenance.json"] if __import__("os").path.exists("hdr-provenance.json") else []
sys.exit(b.main(["--out", out, "--variants", "s9", "--shapes", "8x16x4096x128", "--repeats", "30", *prov]))
EOF
  echo "s9 $s rc $?" >> "$OUT/s9.log"
done
python3 - "$OUT" <<'EOF' | tee "$OUT/s9_overhead.json"
import json, sys
from pathlib import Path
rows = []
for m in sorted(Path(sys.argv[1]).glob("s9_*/manifest.json")):
    man = json.loads(m.read_text())
    for e in man.get("results", []):
        for name, v in e.get("variants", {}).items():
            rows.append(dict(sampling=m.parent.name, shape=e["shape"], variant=name,
                             plain_us=v["plain"]["median_us"], timeline_us=v["timeline"]["median_us"],
                             overhead_pct=v["instrumentation_overhead_pct"],
                             defines=man.get("builds", {}).get("timeline", {}).get("defines")))
print(json.dumps(rows, indent=1))
EOF
rm -rf "$OUT"/s9_*/timelines.npz
# One manifest with provenance (made here from hdr-provenance.json, written where git is) for the whole call.
python3 - "$OUT" <<'EOF'
import json, sys
from pathlib import Path
from lapis.gpu.capture_tma import provenance
out = Path(sys.argv[1])
git = "hdr-provenance.json" if Path("hdr-provenance.json").exists() else None
man = dict(provenance=provenance(git, [], "bash benchmarks/h200_header.sh"), kind="user_timeline",
           kernel="examples/ws_gemm_timeline.cu", example_log="ws_gemm.log",
           s9_overhead=json.loads((out / "s9_overhead.json").read_text()) if (out / "s9_overhead.json").exists()
           else None)
(out / "manifest.json").write_text(json.dumps(man, indent=1))
print("manifest written")
EOF

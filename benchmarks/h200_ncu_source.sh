#!/usr/bin/env bash
# One device call on the H200 (lapis `run` tool): Nsight Compute's per-unit counters and per-instruction source
# pages with warp-stall samples (lapis.gpu.ncu_units --source) of lapis's s1, s2, s14 and FA4's sm90 forward at
# 8x16x4096x128, into $OUT/ncu/. FA4's wheel parts are copied to /tmp/fa4p by four earlier calls (one part each,
# see h200_steps.sh); this call carries the last as .fa4/p5. About 4 minutes.
# Usage on the device, from the repo root:  KERNELS=s1,s2,s14,fa4 bash benchmarks/h200_ncu_source.sh
# Needs ncu-provenance.json made here first (git ignores *-provenance.json: pass it in the run tool's carry):
#   python -m lapis.captures.provenance $(python -m lapis.gpu.bench_attention --sources) lapis/gpu/ncu_units.py \
#     benchmarks/h200_ncu_source.sh > ncu-provenance.json
set -u
export PYTHONPATH=.
KERNELS=${KERNELS:-s1,s2,s14,fa4}
if [ -d .fa4/p5 ]; then
  mkdir -p /tmp/fa4p && cp .fa4/p5/part.* /tmp/fa4p/
  mkdir -p /tmp/fa4d && cat /tmp/fa4p/part.* | xz -d -T16 | tar -x -C /tmp/fa4d; echo "unpack rc $?"
fi
mkdir -p "$OUT/ncu"
prov=""; [ -f ncu-provenance.json ] && prov="--provenance ncu-provenance.json"
LAPIS_FA4_SITE=/tmp/fa4d/site timeout 500 python3 -m lapis.gpu.ncu_units --out "$OUT/ncu" --kernels "$KERNELS" \
  --source "$KERNELS" $prov > "$OUT/ncu/log.txt" 2>&1
echo "ncu rc $?"; tail -12 "$OUT/ncu/log.txt"

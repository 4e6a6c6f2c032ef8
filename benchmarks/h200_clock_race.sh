#!/usr/bin/env bash
# One device call on the H200 (lapis `run` tool): the race (lapis.gpu.race) with every batch bracketed by two clock
# probes, so each kernel, lapis's or not, gets the SM's mean clock over its batch (clock.bracket_mhz) beside
# lapis's in-kernel probes, which check it:
#   1. KERNELS (default s9,s24,cudnn,flash,fa4) at the five shapes, causal and not;
#   2. cuDNN, FA2 and FA4 at head dims 64 and 256 (the FA4 shapes), non-causal;
#   3. with NCU_SHAPES, Nsight Compute's cycles of cuDNN and FA4 at those shapes (lapis.gpu.ncu_units).
# FA4's wheel parts come first, one per call, into /tmp/fa4p (../shared/tools/fa4-wheels.sh); the last is carried
# here as .fa4/p5. Provenance made here first (untracked, carried):
#   python -m lapis.captures.provenance $(python -m lapis.gpu.bench_attention --sources) lapis/gpu/race.py \
#     lapis/gpu/protocol.py lapis/gpu/ncu_units.py benchmarks/h200_clock_race.sh > tp-provenance.json
# Usage: NCU_SHAPES=8x16x4096x256,8x16x4096x64 bash benchmarks/h200_clock_race.sh
set -u
export PYTHONPATH=.
[ -d .kcache ] && export LAPIS_KERNEL_CACHE=$PWD/.kcache
KERNELS=${KERNELS:-s9,s24,cudnn,flash,fa4}
NCU_SHAPES=${NCU_SHAPES:-}
HD=8x16x4096x64,4x16x8192x64,2x16x16384x64,8x16x4096x256,4x16x8192x256,2x16x16384x256
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
if [ -d .fa4/p5 ]; then
  mkdir -p /tmp/fa4p && cp .fa4/p5/part.* /tmp/fa4p/
  mkdir -p /tmp/fa4d && cat /tmp/fa4p/part.* | xz -d -T16 | tar -x -C /tmp/fa4d; echo "unpack rc $?"
fi
timeout 240 python3 -m lapis.gpu.race --out "$OUT/race" --provenance tp-provenance.json \
  --kernels "$KERNELS" --causal both --fa4-site /tmp/fa4d/site > "$OUT/race.log" 2>&1
echo "race rc $?"
timeout 150 python3 -m lapis.gpu.race --out "$OUT/race-hd" --provenance tp-provenance.json \
  --kernels cudnn,flash,fa4 --causal no --shapes "$HD" --fa4-site /tmp/fa4d/site >> "$OUT/race.log" 2>&1
echo "race-hd rc $?"
for s in $(echo "$NCU_SHAPES" | tr ',' ' '); do
  LAPIS_FA4_SITE=/tmp/fa4d/site timeout 90 python3 -m lapis.gpu.ncu_units --out "$OUT/ncu-$s" \
    --provenance tp-provenance.json --kernels cudnn,fa4 --shape "$s" --timeout 60 >> "$OUT/race.log" 2>&1
  echo "ncu $s rc $?"
  find "$OUT/ncu-$s" -type f ! -name manifest.json -delete
done
find "$OUT" -type f | sort; tail -60 "$OUT/race.log"

#!/usr/bin/env bash
# One device call on the H200 (lapis `run` tool) for the kernels no one here wrote: Nsight Compute per-unit
# counters, FA2's SASS, and the same-process race of lapis's s9 beside cuDNN and FA2.
# Usage on the device, from the repo root, with provenance made here first (untracked, travels with the tree):
#   python -m lapis.captures.provenance $(python -m lapis.gpu.bench_attention --sources) lapis/gpu/race.py \
#     lapis/gpu/protocol.py lapis/gpu/ncu_units.py benchmarks/h200_third_party.sh > tp-provenance.json
#   bash benchmarks/h200_third_party.sh units   # ncu counters of s3, s5, s9, s9 causal, the GEMM, FA2, cuDNN
#   bash benchmarks/h200_third_party.sh race    # the five shapes causal and not, and head dims 64 and 256
#   bash benchmarks/h200_third_party.sh fa4     # race with FA4's sm90 forward too: its wheels' xz parts
#                                               # (../shared/tools/fa4-wheels.sh) copied to /tmp/fa4p by earlier
#                                               # calls (`mkdir -p /tmp/fa4p && cp .fa4/pK/part.* /tmp/fa4p/`),
#                                               # the last part carried in this call as .fa4/p5
# Kernel builds come from LAPIS_KERNEL_CACHE when it holds them (built here for sm_90a, carried as .kcache).
set -u
mode=${1:-units}
export PYTHONPATH=.
[ -d .kcache ] && export LAPIS_KERNEL_CACHE=$PWD/.kcache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
if [ "$mode" = units ]; then
  timeout 540 python3 -m lapis.gpu.ncu_units --out "$OUT/units" --provenance tp-provenance.json --flash-sass \
    --timeout 150 > "$OUT/units.log" 2>&1; echo "units rc $?"; tail -12 "$OUT/units.log"
  gzip -9 "$OUT/units/flash.sass" "$OUT/units/flash_sass_counts.csv" 2>/dev/null
  rm -f "$OUT"/units/*.ncu-rep
elif [ "$mode" = race ]; then
  timeout 560 python3 -m lapis.gpu.race --out "$OUT/race" --provenance tp-provenance.json --kernels s9,cudnn,flash \
    --causal both > "$OUT/race.log" 2>&1; echo "race rc $?"
  timeout 300 python3 -m lapis.gpu.race --out "$OUT/race-hd" --provenance tp-provenance.json --kernels cudnn,flash \
    --causal no --shapes 8x16x4096x64,4x16x8192x64,2x16x16384x64,8x16x4096x256,4x16x8192x256,2x16x16384x256 \
    > "$OUT/race-hd.log" 2>&1; echo "race-hd rc $?"
  tail -40 "$OUT/race.log"; tail -16 "$OUT/race-hd.log"
elif [ "$mode" = fa4 ]; then
  cp .fa4/p5/part.* /tmp/fa4p/ 2>/dev/null; ls -la /tmp/fa4p
  mkdir -p /tmp/fa4d && cat /tmp/fa4p/part.* | xz -d -T16 | tar -x -C /tmp/fa4d; echo "unpack rc $?"
  timeout 420 python3 -m lapis.gpu.race --out "$OUT/race" --provenance tp-provenance.json \
    --kernels ${KERNELS:-s9,cudnn,flash,fa4} --causal both --fa4-site /tmp/fa4d/site > "$OUT/race.log" 2>&1
  echo "race rc $?"
  timeout 150 python3 -m lapis.gpu.race --out "$OUT/race-hd" --provenance tp-provenance.json --kernels cudnn,flash,fa4 \
    --causal no --shapes 8x16x4096x64,4x16x8192x64,2x16x16384x64,8x16x4096x256,4x16x8192x256,2x16x16384x256 \
    --fa4-site /tmp/fa4d/site > "$OUT/race-hd.log" 2>&1; echo "race-hd rc $?"
  tail -45 "$OUT/race.log"; tail -20 "$OUT/race-hd.log"
fi

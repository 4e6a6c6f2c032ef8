#!/usr/bin/env bash
# One device call on the H200 (lapis `run` tool): each SASS instruction class beside wgmma in flight
# (kernels/micro_beside_v1.cu, campaign version 4) and, in the same process, the contend microbenchmark again
# (kernels/micro_mix_softmax_v3.cu), into $OUT/cap/micro/.
# Usage on the device, from the repo root:  bash benchmarks/h200_beside.sh
# Needs beside-provenance.json made here first (untracked, it travels with the tree):
#   python -m lapis.captures.provenance lapis/gpu/kernels/micro_beside_v1.cu lapis/gpu/kernels/micro_mix_softmax_v3.cu \
#     lapis/gpu/kernels/micro_common.cuh lapis/gpu/capture_micro.py lapis/model/micro_campaign.py \
#     benchmarks/h200_beside.sh > beside-provenance.json
# Commit $OUT/cap/micro as lapis/data/captures/micro/<gpu>-<date>-beside/micro/.
set -u
export PYTHONPATH=.
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
prov=""; [ -f beside-provenance.json ] && prov="--provenance beside-provenance.json"
timeout 400 python3 -m lapis.gpu.capture_micro --out "$OUT/cap" --only beside,contend --budget-s 300 $prov \
  > "$OUT/beside.log" 2>&1
echo "beside rc $?"; tail -70 "$OUT/beside.log"

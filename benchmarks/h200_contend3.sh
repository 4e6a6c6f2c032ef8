#!/usr/bin/env bash
# One device call on the H200 (lapis `run` tool): the three-warpgroup contend microbenchmark
# (kernels/micro_mix_softmax_v4.cu, campaign version 6: a softmax tile beside another warpgroup's softmax and a
# third's wgmma), into $OUT/cap/micro/.
# Usage on the device, from the repo root:  bash benchmarks/h200_contend3.sh
# Needs contend3-provenance.json made here first (untracked, it travels with the tree):
#   python -m lapis.captures.provenance lapis/gpu/kernels/micro_mix_softmax_v4.cu lapis/gpu/kernels/micro_common.cuh \
#     lapis/gpu/capture_micro.py lapis/model/micro_campaign.py benchmarks/h200_contend3.sh > contend3-provenance.json
# Commit $OUT/cap/micro as lapis/data/captures/micro/<gpu>-<date>-contend3/micro/.
set -u
export PYTHONPATH=.
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
prov=""; [ -f contend3-provenance.json ] && prov="--provenance contend3-provenance.json"
timeout 300 python3 -m lapis.gpu.capture_micro --out "$OUT/cap" --only contend3 --budget-s 240 $prov \
  > "$OUT/contend3.log" 2>&1
echo "contend3 rc $?"; tail -45 "$OUT/contend3.log"

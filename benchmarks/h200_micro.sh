#!/usr/bin/env bash
# One device call on the H200 (lapis `run` tool): the microbenchmarks whose names start with PREFIX
# (lapis.model.micro_campaign; e.g. contend3: campaign version 6, density: version 7), into $OUT/cap/micro/.
# Usage on the device, from the repo root:  bash benchmarks/h200_micro.sh PREFIX
# Needs PREFIX-provenance.json made here first (git-ignored: name it in the run tool's carry), from the kernels the
# prefix runs, e.g. for density:
#   python -m lapis.captures.provenance lapis/gpu/kernels/micro_beside_v2.cu lapis/gpu/kernels/micro_beside_v1.cu \
#     lapis/gpu/kernels/micro_common.cuh lapis/gpu/capture_micro.py lapis/model/micro_campaign.py \
#     benchmarks/h200_micro.sh > density-provenance.json
# Commit $OUT/cap/micro as lapis/data/captures/micro/<gpu>-<date>-PREFIX/micro/.
set -u
prefix=${1:?usage: bash benchmarks/h200_micro.sh PREFIX}
export PYTHONPATH=.
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
prov=""; [ -f "$prefix-provenance.json" ] && prov="--provenance $prefix-provenance.json"
timeout 300 python3 -m lapis.gpu.capture_micro --out "$OUT/cap" --only "$prefix" --budget-s 240 $prov \
  > "$OUT/$prefix.log" 2>&1
echo "$prefix rc $?"; tail -45 "$OUT/$prefix.log"

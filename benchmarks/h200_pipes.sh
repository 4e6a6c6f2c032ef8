#!/usr/bin/env bash
# One device call on the H200 (lapis `run` tool): capture per-instruction-class SMSP throughput and latency
# (lapis/gpu/capture_pipes.py, kernels lapis/gpu/kernels/micro_pipes.cu) into $OUT/cap/pipes/.
# Usage on the device, from the repo root:  bash benchmarks/h200_pipes.sh
# Needs pipes-provenance.json made here first (untracked, it travels with the tree):
#   python -m lapis.captures.provenance lapis/gpu/kernels/micro_pipes.cu lapis/gpu/kernels/micro_common.cuh \
#     lapis/gpu/capture_pipes.py benchmarks/h200_pipes.sh > pipes-provenance.json
# Commit $OUT/cap as lapis/data/captures/micro/<gpu>-<date>-pipes/; lapis.model.smsp reads it in place of the
# pending constants: python -m lapis.model.smsp --micro --pipes lapis/data/captures/micro/<that>/pipes/results.json
set -u
export PYTHONPATH=.
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
prov=""; [ -f pipes-provenance.json ] && prov="--provenance pipes-provenance.json"
timeout 500 python3 -m lapis.gpu.capture_pipes --out "$OUT/cap" $prov > "$OUT/pipes.log" 2>&1
echo "pipes rc $?"; tail -80 "$OUT/pipes.log"

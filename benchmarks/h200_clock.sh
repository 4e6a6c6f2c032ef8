#!/usr/bin/env bash
# One device call on the H200 (lapis `run` tool): the SM clock under the 700 W limit with the tensor and FMA
# pipes held at set duties (lapis/gpu/capture_clock.py, kernel lapis/gpu/kernels/micro_clock.cu) into
# $OUT/clock/clock/. About 30 s of GPU time (13 points x 2 runs x 0.5 s, a 1 s warm-up, nvcc, nvidia-smi).
# Usage on the device, from the repo root:  bash benchmarks/h200_clock.sh
# Needs clock-provenance.json made here first (git ignores *-provenance.json: pass it in the run tool's carry):
#   python -m lapis.captures.provenance lapis/gpu/kernels/micro_clock.cu lapis/gpu/kernels/micro_common.cuh \
#     lapis/gpu/bench_gemm.py \
#     lapis/gpu/capture_clock.py benchmarks/h200_clock.sh > clock-provenance.json
# Commit $OUT/clock as lapis/data/captures/clock/<gpu>-<date>/ (holding clock/{manifest,results}.json);
# lapis.model.clock reads the newest one: python -m lapis.model.clock prints its fit.
set -u
export PYTHONPATH=.
mkdir -p "$OUT/clock"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
prov=""; [ -f clock-provenance.json ] && prov="--provenance clock-provenance.json"
timeout 120 python3 -m lapis.gpu.capture_clock --out "$OUT/clock" $prov > "$OUT/clock/clock.log" 2>&1
echo "clock rc $?"; tail -40 "$OUT/clock/clock.log"
python3 -m lapis.model.clock "$OUT/clock/clock/results.json" 2>&1 | tail -20

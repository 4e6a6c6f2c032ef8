#!/usr/bin/env bash
# One device call on the H200 (lapis `run` tool): the SM clock under the 700 W limit with the HBM streamed at set
# duties, alone and beside the tensor and FMA pipes (lapis/gpu/capture_clock_dram.py, kernel
# lapis/gpu/kernels/micro_clock_dram_v1.cu) into $OUT/clock-dram/clock/. About 30 s of GPU time (12 points x 2 runs
# x 0.5 s, a 1 s warm-up, nvcc, nvidia-smi).
# Usage on the device, from the repo root:  bash benchmarks/h200_clock_dram.sh
# Needs clock-provenance.json made here first (git ignores *-provenance.json: pass it in the run tool's carry):
#   python -m lapis.captures.provenance lapis/gpu/kernels/micro_clock_dram_v1.cu lapis/gpu/kernels/micro_common.cuh \
#     lapis/gpu/bench_gemm.py lapis/gpu/capture_clock.py lapis/gpu/capture_clock_dram.py \
#     benchmarks/h200_clock_dram.sh > clock-provenance.json
# Commit $OUT/clock-dram/clock/{manifest,results}.json as lapis/data/captures/diagnostic/<gpu>-<date>-clock-dram/
# (lapis.model.clock does not read it).
set -u
export PYTHONPATH=.
mkdir -p "$OUT/clock-dram"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
prov=""; [ -f clock-provenance.json ] && prov="--provenance clock-provenance.json"
timeout 150 python3 -m lapis.gpu.capture_clock_dram --out "$OUT/clock-dram" $prov > "$OUT/clock-dram/clock.log" 2>&1
echo "clock-dram rc $?"; tail -40 "$OUT/clock-dram/clock.log"

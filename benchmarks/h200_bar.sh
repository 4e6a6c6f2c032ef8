#!/usr/bin/env bash
# One device call on the H200 (lapis `run` tool): the named-barrier GEMM-turn hand-over of the ping-pong attention
# kernels, bar.sync with its arrivals together or already there, and mbarrier.try_wait on a complete phase
# (kernels/micro_bar_v1.cu, campaign version 5, items bar.*), into $OUT/micro/ (manifest.json with the provenance,
# results.json), the log and the cubin's SASS beside it. Needs the image's python3, numpy, cupy and nvcc only.
# Usage on the device, from the repo root:  bash benchmarks/h200_bar.sh
# Needs bar-provenance.json made here first (git ignores *-provenance.json: pass it in the run tool's carry):
#   python -m lapis.captures.provenance lapis/gpu/kernels/micro_bar_v1.cu lapis/gpu/kernels/micro_common.cuh \
#     lapis/gpu/kernels/sm90.cuh lapis/gpu/capture_micro.py lapis/model/micro_campaign.py \
#     benchmarks/h200_bar.sh > bar-provenance.json
# Commit $OUT/micro as lapis/data/captures/micro/<gpu>-<date>-bar/micro/.
set -u
export PYTHONPATH=.
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
prov=""; [ -f bar-provenance.json ] && prov="--provenance bar-provenance.json" || echo "no bar-provenance.json"
timeout 300 python3 -m lapis.gpu.capture_micro --out "$OUT" --only bar --budget-s 200 $prov > "$OUT/bar.log" 2>&1
echo "bar rc $?"; tail -30 "$OUT/bar.log"
# the SASS the capture ran (the pred and reg forms are ptxas's choice: check for the predicated BAR.SYNC pair and
# the BAR.SYNC on a register)
sass="$(python3 -c 'import shutil; print(shutil.which("cuobjdump") or "")')"
if [ -n "$sass" ]; then
  nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -o "$OUT/micro_bar_v1.cubin" \
    lapis/gpu/kernels/micro_bar_v1.cu && "$sass" -sass "$OUT/micro_bar_v1.cubin" > "$OUT/micro_bar_v1.sass"
  grep -c "BAR\." "$OUT/micro_bar_v1.sass"
fi

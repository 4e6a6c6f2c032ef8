#!/usr/bin/env bash
# One device call on the H200 (lapis `run` tool) for the attention steps past s9 (s10 .. s18 of
# lapis/catalog/attention.py, each predicted blind first in lapis/data/blind/attention_h200_sN.json):
#   1. the race in one process: s9, STEPS, cuDNN and FA4's sm90 forward at the five shapes, causal and not
#      (lapis.gpu.race; FA4's wheel parts copied to /tmp/fa4p by earlier calls, the last carried here as .fa4/p5);
#   2. correctness on normal and heavy-tailed inputs against float64 (lapis.gpu.bench_attention --check-only) at
#      8x16x4096x128 and 32x16x1024x128, causal and not;
#   3. compute-sanitizer memcheck, racecheck and synccheck on each step, causal and not (lapis.gpu.sanitize_attention);
#   4. with NCU_KERNELS, Nsight Compute's per-unit counters and warp-stall reasons at 8x16x4096x128 (lapis.gpu.ncu_units).
# Provenance made here first (untracked, carried):
#   python -m lapis.captures.provenance $(python -m lapis.gpu.bench_attention --sources) lapis/gpu/race.py \
#     lapis/gpu/protocol.py lapis/gpu/sanitize_attention.py benchmarks/h200_steps.sh > tp-provenance.json
# Usage: STEPS=s10,s11,s12,s13 NEW=s13 NCU_KERNELS=s12,s13,cudnn,fa4 bash benchmarks/h200_steps.sh
#        STEPS=s13,s14 NEW=s14 NCU_KERNELS=s13,s14 bash benchmarks/h200_steps.sh   (s14: s13 + descriptor increments)
#        STEPS=s15,s16 NEW=s16 NCU_KERNELS=s15,s16 bash benchmarks/h200_steps.sh   (s16: s15 + early pack)
#        STEPS=s16,s17 NEW=s17 NCU_KERNELS=s16,s17 bash benchmarks/h200_steps.sh   (s17: s16 + one turn bar.sync)
#        STEPS=s17,s18 NEW=s18 NCU_KERNELS=s17,s18 bash benchmarks/h200_steps.sh   (s18: s17 + hoisted mbarrier addresses)
#        STEPS=s19,s20,s21 NEW=s21 NCU_KERNELS=s20,s21 bash benchmarks/h200_steps.sh   (s21: s20 + sleeping producer waits)
#        STEPS=s25,s26 NEW=s26 NCU_KERNELS=s26 SPLIT_SHAPE=1x17x1024x128 bash benchmarks/h200_steps.sh   (s26: split tail)
# Kernel builds come from .kcache (built here for sm_90a, carried) when it holds them.
set -u
export PYTHONPATH=.
[ -d .kcache ] && export LAPIS_KERNEL_CACHE=$PWD/.kcache
STEPS=${STEPS:-s10,s11,s12}   # raced beside s9, cuDNN and FA4
NEW=${NEW:-$STEPS}            # checked and sanitized
NCU_KERNELS=${NCU_KERNELS:-}  # e.g. s12,s13,cudnn,fa4: Nsight Compute per-unit counters and stall reasons
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
if [ -d .fa4/p5 ]; then
  mkdir -p /tmp/fa4p && cp .fa4/p5/part.* /tmp/fa4p/
  mkdir -p /tmp/fa4d && cat /tmp/fa4p/part.* | xz -d -T16 | tar -x -C /tmp/fa4d; echo "unpack rc $?"
fi
timeout 200 python3 -m lapis.gpu.race --out "$OUT/race" --provenance tp-provenance.json \
  --kernels "s9,$STEPS,cudnn,fa4" --causal both --fa4-site /tmp/fa4d/site > "$OUT/race.txt" 2>&1
echo "race rc $?"
for c in "" "--causal"; do
  timeout 60 python3 -m lapis.gpu.bench_attention --out "$OUT/check${c:+-causal}" --provenance tp-provenance.json \
    --variants "$NEW" --shapes 8x16x4096x128,32x16x1024x128 --check-only $c >> "$OUT/steps.log" 2>&1
  echo "check$c rc $?"
done
sv=$(echo "$NEW" | tr ',' '\n' | sed 's/.*/&,&:causal/' | paste -sd,)
timeout 90 python3 -m lapis.gpu.sanitize_attention --out "$OUT/sanitizer" --provenance tp-provenance.json \
  --variants "$sv" >> "$OUT/steps.log" 2>&1
echo "sanitizer rc $?"
if [ -n "${SPLIT_SHAPE:-}" ]; then  # s26+: a shape whose items leave a tail to split (1x17x1024x128: 136 items)
  timeout 90 python3 -m lapis.gpu.sanitize_attention --out "$OUT/sanitizer-split" --provenance tp-provenance.json \
    --variants "$NEW" --shape "$SPLIT_SHAPE" >> "$OUT/steps.log" 2>&1
  echo "sanitizer split rc $?"
  find "$OUT/sanitizer-split" -type f ! -name sanitizer.json -delete  # its verdicts are in sanitizer.json
fi
if [ -n "$NCU_KERNELS" ]; then
  LAPIS_FA4_SITE=/tmp/fa4d/site timeout 150 python3 -m lapis.gpu.ncu_units --out "$OUT/ncu" \
    --provenance tp-provenance.json --kernels "$NCU_KERNELS" --timeout 60 >> "$OUT/steps.log" 2>&1
  echo "ncu rc $?"
  find "$OUT/ncu" -type f ! -name manifest.json -delete
fi
cat "$OUT/race.txt" >> "$OUT/steps.log"; rm -f "$OUT/race.txt"   # one log: at most 8 files come back
find "$OUT" -type f | sort; tail -48 "$OUT/steps.log"

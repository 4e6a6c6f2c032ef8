#!/usr/bin/env bash
# One device call on the H200 (lapis `run` tool): capture the microbenchmarks, then check (or time) the GEMM.
# Usage on the device, from the repo root:
#   bash benchmarks/h200_session.sh check|time|ablate|attn-check|attn-time|attn2-check|attn2-time|vcheck V|vtime V
# Needs micro-provenance.json and gemm-provenance.json made here first (untracked, they travel with the tree):
#   python -m lapis.captures.provenance > micro-provenance.json
#   python -m lapis.captures.provenance $(python -m lapis.gpu.bench_gemm --sources) > gemm-provenance.json
# `check` runs no timing of lapis kernels: predictions are committed between `check` and `time`.
set -u
mode=${1:-check}
export PYTHONPATH=.
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
if [ "$mode" = check ]; then
  timeout 240 python3 -m lapis.gpu.capture_micro --out "$OUT/cap" --provenance micro-provenance.json \
    > "$OUT/micro.log" 2>&1; echo "micro rc $?"; tail -40 "$OUT/micro.log"
  timeout 280 python3 -m lapis.gpu.bench_gemm --out "$OUT/gemm" --provenance gemm-provenance.json --check-only \
    > "$OUT/gemm.log" 2>&1; echo "gemm check rc $?"; tail -25 "$OUT/gemm.log"
elif [ "$mode" = ablate ]; then
  timeout 280 python3 -m lapis.gpu.ablate_gemm --out "$OUT/ablate" --provenance gemm-provenance.json \
    > "$OUT/ablate.log" 2>&1; echo "ablate rc $?"; tail -16 "$OUT/ablate.log"
  timeout 250 python3 -m lapis.gpu.bench_gemm --out "$OUT/gemm256" --provenance gemm-provenance.json \
    --variants ws_s4_c2_n256 --sizes 4096,8192 --no-demo > "$OUT/gemm256.log" 2>&1; echo "n256 rc $?"
  tail -6 "$OUT/gemm256.log"
elif [ "$mode" = time ]; then
  timeout 400 python3 -m lapis.gpu.bench_gemm --out "$OUT/gemm" --provenance gemm-provenance.json \
    > "$OUT/gemm.log" 2>&1; echo "gemm time rc $?"; tail -30 "$OUT/gemm.log"
fi
# Attention: bash benchmarks/h200_session.sh attn-check|attn-time
# Needs attn-provenance.json made here first:
#   python -m lapis.captures.provenance $(python -m lapis.gpu.bench_attention --sources) > attn-provenance.json
# attn-check builds, checks correctness at the small shape and all five shapes (no timing) and runs the sanitizer;
# the blind predictions (lapis/data/blind/attention_h200.json) are committed before attn-time.
if [ "$mode" = attn-check ]; then
  timeout 240 python3 -m lapis.gpu.bench_attention --out "$OUT/attn" --provenance attn-provenance.json --check-only \
    --variants s1,s2 \
    > "$OUT/attn.log" 2>&1; echo "attn check rc $?"; tail -14 "$OUT/attn.log"
  timeout 280 python3 -m lapis.gpu.sanitize_attention --out "$OUT/sanitize" --variants s1,s2 --provenance attn-provenance.json > "$OUT/sanitize.log" 2>&1
  echo "sanitize rc $?"; tail -12 "$OUT/sanitize.log"
elif [ "$mode" = attn-time ]; then
  timeout 280 python3 -m lapis.gpu.bench_attention --out "$OUT/attn" --provenance attn-provenance.json --variants s1,s2 \
    > "$OUT/attn.log" 2>&1; echo "attn time rc $?"; tail -32 "$OUT/attn.log"
fi
# Attention, s3 and s4: bash benchmarks/h200_session.sh attn2-check|attn2-time runs only s3 and s4 (the
# variants bench_attention has of them), with the same attn-provenance.json. attn2-check: correctness at the small
# shape and the five shapes, no timing, and the sanitizer on them (planted race on s3); the blind predictions
# (lapis/data/blind/attention_h200_s3s4.json: s3, attention_h200_s4.json: s4) are committed before attn2-time.
if [ "$mode" = attn2-check ] || [ "$mode" = attn2-time ]; then
  v2=$(python3 -c "from lapis.gpu.bench_attention import VARIANTS; print(','.join(v for v in ('s3', 's4') if v in VARIANTS))")
  echo "variants $v2"
fi
if [ "$mode" = attn2-check ]; then
  timeout 240 python3 -m lapis.gpu.bench_attention --out "$OUT/attn2" --provenance attn-provenance.json \
    --variants "$v2" --check-only > "$OUT/attn2.log" 2>&1; echo "attn2 check rc $?"; tail -14 "$OUT/attn2.log"
  timeout 280 python3 -m lapis.gpu.sanitize_attention --out "$OUT/sanitize2" --variants "$v2" --provenance attn-provenance.json \
    > "$OUT/sanitize2.log" 2>&1; echo "sanitize2 rc $?"; tail -12 "$OUT/sanitize2.log"
elif [ "$mode" = attn2-time ]; then
  timeout 280 python3 -m lapis.gpu.bench_attention --out "$OUT/attn2" --provenance attn-provenance.json \
    --variants "$v2" > "$OUT/attn2.log" 2>&1; echo "attn2 time rc $?"; tail -32 "$OUT/attn2.log"
fi
# Any attention variants: bash benchmarks/h200_session.sh vcheck|vtime VARIANTS [causal], e.g. vcheck s5
# then vtime s3,s4,s5 (earlier variants timed again in the same run, for same-run ratios); `causal` runs the causal
# builds (bench --causal, sanitizer NAME:causal). vcheck: correctness at the small shape and all five, timelines,
# and the sanitizer; no timing. The variants' blind predictions (lapis/data/blind/*.json) are committed between vcheck
# and vtime. Needs attn-provenance.json as above.
if [ "$mode" = vcheck ] || [ "$mode" = vtime ]; then
  causal=(); svar="$2"
  if [ "${3:-}" = causal ]; then causal=(--causal); svar=$(echo "$2" | sed 's/\([^,]*\)/\1:causal/g'); fi
fi
if [ "$mode" = vcheck ]; then
  timeout 250 python3 -m lapis.gpu.bench_attention --out "$OUT/attn" --provenance attn-provenance.json \
    --variants "$2" "${causal[@]}" --check-only > "$OUT/attn.log" 2>&1; echo "check rc $?"; tail -14 "$OUT/attn.log"
  timeout 280 python3 -m lapis.gpu.sanitize_attention --out "$OUT/sanitize" --variants "$svar" \
    --provenance attn-provenance.json > "$OUT/sanitize.log" 2>&1; echo "sanitize rc $?"; tail -8 "$OUT/sanitize.log"
elif [ "$mode" = vtime ]; then
  timeout 560 python3 -m lapis.gpu.bench_attention --out "$OUT/attn" --provenance attn-provenance.json \
    --variants "$2" "${causal[@]}" > "$OUT/attn.log" 2>&1; echo "time rc $?"; tail -40 "$OUT/attn.log"
fi

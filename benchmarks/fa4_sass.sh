#!/usr/bin/env bash
# FA4's sm90 attention forward SASS, compiled on this CPU-only machine (lapis/captures/fa4_sass.py): the capture
# lapis/data/captures/sass/fa4-sm90-2026-12-03. No GPU: FA4's CuTe DSL compiles the kernel under torch's
# FakeTensorMode and keeps the cubin; cuobjdump lists it. About a minute per case.
# Usage, from the repo root, on a clean tree (the manifest records the commit and this file's blob):
#   bash benchmarks/fa4_sass.sh OUT
# One-time setup (Python 3.12: the FA4 wheels' CuTe DSL libraries need it; torch's cu130 wheel imports without a GPU):
#   /root/.pyenv/versions/3.12.1/bin/python3.12 -m venv /tmp/fa4venv
#   /tmp/fa4venv/bin/pip install torch==2.11.0 "setuptools<82" einops
#   /tmp/fa4venv/bin/pip download --no-deps -d /tmp/fa4whl flash-attn-4==4.0.0b36 nvidia-cutlass-dsl==4.8.1 \
#     nvidia-cutlass-dsl-libs-base==4.8.1 nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu13==4.8.1 \
#     quack-kernels==0.6.5 apache-tvm-ffi==0.1.15.post2 torch-c-dlpack-ext==0.1.5
#   for w in /tmp/fa4whl/*.whl; do /tmp/fa4venv/bin/python -m zipfile -e "$w" /tmp/fa4d/site; done
set -eu
out=${1:?usage: bash benchmarks/fa4_sass.sh OUT}
export PATH=$PATH:/work/venv/lib/python3.11/site-packages/nvidia/cu13/bin  # cuobjdump
PYTHONPATH=$PWD /work/venv/bin/python -m lapis.captures.fa4_sass --out "$out" \
  --python /tmp/fa4venv/bin/python --site /tmp/fa4d/site

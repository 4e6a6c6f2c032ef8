#!/usr/bin/env bash
# One device call on the H200 (lapis `run` tool): FA2's forward kernels' SASS from the installed torch's library
# (lapis/gpu/capture_fa2_sass.py) into $OUT/fa2/fa2_sass/: the library the timed FA2 runs executed (committed as
# lapis/data/captures/sass/fa2-h200-2026-12-02, which lapis.model.warp_loop reads). About 40 s, no GPU
# work (cuobjdump only).
# Usage on the device, from the repo root:  bash benchmarks/h200_fa2_sass.sh
# Needs fa2-provenance.json made here first (git ignores *-provenance.json: pass it in the run tool's carry):
#   python -m lapis.captures.provenance lapis/gpu/capture_fa2_sass.py benchmarks/h200_fa2_sass.sh > fa2-provenance.json
set -u
export PYTHONPATH=.
mkdir -p "$OUT/fa2"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
prov=""; [ -f fa2-provenance.json ] && prov="--provenance fa2-provenance.json"
timeout 300 python3 -m lapis.gpu.capture_fa2_sass --out "$OUT/fa2" $prov > "$OUT/fa2/log.txt" 2>&1
echo "fa2 sass rc $?"; tail -5 "$OUT/fa2/log.txt"
sha256sum "$OUT"/fa2/fa2_sass/*.gz

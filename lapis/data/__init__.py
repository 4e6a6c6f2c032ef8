"""Where lapis's shipped data lives: captures, blind predictions, the prediction cache, profiles, fit manifest.

Code reads these paths from here and nowhere else, so data moves by editing one module.
- CAPTURES: one folder per capture kind (`tma`, `wgmma`, `attention`, ...), one sub-folder per capture run.
- BLIND: predictions committed before the run that measures them, one JSON per set.
- PREDICTIONS: the cache of current schedule predictions, gzipped JSON (lapis.pipeline_sim.predictions).
- PROFILES: one hardware profile per GPU (lapis.model.profile).
- FIT_MANIFEST: which capture files each fitted profile reads (lapis.model.fit).
- INDEX: the current capture of each kind and kernel (lapis.captures.index).
- CAPTURE_CHECKSUMS: the SHA-256 of each shipped capture's capture.json (lapis.captures.safe checks them).
- SEEDS: the seed write-ups' own measured tables, each naming its source (lapis.validate.seeds).
"""

from pathlib import Path

DATA = Path(__file__).resolve().parent
CAPTURES = DATA / "captures"
BLIND = DATA / "blind"
PREDICTIONS = DATA / "predictions.json.gz"
PROFILES = DATA / "profiles"
FIT_MANIFEST = DATA / "fit_manifest.json"
INDEX = DATA / "index.json"
CAPTURE_CHECKSUMS = DATA / "capture_checksums.json"
SEEDS = DATA / "seeds"

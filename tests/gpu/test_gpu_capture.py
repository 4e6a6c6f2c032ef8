"""On a Hopper GPU: a fresh capture of a few foundation boxes agrees with the model.

Skips with a reason on machines without an NVIDIA GPU (compute capability 9.0+) and cupy.
"""

import shutil

import pytest


def _gpu_reason():
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() and int(cupy.cuda.Device(0).compute_capability) >= 90:
            return None if shutil.which("nvcc") else "nvcc not on PATH"
    except Exception as exc:  # no cupy, no driver, no device
        return f"no usable GPU: {exc.__class__.__name__}"
    return "no GPU with compute capability 9.0+"


@pytest.mark.gpu
@pytest.mark.nvcc
@pytest.mark.skipif(_gpu_reason() is not None, reason=str(_gpu_reason()))
def test_fresh_capture_matches_model(tmp_path):
    import json

    import numpy as np

    from lapis.gpu import capture_tma
    from lapis.validate.layouts import check_dump

    capture_tma.main(["--out", str(tmp_path), "--what", "dumps", "--tags", "multi-box"])
    man = json.loads((tmp_path / "tma" / "manifest.json").read_text())
    with np.load(tmp_path / "tma" / "dumps.npz") as z:
        dumps = {k: z[k] for k in z.files}
    verdicts = [check_dump(c, dumps).verdict for c in man["configs"]]
    assert verdicts and set(verdicts) == {"match"}

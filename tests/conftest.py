import os

import pytest
from hypothesis import HealthCheck, settings

# CI keeps the suite well under its 5-minute budget; `HYPOTHESIS_PROFILE=dev` digs deeper.
settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def profiles_of_56d4f41(tmp_path, monkeypatch):
    """The profiles with h200 as of commit 56d4f41 (tests/data), so pinned predictions outlive a re-fit."""
    import shutil
    from pathlib import Path

    from lapis.model import profile
    for f in profile.PROFILES.glob("*.json"):
        shutil.copy(f, tmp_path / f.name)
    shutil.copy(Path(__file__).parent / "data" / "h200_profile_56d4f41.json", tmp_path / "h200.json")
    monkeypatch.setattr(profile, "PROFILES", tmp_path)


@pytest.fixture(scope="session")
def kernel_cache():
    """A folder for lapis.gpu.harness.build's cubins that outlives the session: builds are keyed by the hash of
    the source, its local headers, the defines and nvcc's version, so a run rebuilds only what changed."""
    import getpass
    import tempfile
    from pathlib import Path
    path = Path(tempfile.gettempdir()) / f"lapis-test-kernels-{getpass.getuser()}"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture(scope="session")
def report_run(tmp_path_factory):
    """(out folder, --json numbers) of one `lapis report` over the shipped captures, shared by the tests that read
    it: the report takes minutes, so the suite runs it once."""
    import json
    import subprocess
    import sys
    from pathlib import Path
    out = tmp_path_factory.mktemp("report")
    r = subprocess.run([sys.executable, "-m", "lapis.cli", "report", "--json", "--out", str(out)],
                       capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    assert r.returncode == 0, r.stderr[-2000:]
    return out, json.loads(r.stdout)

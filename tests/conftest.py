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

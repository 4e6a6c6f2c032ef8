import os

from hypothesis import HealthCheck, settings

# CI keeps the suite well under its 5-minute budget; `HYPOTHESIS_PROFILE=dev` digs deeper.
settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

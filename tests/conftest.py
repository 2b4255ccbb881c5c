"""Hypothesis profiles: `ci` (default, quick) and `thorough` (HYPOTHESIS_PROFILE=thorough, local runs)."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

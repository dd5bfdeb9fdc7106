"""Shared pytest configuration for the dsh-trio test suite.

Hypothesis profiles: ``ci`` (fast, selected when the ``CI`` environment variable is set) and
``dev`` (the default, more examples). ``HYPOTHESIS_PROFILE`` overrides the choice.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=25,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=100, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

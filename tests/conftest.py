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

# dsh_sched fuzzing (S-037, tests/test_sched_fuzz.py): one generated batch per example.
# At least 2000 batches in the ci profile; DSH_FUZZ_NIGHTLY=1 runs 100000.
_sched_profile = os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev")
settings.register_profile(
    "sched-fuzz",
    settings.get_profile(_sched_profile),
    max_examples=(
        100_000
        if os.environ.get("DSH_FUZZ_NIGHTLY") == "1"
        else 2_000
        if _sched_profile == "ci"
        else 500
    ),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

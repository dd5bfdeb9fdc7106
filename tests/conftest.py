"""Shared pytest configuration for the dsh-trio test suite.

Hypothesis profiles: ``ci`` (fast, selected when the ``CI`` environment variable is set) and
``dev`` (the default, more examples). ``HYPOTHESIS_PROFILE`` overrides the choice.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from pathlib import Path

# A CI runner may start the suite as a background job, with SIGINT ignored; Python then keeps
# it ignored, and so do the processes the tests start. The tests that deliver a real Ctrl-C
# (the KI sweep, the asyncio bridge, the examples) need Python's default handler, which turns
# SIGINT into KeyboardInterrupt and which trio and asyncio replace while they run.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

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


@pytest.fixture(scope="session")
def wasi_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One compiled-module cache folder for the whole test session (pass it as
    ``WasiCodeRuntime(cache_dir=...)``).

    Compiling the CPython WASI module costs about 20 s of CPU; with one shared folder the
    suite compiles it once per run, and every later runtime loads the cached file.
    """
    return tmp_path_factory.mktemp("wasi-cache")

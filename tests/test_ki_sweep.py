"""Ctrl-C anywhere: SIGINT through trio's real handler at every line of the library while a
batch or an ``execute()`` runs (see ``tests/ki_sweep.py`` for how, and why in a child
process). Every landing point must end with a bare ``KeyboardInterrupt`` out of
``trio.run``, and every call with an ``on_call`` must get exactly one ``on_result``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests import ki_sweep

ROOT = Path(__file__).resolve().parent.parent


def test_sigint_at_every_line_of_the_library() -> None:
    """The whole sweep of every scenario, one child process each, run side by side: every
    line event of the library's frames is a landing point (``DSH_KI_STRIDE=N`` tries every
    N-th one instead, for a quick look)."""
    stride = os.environ.get("DSH_KI_STRIDE", "1")
    children = {
        scenario: subprocess.Popen(
            [sys.executable, "-m", "tests.ki_sweep", "--scenario", scenario, "--stride", stride],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for scenario in sorted(ki_sweep.SCENARIOS)
    }
    reports = {}
    failures = []
    for scenario, child in children.items():
        out, err = child.communicate(timeout=280)
        if child.returncode != 0:
            failures.append(f"{scenario}: {err.decode('utf-8', 'replace')[-2000:]}")
            continue
        [reports[scenario]] = json.loads(out)
    assert failures == []
    for scenario, report in reports.items():
        assert report["scenario"] == scenario
        # Hundreds of landing points at least: the trace function did reach the library.
        assert report["points"] > 500 // int(stride)
        assert report["problems"] == []


def test_a_landing_point_past_the_run_raises_nothing() -> None:
    """The sweep's end: past the last line event the run completes with no signal and no
    problem (so the sweep knows it has covered every point)."""
    fired, problems = ki_sweep.run_point("execute", 10**9)
    assert (fired, problems) == (False, [])


def test_the_checker_sees_a_swallowed_interrupt_and_a_lost_result() -> None:
    """The sweep's checks can fail: a run that raised nothing after the signal, and a call
    with an ``on_call`` but no ``on_result``."""
    seen = ki_sweep._Seen()
    from dsh_sched import CallStarted, ModelToolCall

    seen.sink.on_call(
        CallStarted(
            batch=1,
            index=0,
            call=ModelToolCall(call_id="c0", name="r", arguments=""),
            mode=None,
            token=None,
            synthetic=False,
        )
    )
    problems = ki_sweep._check(seen, None, fired=True)
    assert problems == [
        "trio.run raised None, not a bare KeyboardInterrupt",
        "call 0: 1 on_call, 0 on_result",
    ]

"""S-037: Hypothesis fuzzing of whole batches, checked against the trace invariants.

Each example generates a tool set (parallel, exclusive, raising and argument-dependent
classifiers; instant, sleeping, raising, cancellation-swallowing, self-shielding,
abort-firing and interrupting bodies), hooks (deny, ask, raise, sleep, block, registry
changes in pre/post/observers), a batch, ``max_parallel``, abort and cancel moments, a
failing sink event and an ``open_batch`` block that may iterate or raise, then runs it under
``MockClock(autojump_threshold=0)`` and checks I1, I2, I4–I12 and the exception rules.
The ``sched-fuzz`` profile (tests/conftest.py) sets the number of batches.
"""

from __future__ import annotations

import itertools
import sys
from typing import TYPE_CHECKING

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings

import dsh_sched.testing
from dsh_sched.testing import (
    FuzzInterrupt,
    Scenario,
    ScenarioRun,
    SinkFailure,
    TraceRecorder,
    check_scenario_run,
    run_checked,
    run_scenario,
    scenarios,
)
from dsh_tools import Abort, CallNext, PreDecision, ToolExecution, ToolRuntime
from tests.test_sched_fixtures import calls, gated_tool

if TYPE_CHECKING:
    from collections.abc import Callable


@settings(settings.get_profile("sched-fuzz"))
@given(scenarios())
def test_s037_fuzzed_batches_satisfy_the_trace_invariants(scenario: Scenario) -> None:
    # run_scenario raises AssertionError listing every violated invariant.
    run = trio.run(run_scenario, scenario, clock=trio.testing.MockClock(autojump_threshold=0))
    # An outcome exactly when the batch finished; otherwise something was raised (the
    # block's error may hide an internal failure that came after it, which is logged).
    if run.outcome is not None:
        assert run.failure is None
        assert run.interrupted is None
        assert not run.cancelled
    else:
        assert run.failure or run.interrupted or run.cancelled or run.block_error


# -- the harness itself must be able to fail ----------------------------------------------


def run_with_classifier(classifier: Callable[[object], object]) -> None:
    runtime = ToolRuntime()
    recorder = TraceRecorder(runtime)
    runtime.register(recorder.instrument(gated_tool("t", parallel=classifier, steps=[])))

    async def main() -> None:
        await run_checked(runtime, recorder, calls("t:c1", "t:c2"), max_parallel=2)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_monitor_reports_a_mode_that_changed_without_a_checkpoint() -> None:
    flips = itertools.cycle([True, False])

    def fickle(arguments: object) -> bool:
        return next(flips)

    with pytest.raises(AssertionError, match="started as ExecutionMode"):
        run_with_classifier(fickle)


def test_monitor_reports_a_start_after_the_abort() -> None:
    # A classifier is user code between the abort check and the start: if it fires the
    # batch Abort itself, the start that follows is reported.
    holder: list[Abort] = []

    runtime = ToolRuntime()
    recorder = TraceRecorder(runtime)

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        holder.append(execution.abort)
        return await call_next()

    def abort_then_parallel(arguments: object) -> bool:
        if holder:
            holder[0].abort("from a classifier")
        return True

    runtime.on_pre_execute(pre)
    runtime.register(recorder.instrument(gated_tool("t", parallel=abort_then_parallel, steps=[])))

    async def main() -> None:
        await run_checked(runtime, recorder, calls("t:c1", "t:c2"), max_parallel=2)

    with pytest.raises(AssertionError, match="call 1 started after the abort fired"):
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_check_scenario_run_reports_outcome_and_iteration_mismatches() -> None:
    runtime = ToolRuntime()
    recorder = TraceRecorder(runtime)
    runtime.register(recorder.instrument(gated_tool("t", parallel=True, steps=[])))

    async def main() -> ScenarioRun:
        return await run_checked(
            runtime, recorder, calls("t:c1"), max_parallel=1, iterate=True, check=False
        )

    run = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    check_scenario_run(run)
    broken = attrs.evolve(run, iterated=(), cancelled=True, failure=None)
    with pytest.raises(AssertionError) as info:
        check_scenario_run(broken)
    assert "an outcome was set although the batch did not finish" in str(info.value)
    assert "iteration yielded [], committed [0]" in str(info.value)
    both = attrs.evolve(run, outcome=None, failure=SinkFailure("x"), interrupted=FuzzInterrupt())
    with pytest.raises(AssertionError, match="both an internal failure and an interruption"):
        check_scenario_run(both, failure=None)


def test_strategies_need_hypothesis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "dsh_sched._strategies")
    monkeypatch.setitem(sys.modules, "hypothesis", None)
    with pytest.raises(ImportError, match="needs hypothesis: pip install hypothesis"):
        dsh_sched.testing.scenarios  # noqa: B018

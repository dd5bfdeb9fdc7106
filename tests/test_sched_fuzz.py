"""S-037: Hypothesis fuzzing of whole batches, checked against the trace invariants.

Each example generates a tool set (parallel, exclusive, raising and argument-dependent
classifiers; instant, sleeping, raising, cancellation-swallowing, self-shielding,
abort-firing and interrupting bodies), hooks (deny, ask, raise, sleep, block, registry
changes in pre/post/observers), a batch, ``max_parallel``, abort and cancel moments, a
failing sink event and an ``open_batch`` block that may iterate or raise, then runs it under
``MockClock(autojump_threshold=0)`` and checks I1, I2, I4–I12 and the exception rules.
The ``sched-fuzz`` profile (tests/conftest.py) sets the number of batches.

§14 also says that every such run is deterministic: trio runs the tasks that become ready
together in a random order, so the kit keeps its waits apart (the timing model in
``dsh_sched._fuzz_scenario``), and each example is run several times and compared: all of
a finished batch, and of a batch that something ended early, everything before the instant
it ended (at that instant, the ready tasks race with the exception: ``ended_early_cut``).
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
from hypothesis import strategies as st

import dsh_sched.testing
from dsh_sched import CallCommitted, CallStarted, CommittedCall, ContextAccepted, ModelToolCall
from dsh_sched.testing import (
    FuzzInterrupt,
    HookSpec,
    Scenario,
    ScenarioRun,
    SinkFailure,
    ToolSpec,
    TraceRecorder,
    build_runtime,
    check_scenario_run,
    moments,
    run_checked,
    run_scenario,
    scenarios,
)
from dsh_tools import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    Abort,
    AbortError,
    CallNext,
    PreDecision,
    ToolExecution,
    ToolResult,
    ToolRuntime,
    UserMessage,
    error_result,
)
from tests.test_sched_fixtures import calls, exactly, gated_tool, sleeping_tool

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


# -- every run is deterministic (§14) ------------------------------------------------------


def run_once(scenario: Scenario) -> ScenarioRun:
    return trio.run(run_scenario, scenario, clock=trio.testing.MockClock(autojump_threshold=0))


def message_digest(message: UserMessage) -> tuple[object, ...]:
    # A message's id is a fresh UUID in every run.
    return (message.content, message.source)


def result_digest(result: ToolResult) -> tuple[object, ...]:
    return (
        result.is_error,
        result.content,
        result.value,
        result.error,
        result.meta,
        tuple(message_digest(m) for m in result.additional_contexts),
        result.concludes_turn,
    )


def committed_digest(committed: CommittedCall) -> tuple[object, ...]:
    return (
        committed.index,
        committed.call,
        result_digest(committed.result),
        committed.synthetic,
        committed.mode,
    )


def run_digest(run: ScenarioRun, *, before: float | None = None) -> tuple[object, ...]:
    """Everything a run produced, in a form two runs of one scenario can be compared in.

    Batch numbers, execution tokens and message ids are fresh in every run: batch numbers
    are counted from the run's first, tokens numbered in order of appearance, ids dropped.
    Times are kept: virtual times are part of what must repeat. With ``before``, only the
    events that happened before that virtual time are taken.
    """
    tokens: dict[object, int] = {}
    batches = [e.batch for e in run.events if e.batch is not None]

    def token(value: object) -> int | None:
        return None if value is None else tokens.setdefault(value, len(tokens))

    def detail(value: object) -> object:
        if isinstance(value, CallStarted):
            return (
                "call",
                value.index,
                value.call,
                value.mode,
                token(value.token),
                value.synthetic,
            )
        if isinstance(value, CallCommitted):
            return ("result", value.index, value.call, result_digest(value.result), value.synthetic)
        if isinstance(value, ContextAccepted):
            return ("context", value.index, value.call, message_digest(value.message))
        if isinstance(value, ToolResult):
            return result_digest(value)
        return value  # a body's ending, or None

    def error(exc: BaseException | None) -> tuple[str, str] | None:
        return None if exc is None else (type(exc).__name__, str(exc))

    events = tuple(
        (
            e.kind,
            None if e.batch is None else e.batch - batches[0],
            e.index,
            token(e.token),
            e.time,
            detail(e.detail),
        )
        for e in run.events
        if before is None or e.time < before
    )
    outcome = run.outcome
    return (
        events,
        None
        if outcome is None
        else (
            tuple(committed_digest(c) for c in outcome.results),
            tuple(message_digest(m) for m in outcome.additional_contexts),
            outcome.concludes_turn,
            outcome.aborted,
        ),
        error(run.failure),
        error(run.interrupted),
        error(run.block_error),
        run.cancelled,
        iterated_digest(run),
        run.problems,
    )


def iterated_digest(run: ScenarioRun) -> tuple[object, ...] | None:
    """What the block's iteration read, where that is part of what must repeat.

    When the batch finished, the iteration read every committed call. When something ended
    the batch early (an interruption, a failure, a cancellation), the block's task and the
    tasks that commit the last calls are ready at the same instant: how many of those last
    commits the reader took before the exception reached it depends on the order trio runs
    them in, as with any consumer of a channel. Only the prefix rule holds then, which
    ``check_scenario_run`` checks on every run (the ``iterated`` problem); the digest keeps
    whether there was an iteration.
    """
    if run.iterated is None:
        return None
    if run.outcome is None:
        return ("ended early",)
    return tuple(committed_digest(c) for c in run.iterated)


@settings(settings.get_profile("sched-fuzz"), max_examples=200)
@given(scenarios())
def test_every_run_of_a_fuzzed_batch_is_the_same(scenario: Scenario) -> None:
    # Hypothesis seeds trio's scheduler once per example, so the runs below see different
    # orders for the tasks that become ready together: none of them may matter, except at
    # the instant something ended the batch early (ended_early_cut).
    runs = [run_once(scenario) for _ in range(3)]
    cut = ended_early_cut(runs)
    first, *others = (run_digest(run, before=cut) for run in runs)
    for other in others:
        assert other == first


def ended_early_cut(runs: list[ScenarioRun]) -> float | None:
    """``None`` when every run finished; otherwise the earliest instant at which one of
    them ended early (the time of its last sink event).

    When an internal failure, an interruption, a cancellation or the block's exception ends
    a batch, the tasks that are ready at that instant race with it: a body dispatched just
    before may or may not take its first step, a reader may or may not take the last
    commit. Everything before that instant must repeat, and every run's trace is checked
    against the invariants (``run_scenario``), but what happens at it is trio's order.
    """
    if all(run.outcome is not None for run in runs):
        return None
    ends = [
        max((e.time for e in run.events if e.kind in ("call", "result", "context")), default=0.0)
        for run in runs
    ]
    return min(ends)


def interrupted_while_iterating() -> Scenario:
    """Found by the fuzz: at 0.5 s call 0 commits, then call 1's observer interrupts the
    batch while the block iterates; the reader may or may not take call 1 first."""
    return Scenario(
        tools=(
            ToolSpec(
                name="t0",
                classifier="by_argument",
                body="swallow_cancel",
                delay=2.0,
                contexts=1,
                concludes=True,
            ),
        ),
        hooks=(
            HookSpec(stage="pre", action="ask", tool="t0", delay=1.0),
            HookSpec(stage="observer", action="interrupt", tool="t0", delay=0.5),
            HookSpec(stage="pre", action="deny", tool="t0", delay=3.0),
        ),
        calls=(
            ModelToolCall(call_id="c0", name="missing", arguments='{"parallel": false}'),
            ModelToolCall(call_id="c1", name="t0", arguments='{"parallel": true}'),
            ModelToolCall(call_id="c2", name="missing", arguments="NaN"),
        ),
        max_parallel=4,
        abort_at=2.25,
        cancel_at=None,
        block_raises_at=2.875,
        sink_fails_at=None,
        iterate=True,
        keep_results=True,
        use_open_batch=True,
    )


def test_an_iteration_ended_early_is_a_prefix_in_every_order() -> None:
    """S-037: in every order trio may run the tasks ready together, what the reader got
    before the interruption is a prefix of what was committed, and the digest is the same."""
    scenario = interrupted_while_iterating()
    read: set[tuple[int, ...]] = set()
    digests = set()
    for seed in range(8):
        # The order of the tasks that are ready together comes from trio's own generator
        # (private name, test-only, as in tests/ki_sweep.py).
        trio._core._run._r.seed(seed)
        run = run_once(scenario)
        assert run.interrupted is not None
        assert run.iterated is not None
        committed = [e.index for e in run.events if e.kind == "result"]
        got = tuple(c.index for c in run.iterated)
        assert list(got) == committed[: len(got)]
        read.add(got)
        digests.add(run_digest(run))
    # Before decision 114 the driver waited while it started the shared-scope host, and in
    # some orders the reader ran in that gap and took call 1 before the interruption (half
    # of these seeds). The driver now starts the host without waiting: no gap, one reading.
    assert read == {(0,)}
    assert len(digests) == 1


def test_a_body_dispatched_as_the_batch_fails_may_or_may_not_start() -> None:
    """S-037: found by the fuzz. At 0.5 s call 0 is dispatched and the sink fails on call
    1's start at once: trio's order decides whether call 0's instant body takes its first
    step before the failure cancels it. Before that instant every order repeats."""
    scenario = attrs.evolve(
        reviewer_scenario(block_raises_at=0.375),
        tools=(
            ToolSpec(
                name="t0",
                classifier="parallel",
                body="instant",
                delay=0.0,
                contexts=0,
                concludes=False,
                finalizer_interrupts=True,
            ),
        ),
        max_parallel=2,
        sink_fails_at=1,
        iterate=True,
        keep_results=False,
    )
    runs = []
    for seed in range(8):
        trio._core._run._r.seed(seed)  # trio's order of ready tasks (test-only, private)
        runs.append(run_once(scenario))
    assert all(run.failure is not None for run in runs)
    bodies = {tuple(e.kind for e in run.events if e.kind.startswith("body")) for run in runs}
    assert bodies == {(), ("body_start", "body_end")}
    cut = ended_early_cut(runs)
    assert cut == 0.5
    assert len({run_digest(run, before=cut) for run in runs}) == 1


def codes(run: ScenarioRun) -> list[str | None]:
    """Each committed result's error code in commit order; ``None`` for a success."""
    found: list[str | None] = []
    for event in run.events:
        if isinstance(event.detail, CallCommitted):
            error = event.detail.result.error
            found.append(error.info.code if error and error.info else None)
    return found


def reviewer_scenario(**at: float | None) -> Scenario:
    """Two calls of an instant parallel tool, one at a time, with the moments ``at``."""
    fields: dict[str, float | None] = {
        "abort_at": None,
        "cancel_at": None,
        "block_raises_at": None,
        **at,
    }
    return Scenario(
        tools=(
            ToolSpec(
                name="t0",
                classifier="parallel",
                body="instant",
                delay=0.5,
                contexts=0,
                concludes=False,
            ),
        ),
        hooks=(),
        calls=(
            ModelToolCall(call_id="c0", name="t0", arguments=""),
            ModelToolCall(call_id="c1", name="t0", arguments=""),
        ),
        max_parallel=1,
        sink_fails_at=None,
        iterate=False,
        keep_results=True,
        use_open_batch="block_raises_at" in at,
        **fields,
    )


@pytest.mark.parametrize("moment", ["abort_at", "cancel_at", "block_raises_at"])
def test_a_moment_of_zero_comes_before_the_batch_starts(moment: str) -> None:
    # It used to be a timer racing the batch's first tasks: with abort_at=0.0, call 0 was
    # ABORTED in about half of the runs and ABORTED_BEFORE_DISPATCH in the others.
    scenario = reviewer_scenario(**{moment: 0.0})
    first = run_once(scenario)
    digest = run_digest(first)
    for _ in range(49):
        assert run_digest(run_once(scenario)) == digest
    # Nothing ran: every call has its synthetic pair, at time 0.
    assert [(e.kind, e.index, e.time) for e in first.events] == [
        ("call", 0, 0.0),
        ("result", 0, 0.0),
        ("call", 1, 0.0),
        ("result", 1, 0.0),
    ]
    assert all(e.detail.synthetic for e in first.events if isinstance(e.detail, CallCommitted))
    assert codes(first) == [ABORTED_BEFORE_DISPATCH, ABORTED_BEFORE_DISPATCH]
    assert first.cancelled == (moment == "cancel_at")
    assert (first.block_error is not None) == (moment == "block_raises_at")


def test_cancelled_bodies_end_on_their_own_lanes() -> None:
    # Both bodies wait 3 s; the scope is cancelled at 1.125 s, which wakes both at once.
    # Each ends at its lane's next point: half seconds plus 1/64 s for call 0, 3/64 s for
    # call 1. Bodies start one per half second, after the pacing hook.
    scenario = attrs.evolve(
        reviewer_scenario(cancel_at=1.125),
        tools=(
            ToolSpec(
                name="t0",
                classifier="parallel",
                body="sleep",
                delay=3.0,
                contexts=0,
                concludes=False,
            ),
        ),
        max_parallel=2,
    )
    run = run_once(scenario)
    assert run.cancelled
    bodies = [(e.kind, e.time, e.detail) for e in run.events if e.kind.startswith("body")]
    assert bodies == [
        ("body_start", 0.5, None),
        ("body_start", 1.0, None),
        ("body_end", 1.5 + 1 / 64, "cancelled"),
        ("body_end", 1.5 + 3 / 64, "cancelled"),
    ]
    assert codes(run) == [ABORTED, ABORTED]


def test_bodies_wait_their_delay_plus_their_lane() -> None:
    # 17 calls, one at a time: lanes are odd 128ths of a second once 64ths run out.
    scenario = attrs.evolve(
        reviewer_scenario(),
        tools=(
            ToolSpec(
                name="t0",
                classifier="parallel",
                body="sleep",
                delay=0.5,
                contexts=0,
                concludes=False,
            ),
        ),
        calls=tuple(ModelToolCall(call_id=f"c{i}", name="t0", arguments="") for i in range(17)),
    )
    run = run_once(scenario)
    starts = [e.time for e in run.events if e.kind == "body_start"]
    ends = [e.time for e in run.events if e.kind == "body_end"]
    # Each call is dispatched at the first half second after the previous one committed.
    assert starts == [0.5 + i for i in range(17)]
    assert ends == [start + 0.5 + (2 * i + 1) / 128 for i, start in enumerate(starts)]


def test_build_runtime_paces_each_dispatch_to_the_next_half_second() -> None:
    scenario = reviewer_scenario()
    runtime, recorder = build_runtime(scenario)

    async def main() -> ScenarioRun:
        return await run_checked(runtime, recorder, scenario.calls, max_parallel=2)

    run = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    # The pacing hook is innermost: call 1's pre-execute span waits while call 0's body
    # runs alone, and call 0 commits once the driver is back, at 1.0.
    assert [(e.kind, e.time) for e in run.events if e.kind != "observed"] == [
        ("call", 0.0),
        ("pre_start", 0.0),
        ("pre_end", 0.5),
        ("call", 0.5),
        ("pre_start", 0.5),
        ("body_start", 0.5),
        ("body_end", 0.5),
        ("pre_end", 1.0),
        ("post_start", 1.0),
        ("post_end", 1.0),
        ("result", 1.0),
        ("body_start", 1.0),
        ("body_end", 1.0),
        ("post_start", 1.0),
        ("post_end", 1.0),
        ("result", 1.0),
    ]


@pytest.mark.parametrize("phase", [0.125, 0.25, 0.375])
@given(data=st.data())
def test_moments_fall_on_their_phase(phase: float, data: st.DataObject) -> None:
    moment = data.draw(moments(phase=phase))
    if moment is not None and moment != 0.0:
        steps = (moment - phase) / 0.5
        assert steps.is_integer()
        assert 0 <= steps <= 7


@given(scenarios())
def test_scenario_moments_never_coincide_nor_fall_on_the_grid(scenario: Scenario) -> None:
    drawn = [m for m in (scenario.abort_at, scenario.cancel_at, scenario.block_raises_at) if m]
    assert len(set(drawn)) == len(drawn)
    # Odd multiples of 1/8 s: never on the half-second grid, never on a lane (odd 64ths).
    assert all((m * 8).is_integer() and not (m * 2).is_integer() for m in drawn)


@pytest.mark.parametrize("phase", [0.0, 0.5, -0.25])
def test_moments_refuse_a_phase_on_the_grid(phase: float) -> None:
    with pytest.raises(
        ValueError, match=exactly(f"phase must be strictly between 0 and 0.5, got {phase!r}")
    ):
        moments(phase=phase)


def test_run_checked_runs_a_batch_in_a_scope() -> None:
    """Tools registered only in a scope: ``run_checked(scope=...)`` runs the batch there,
    and its monitor classifies the calls there too (no UNKNOWN_TOOL, no mode problem)."""
    runtime = ToolRuntime()
    recorder = TraceRecorder(runtime)
    agent = runtime.open_scope(name="agent")
    agent.register(recorder.instrument(gated_tool("t", parallel=True, steps=[])))

    async def main() -> ScenarioRun:
        return await run_checked(
            runtime, recorder, calls("t:c1", "t:c2"), max_parallel=2, scope=agent
        )

    run = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert run.outcome is not None
    assert [c.result.is_error for c in run.outcome.results] == [False, False]
    assert run.problems == ()


def test_i6_exempts_aborted_results_that_user_code_authored_when_told_to() -> None:
    """scheduler.md I6 exempts an ``ABORTED``/``ABORTED_BEFORE_DISPATCH`` result that user
    code authored, which a trace cannot tell from the runtime's: a wrapper that answers
    ``ABORTED`` without running the body is reported by default, and not with
    ``ignore={"I6"}``; an unknown invariant ID is refused."""
    runtime = ToolRuntime()
    recorder = TraceRecorder(runtime)
    runtime.register(recorder.instrument(gated_tool("t", parallel=True, steps=[])))

    async def refuse(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        raise AbortError("ABORTED")

    runtime.wrap_execute(refuse)

    async def main() -> ScenarioRun:
        return await run_checked(runtime, recorder, calls("t:c1"), max_parallel=1, check=False)

    run = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    with pytest.raises(AssertionError, match="I6: call 0 got ABORTED but its body never"):
        check_scenario_run(run)
    check_scenario_run(run, ignore={"I6"})
    with pytest.raises(ValueError, match=r"does not check: \['I3', 'I99'\]"):
        check_scenario_run(run, ignore={"I3", "I99"})


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
    monkeypatch.delitem(sys.modules, "dsh_sched._fuzz_strategies")
    monkeypatch.setitem(sys.modules, "hypothesis", None)
    with pytest.raises(ImportError, match="needs hypothesis: pip install hypothesis"):
        dsh_sched.testing.scenarios  # noqa: B018


def test_a_missing_module_other_than_hypothesis_is_not_blamed_on_hypothesis(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "dsh_sched._fuzz_harness", None)
    with pytest.raises(ModuleNotFoundError) as info:
        dsh_sched.testing.build_runtime  # noqa: B018
    assert info.value.name == "dsh_sched._fuzz_harness"


def test_check_scenario_run_reports_a_completed_success_turned_aborted() -> None:
    """The kit checks runtime.md §8.3's new rule: a body that returned before the batch
    Abort fired keeps its success (C-007, S-046); a run where it became ``ABORTED`` fails."""
    runtime = ToolRuntime()
    recorder = TraceRecorder(runtime)

    runtime.register(recorder.instrument(sleeping_tool("slow", 5.0)))
    runtime.register(recorder.instrument(sleeping_tool("fast", 0.25)))

    async def main() -> ScenarioRun:
        return await run_checked(
            runtime, recorder, calls("slow:c1", "fast:c2"), max_parallel=2, abort_at=1.125
        )

    run = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert run.aborted_at == 1.125
    assert run.outcome is not None
    assert [c.result.is_error for c in run.outcome.results] == [True, False]
    forged = error_result(AbortError("ABORTED"))
    events = tuple(
        attrs.evolve(e, detail=attrs.evolve(e.detail, result=forged))
        if e.kind == "result" and e.index == 1
        else e
        for e in run.events
    )
    with pytest.raises(AssertionError) as info:
        check_scenario_run(attrs.evolve(run, events=events), ignore={"I8", "I12"})
    assert (
        "call 1's body returned at 0.25 before the abort at 1.125, but its result is ABORTED"
        in str(info.value)
    )

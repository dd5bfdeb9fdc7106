"""Running a fuzzed batch and checking how it ended: ``run_checked``, ``run_scenario``.

:func:`run_checked` runs one batch of your own tools (or a scenario's) with a
:class:`~dsh_sched.testing.TraceRecorder` as its sink, injecting the abort, the
cancellation and the block's exception at the given virtual moments; :func:`run_scenario`
builds a :class:`~dsh_sched.testing.Scenario`'s runtime and runs it; :func:`check_scenario_run`
checks the trace's invariants and the exception rules. Nothing here needs ``hypothesis``.
:func:`run_checked` with your own tools is as deterministic as your tools are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

import trio

from dsh_tools import ABORTED, Abort, ToolCall, ToolRuntime

from ._batch import open_batch
from ._calls import ModelToolCall, parse_arguments
from ._fuzz_harness import build
from ._fuzz_scenario import BlockError, FuzzInterrupt, Scenario, ScenarioRun, SinkFailure
from ._trace_checker import check_trace

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from dsh_tools import ExecutionToken, Scope

    from ._outcome import BatchOutcome, CommittedCall
    from ._sinks import CallCommitted, CallStarted, ContextAccepted, Sink
    from ._trace_recorder import TraceEvent, TraceRecorder

__all__ = ["check_scenario_run", "run_checked", "run_scenario"]


@final
class _Monitor:
    """The batch's sink in :func:`run_checked`: checks each start, then records it.

    When a call is reported started, nothing has run since it was classified and created
    (no checkpoint, no user code), so the batch ``Abort`` must not have fired yet and
    classifying the call again must give the mode it started under.
    """

    def __init__(
        self, recorder: TraceRecorder, runtime: ToolRuntime, abort: Abort, scope: Scope | None
    ) -> None:
        self.recorder = recorder
        self.runtime = runtime
        self.abort = abort
        self.scope = scope
        self.problems: list[str] = []

    def on_call(self, event: CallStarted) -> None:
        if not event.synthetic:
            if self.abort.aborted:
                self.problems.append(f"call {event.index} started after the abort fired")
            call = event.call
            arguments = call.arguments
            mode = self.runtime.execution_mode(
                ToolCall(
                    call_id=call.call_id,
                    name=call.name,
                    arguments=parse_arguments(arguments)
                    if isinstance(arguments, str)
                    else arguments,
                    scope=self.scope,
                )
            )
            if mode is not event.mode:
                self.problems.append(
                    f"call {event.index} started as {event.mode} but classifies as {mode}"
                )
        self.recorder.on_call(event)

    def on_result(self, event: CallCommitted) -> None:
        self.recorder.on_result(event)

    def on_context(self, event: ContextAccepted) -> None:
        self.recorder.on_context(event)


@final
class _FailingSink:
    """Raises :class:`SinkFailure` on the ``fail_at``-th event (0-based), once."""

    def __init__(self, fail_at: int | None) -> None:
        self.fail_at = fail_at
        self.count = 0
        self.raised: SinkFailure | None = None
        self.count_at_failure = -1

    def _tick(self) -> None:
        n = self.count
        self.count = n + 1
        if n == self.fail_at:
            self.count_at_failure = n + 1
            self.raised = SinkFailure(f"sink failed on event {n}")
            raise self.raised

    def on_call(self, event: CallStarted) -> None:
        self._tick()

    def on_result(self, event: CallCommitted) -> None:
        self._tick()

    def on_context(self, event: ContextAccepted) -> None:
        self._tick()


async def run_scenario(scenario: Scenario) -> ScenarioRun:
    """Build and run one scenario, then check it (:func:`check_scenario_run`).

    Run it under ``MockClock(autojump_threshold=0)``, e.g.
    ``trio.run(run_scenario, scenario, clock=MockClock(autojump_threshold=0))``.

    Raises:
        AssertionError: An invariant or an exception rule is violated.
    """
    failing = _FailingSink(scenario.sink_fails_at)
    runtime, recorder, timeline = build(scenario, failing)
    # The grid starts with the run, as the moments do (run_checked reads the same time).
    timeline.origin = trio.current_time()
    run = await run_checked(
        runtime,
        recorder,
        scenario.calls,
        max_parallel=scenario.max_parallel,
        abort_at=scenario.abort_at,
        cancel_at=scenario.cancel_at,
        block_raises_at=scenario.block_raises_at if scenario.use_open_batch else None,
        iterate=scenario.iterate,
        keep_results=scenario.keep_results,
        check=False,
        close_scope_at=scenario.close_scope_at,
    )
    # A sink failure is an internal failure unless it happened during cancellation
    # bookkeeping, which logs it and goes on. Nothing follows an internal failure, so the
    # failing event being the last one tells them apart. (An internal failure may also be
    # logged rather than raised, when the block raised first or a native exception won.)
    failure = None
    if failing.raised is not None and failing.count == failing.count_at_failure:
        failure = failing.raised
    if run.failure is not None and run.failure is not failure:
        raise AssertionError("sink events were reported after the internal failure")
    check_scenario_run(run, failure=failure)
    return run


async def run_checked(
    runtime: ToolRuntime,
    recorder: TraceRecorder,
    calls: Sequence[ModelToolCall],
    *,
    max_parallel: int,
    abort_at: float | None = None,
    cancel_at: float | None = None,
    block_raises_at: float | None = None,
    iterate: bool = False,
    keep_results: bool = True,
    check: bool = True,
    scope: Scope | None = None,
    ignore: Collection[str] = (),
    close_scope_at: float | None = None,
) -> ScenarioRun:
    """Run one batch with ``recorder`` as its sink, then (by default) check its trace.

    The batch runs in ``open_batch``; the block optionally iterates it and optionally
    raises :class:`BlockError` at ``block_raises_at`` (at once if the iteration ended
    later). The batch ``Abort`` fires at ``abort_at`` and the enclosing scope is cancelled
    at ``cancel_at``. Moments are virtual seconds after this call starts; ``0.0`` means
    before the batch starts: the ``Abort`` is fired, the scope cancelled, or the block
    raises on entry, before any task of the batch runs. Exceptions are captured in the
    returned :class:`ScenarioRun`; anything else escaping (an exception group, an
    unexpected error) propagates and fails the test.

    ``scope`` is the batch's scope (``open_batch(scope=...)``), for tools registered in
    one. ``close_scope_at`` closes the batch's scope at that moment (a fresh scope of
    ``runtime`` when ``scope`` is ``None``): the calls started after it fail closed.
    ``ignore`` names invariants the check does not report (see :func:`check_trace`:
    ``{"I6"}`` for a tool set whose own code raises ``AbortError``).

    Give the three moments different values that none of your tools' waits ends on (as
    :func:`moments` with a different ``phase`` each does for whole-half-second waits):
    tasks that become ready together run in a random order.

    Raises:
        AssertionError: ``check`` is true and an invariant or an exception rule is violated.
    """
    abort = Abort()
    if close_scope_at is not None and scope is None:
        scope = runtime.open_scope(name="fuzzed batch")
    outcome: BatchOutcome | None = None
    failure: SinkFailure | None = None
    interrupted: FuzzInterrupt | None = None
    block_error: BlockError | None = None
    iterated: list[CommittedCall] | None = [] if iterate else None
    cancelled = False
    monitor = _Monitor(recorder, runtime, abort, scope)
    sink: Sink = monitor

    start = trio.current_time()

    async def fire_abort(at: float) -> None:
        await trio.sleep_until(start + at)
        abort.abort("fuzz abort")

    async def cancel_later(scope: trio.CancelScope, at: float) -> None:
        await trio.sleep_until(start + at)
        scope.cancel()

    async def close_later(batch_scope: Scope, at: float) -> None:
        await trio.sleep_until(start + at)
        batch_scope.close()

    aborted_at: float | None = None

    async def note_abort() -> None:
        # Whoever fires it (a timer, the block's exception, a tool): when it happened.
        nonlocal aborted_at
        await abort.wait()
        aborted_at = trio.current_time()

    with trio.CancelScope() as outer:
        # At 0.0, before the batch starts: done here, in order, rather than by timers that
        # would race the batch's first tasks.
        if abort_at == 0.0:
            abort.abort("fuzz abort")
        if cancel_at == 0.0:
            outer.cancel()
        if close_scope_at == 0.0 and scope is not None:
            scope.close()
        async with trio.open_nursery() as timers:
            timers.start_soon(note_abort)
            if abort_at:
                timers.start_soon(fire_abort, abort_at)
            if cancel_at:
                timers.start_soon(cancel_later, outer, cancel_at)
            if close_scope_at and scope is not None:
                timers.start_soon(close_later, scope, close_scope_at)
            batch = open_batch(
                runtime,
                calls,
                abort=abort,
                max_parallel=max_parallel,
                sink=sink,
                keep_results=keep_results,
                scope=scope,
            )
            try:
                async with batch:
                    if iterated is not None:
                        async for committed in batch:
                            iterated.append(committed)
                    if block_raises_at is not None:
                        # No schedule point when the moment has come (0.0, or passed while
                        # iterating): raise before any other task runs.
                        if trio.current_time() < start + block_raises_at:
                            await trio.sleep_until(start + block_raises_at)
                        raise BlockError("the block raised")
            except SinkFailure as exc:
                failure = exc
            except FuzzInterrupt as exc:
                interrupted = exc
            except BlockError as exc:
                block_error = exc
            except trio.Cancelled:
                # Bare: a group here would escape the outer scope and fail the test.
                cancelled = True
                raise
            outcome = batch.outcome
            timers.cancel_scope.cancel()
    run = ScenarioRun(
        events=tuple(recorder.events),
        outcome=outcome,
        failure=failure,
        interrupted=interrupted,
        block_error=block_error,
        cancelled=cancelled,
        iterated=None if iterated is None else tuple(iterated),
        max_parallel=max_parallel,
        problems=tuple(monitor.problems),
        aborted_at=aborted_at,
    )
    if check:
        check_scenario_run(run, ignore=ignore)
    return run


def _completed_successes_rewritten(run: ScenarioRun) -> list[str]:
    """Calls whose body returned before the Abort fired but that were committed ``ABORTED``."""
    aborted_at = run.aborted_at
    if run.outcome is None or aborted_at is None:
        return []
    tokens: dict[int | None, ExecutionToken | None] = {}
    last_end: dict[ExecutionToken | None, TraceEvent] = {}
    for event in run.events:
        if event.kind == "call":
            tokens[event.index] = event.token
        elif event.kind == "body_end":
            last_end[event.token] = event
    problems = []
    for event in run.events:
        if event.kind != "result" or event.detail.synthetic:
            continue
        end = last_end.get(tokens.get(event.index))
        error = event.detail.result.error
        if (
            end is not None
            and end.detail == "returned"
            and end.time < aborted_at
            and error is not None
            and error.info is not None
            and error.info.code == ABORTED
        ):
            problems.append(
                f"call {event.index}'s body returned at {end.time} before the abort at "
                f"{aborted_at}, but its result is ABORTED (a completed success is kept)"
            )
    return problems


def check_scenario_run(
    run: ScenarioRun, *, failure: BaseException | None = None, ignore: Collection[str] = ()
) -> None:
    """Check a run's trace (:func:`check_trace`) and how the batch ended.

    On top of the invariants: an outcome only for a finished batch; one exception at most;
    the iteration yielded exactly the committed calls, in order; and a completed success is
    kept: a call whose body's last return came before the batch ``Abort`` fired is never
    ``ABORTED`` (runtime.md §8.3; native cancellation aside, which leaves no outcome).

    Args:
        run: The run to check.
        failure: The internal failure, if it happened but another exception was raised.
        ignore: Invariant IDs :func:`check_trace` does not report (``{"I6"}`` for a tool set
            whose own code raises ``AbortError``).

    Raises:
        AssertionError: With every problem found.
    """
    failure = failure if failure is not None else run.failure
    check_trace(
        run.events,
        max_parallel=run.max_parallel,
        outcome=run.outcome,
        failure=failure,
        ignore=ignore,
    )
    problems: list[str] = list(run.problems)
    problems.extend(_completed_successes_rewritten(run))
    if run.outcome is not None and (run.failure or run.interrupted or run.cancelled):
        problems.append("an outcome was set although the batch did not finish")
    if run.failure is not None and run.interrupted is not None:
        problems.append("both an internal failure and an interruption escaped")
    if run.iterated is not None and failure is None:
        committed = [e.detail for e in run.events if e.kind == "result"]
        got = [(c.index, c.result) for c in run.iterated]
        want = [(e.index, e.result) for e in committed]
        # The iteration ends when the batch ends; a cancelled block stops reading early.
        if got != want[: len(got)] or (run.outcome is not None and got != want):
            problems.append(
                f"iteration yielded {[i for i, _ in got]}, committed {[e.index for e in committed]}"
            )
    if problems:
        raise AssertionError("\n".join(problems))

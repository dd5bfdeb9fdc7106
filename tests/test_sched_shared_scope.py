"""The scheduler's shared abort scope (runtime.md §7.4, §8; scheduler.md §6, §7).

When the calls of a parallel group may overlap, the driver runs their wrapper-free dispatch
stages as tasks of one nursery opened inside ``batch.abort.move_on_abort()``
(``lowlevel.dispatch_in_abort_scope``) instead of giving every body a cancel scope of its
own. §7.4 allows that only "as long as every rule of §8 holds per call", so these tests run
the same batch through both paths and compare what every call gets:

- **shared**: ``run_tool_calls`` with two calls and ``max_parallel=2``;
- **per-call**: the same batch with the driver's ``dispatch_in_abort_scope`` forced to
  decline, so the driver uses ``lowlevel.dispatch`` (the same interleaving, the old path);
- **serial**: the same batch with ``max_parallel=1``, which never overlaps;
- **execute**: ``ToolRuntime.execute`` of the first call with its own ``Abort`` (when only
  the ``Abort`` fires: under native cancellation its caller is the body's own task).

Every body parks at a known point; ``wait_all_tasks_blocked()`` separates the phases, then the
test fires the ``Abort`` and/or cancels the caller while the bodies run. The one case where
the two paths differ by design (docs/decisions.md 19) has tests of its own.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from functools import partial
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

import dsh_sched._driver
from dsh_sched import (
    CallCommitted,
    CallStarted,
    ContextAccepted,
    ModelToolCall,
    RecordingSink,
    run_tool_calls,
)
from dsh_tools import (
    Abort,
    CallNext,
    ErrorInfo,
    JsonValue,
    PostDecision,
    PreDecision,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    UserMessage,
    lowlevel,
)
from dsh_tools.lowlevel import NeedsFinalize, NeedsFinish, ReadyToDispatch
from tests.pipeline_helpers import (
    aborted,
    aborted_before_dispatch,
    failing_nursery_body,
    failure,
)
from tests.test_sched_fixtures import Gates, calls, exactly, output

wait_blocked = trio.testing.wait_all_tasks_blocked


def context_of(call_id: str) -> UserMessage:
    """The context a body defers: its call id, with a fixed id so that results compare."""
    return UserMessage(content=[TextContent(call_id)], id=f"context-{call_id}")


Stage = Coroutine[Any, Any, NeedsFinalize | NeedsFinish | ReadyToDispatch]

_real_shared = lowlevel.dispatch_in_abort_scope
_real_dispatch = lowlevel.dispatch


# -- which path a call took -------------------------------------------------------------


@attrs.define
class PathSpy:
    """Stands in for the driver's two dispatch entry points and records what each call took.

    The driver asks ``dispatch_in_abort_scope`` only while the shared nursery is open:
    ``asked`` lists those calls, ``shared`` the ones it handed the shared-scope stage to.
    ``per_call`` lists the calls dispatched by ``lowlevel.dispatch`` in the batch nursery.
    With ``force_per_call`` every call is declined, so the same batch runs the per-call path.
    """

    force_per_call: bool = False
    asked: list[str] = attrs.Factory(list)
    shared: list[str] = attrs.Factory(list)
    per_call: list[str] = attrs.Factory(list)

    def dispatch_in_abort_scope(self, step: ReadyToDispatch) -> Stage | None:
        call_id = step.execution.call_id
        self.asked.append(call_id)
        if self.force_per_call:
            return None
        stage = _real_shared(step)
        if stage is not None:
            self.shared.append(call_id)
        return stage

    def dispatch(self, step: ReadyToDispatch) -> Stage:
        self.per_call.append(step.execution.call_id)
        return _real_dispatch(step)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> PathSpy:
        monkeypatch.setattr(
            dsh_sched._driver, "dispatch_in_abort_scope", self.dispatch_in_abort_scope
        )
        monkeypatch.setattr(dsh_sched._driver, "dispatch", self.dispatch)
        return self


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> PathSpy:
    return PathSpy().install(monkeypatch)


# -- what a body does when the Abort fires ------------------------------------------------


async def parks(gates: Gates) -> object:
    await trio.sleep_forever()


async def catches_and_returns(gates: Gates) -> object:
    try:
        await trio.sleep_forever()
    except trio.Cancelled:
        return "caught"


async def catches_and_raises(gates: Gates) -> object:
    try:
        await trio.sleep_forever()
    except trio.Cancelled:
        raise ValueError("body failed") from None


async def catches_and_returns_bad_output(gates: Gates) -> object:
    try:
        await trio.sleep_forever()
    except trio.Cancelled:
        return object()  # not lossless JSON: INVALID_TOOL_OUTPUT


async def nursery_parks(gates: Gates) -> object:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.sleep_forever)
        nursery.start_soon(trio.sleep_forever)
    return "the children never end by themselves"


async def nursery_raises_cancelled_and_an_error(gates: Gates) -> object:
    async def cleanup_fails() -> None:
        try:
            await trio.sleep_forever()
        finally:
            raise ValueError("cleanup failed")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.sleep_forever)
        nursery.start_soon(cleanup_fails)
    return "the children never end by themselves"


async def nursery_group_swallowed(gates: Gates) -> object:
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
    except BaseExceptionGroup:
        return "swallowed"
    return "the child never ends by itself"


async def shielded_then_returns(gates: Gates) -> object:
    # Ignores the cancellation: no checkpoint after the shielded wait (C-014, C-019).
    with trio.CancelScope(shield=True):
        await gates.wait("shield")
    return "finished anyway"


async def shielded_cleanup_then_reraises(gates: Gates) -> object:
    try:
        await trio.sleep_forever()
    except trio.Cancelled:
        with trio.CancelScope(shield=True):
            await gates.wait("shield")
        raise


async def returns_at_once(gates: Gates) -> object:
    return "done"


async def raises_at_once(gates: Gates) -> object:
    raise ValueError("body failed")


Behaviour = Callable[[Gates], Awaitable[object]]

#: Bodies still running when the test fires: the differential cases.
MID_BODY: dict[str, Behaviour] = {
    f.__name__: f
    for f in (
        parks,
        catches_and_returns,
        catches_and_raises,
        catches_and_returns_bad_output,
        nursery_parks,
        nursery_raises_cancelled_and_an_error,
        nursery_group_swallowed,
        shielded_then_returns,
        shielded_cleanup_then_reraises,
    )
}
#: Plus bodies that end before the test fires (they let a rolling pool start more calls).
BEHAVIOURS: dict[str, Behaviour] = {
    **MID_BODY,
    "returns_at_once": returns_at_once,
    "raises_at_once": raises_at_once,
}

#: The body for which the two paths differ when an enclosing scope is cancelled as well
#: (docs/decisions.md 19): pinned by its own tests, left out of the differential ones.
GROUP_WITH_ERROR = "nursery_raises_cancelled_and_an_error"


def behaving_tool(
    name: str, behaviour: str, gates: Gates, *, parallel: bool = True
) -> ToolDefinition:
    """A tool whose body defers the context ``<call_id>`` and then does ``behaviour``."""
    act = BEHAVIOURS[behaviour]

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.defer_context(context_of(ctx.call_id))
        return await act(gates)

    return ToolDefinition(
        name=name,
        description=f"{behaviour} ({name})",
        parameters={},
        output=output(),
        execute=body,
        is_concurrency_safe=parallel,
    )


class Fire(enum.Enum):
    """What the test does while the bodies run."""

    ABORT = "abort"
    ABORT_AND_CANCEL = "abort+cancel"
    CANCEL = "cancel"

    @property
    def aborts(self) -> bool:
        return self is not Fire.CANCEL

    @property
    def cancels(self) -> bool:
        return self is not Fire.ABORT

    async def once_parked(self, abort: Abort, caller: trio.CancelScope, gates: Gates) -> None:
        """Wait until every task is blocked, fire, then let shielded bodies go on."""
        await wait_blocked()
        if self.aborts:
            abort.abort()
        if self.cancels:
            caller.cancel()
        gates.release("shield")


class Route(enum.Enum):
    SHARED = "shared"
    PER_CALL = "per-call"
    SERIAL = "serial"
    EXECUTE = "execute"


@attrs.frozen
class Seen:
    """Everything a batch recorded, keyed by call id (independent of trio's task order)."""

    results: dict[str, ToolResult]
    synthetic: dict[str, ToolResult]
    post: dict[str, ToolResult]  # what each post-execute hook received
    contexts: tuple[str, ...]
    raised: tuple[type[BaseException], ...]


class Harness:
    """One runtime with a tool ``t<i>`` per call ``c<i>`` (its behaviour and mode), a
    recording post hook and a result observer."""

    def __init__(self, tools: Sequence[tuple[str, bool]]) -> None:
        self.gates = Gates()
        self.runtime = ToolRuntime()
        self.post: dict[str, ToolResult] = {}
        self.observed: dict[str, ToolResult] = {}
        for i, (behaviour, parallel) in enumerate(tools, 1):
            self.runtime.register(behaving_tool(f"t{i}", behaviour, self.gates, parallel=parallel))
        self.calls = calls(*(f"t{i}:c{i}" for i in range(1, len(tools) + 1)))

        async def post(
            execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
        ) -> PostDecision:
            self.post[execution.call_id] = result
            return await call_next()

        def observe(execution: ToolExecution, result: ToolResult) -> None:
            assert execution.call_id not in self.observed, "one result per call"
            self.observed[execution.call_id] = result

        self.runtime.on_post_execute(post)
        self.runtime.on_result(observe)

    async def run(
        self, fire: Fire, *, max_parallel: int, batch: Sequence[ModelToolCall] | None = None
    ) -> Seen:
        """Run the batch, fire once every task is blocked, release the shielded bodies."""
        abort = Abort()
        sink = RecordingSink()
        raised: list[BaseException] = []

        async def go() -> None:
            try:
                await run_tool_calls(
                    self.runtime,
                    self.calls if batch is None else batch,
                    abort=abort,
                    max_parallel=max_parallel,
                    sink=sink,
                )
            except BaseException as exc:
                raised.append(exc)
                raise

        with trio.CancelScope() as caller:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(go)
                await fire.once_parked(abort, caller, self.gates)
        results: dict[str, ToolResult] = {}
        synthetic: dict[str, ToolResult] = {}
        for event in sink.events:
            if isinstance(event, CallCommitted):
                call_id = event.call.call_id
                assert call_id not in results, "one result per call"
                assert call_id not in synthetic, "one result per call"
                if event.synthetic:
                    synthetic[call_id] = event.result
                else:
                    # What observers were told is what the sink got (§7, S-020).
                    assert event.result is self.observed[call_id]
                    results[call_id] = event.result
        started = [e.call.call_id for e in sink.events if isinstance(e, CallStarted)]
        assert sorted(started) == sorted([*results, *synthetic])
        return Seen(
            results=results,
            synthetic=synthetic,
            post=dict(self.post),
            contexts=tuple(
                "".join(b.text for b in e.message.content if isinstance(b, TextContent))
                for e in sink.events
                if isinstance(e, ContextAccepted)
            ),
            raised=tuple(type(e) for e in raised),
        )

    async def execute_first(self, fire: Fire) -> Seen:
        """``ToolRuntime.execute`` of ``c1`` alone, fired the same way."""
        abort = Abort()
        call = ToolCall(call_id="c1", name="t1", arguments={}, abort=abort)
        raised: list[BaseException] = []

        async def go() -> None:
            try:
                await self.runtime.execute(call)
            except BaseException as exc:
                # execute() re-raises a hook's or body's group as it is (§8.4); only a bare
                # Cancelled goes on to the caller's scope.
                raised.append(exc)
                if isinstance(exc, trio.Cancelled):
                    raise

        with trio.CancelScope() as caller:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(go)
                await fire.once_parked(abort, caller, self.gates)
        return Seen(
            results=dict(self.observed),
            synthetic={},
            post=dict(self.post),
            contexts=(),
            raised=tuple(type(e) for e in raised),
        )


async def observe_route(route: Route, behaviour: str, fire: Fire) -> tuple[Seen, PathSpy]:
    """Two calls of ``behaviour`` through ``route``; what was recorded and the paths taken."""
    harness = Harness([(behaviour, True), (behaviour, True)])
    with pytest.MonkeyPatch.context() as patch:
        spy = PathSpy(force_per_call=route is Route.PER_CALL).install(patch)
        if route is Route.EXECUTE:
            seen = await harness.execute_first(fire)
        else:
            seen = await harness.run(fire, max_parallel=1 if route is Route.SERIAL else 2)
    return seen, spy


def expected(behaviour: str, fire: Fire, index: int) -> ToolResult:
    """What call ``c<index>`` gets by runtime.md §8 (the per-call rules)."""
    contexts = (context_of(f"c{index}"),)
    if behaviour == "catches_and_raises":
        return failure("body failed", None, contexts)  # C-010: any error beats cancellation
    if behaviour == "catches_and_returns_bad_output":
        return failure(  # C-020
            f'tool "t{index}" returned invalid output: value is not lossless JSON',
            ErrorInfo("ToolOutputError", "INVALID_TOOL_OUTPUT"),
            contexts,
        )
    if behaviour == GROUP_WITH_ERROR and fire is Fire.ABORT:
        # The per-call scope strips its Cancelled and leaves the ValueError's group: the
        # body's error, kept with the deferred context like any other (decision 20).
        return failure("Exceptions from Trio nursery (1 sub-exception)", None, contexts)
    # Everything else that was running is cancelled: by the Abort (C-012, C-014, C-019) or
    # natively (C-021), ABORTED since the body started, with the deferred context.
    return aborted(contexts)


def _cases() -> list[Any]:
    cases = []
    for behaviour in MID_BODY:
        for fire in Fire:
            if behaviour == GROUP_WITH_ERROR and fire is Fire.ABORT_AND_CANCEL:
                continue  # decision 19, see test_decision_19_*
            cases.append(pytest.param(behaviour, fire, id=f"{behaviour}-{fire.value}"))
    return cases


# -- 1. the path is really taken ----------------------------------------------------------


async def test_a_wrapper_free_parallel_batch_runs_in_the_shared_scope(spy: PathSpy) -> None:
    """S-001 through the shared scope: both bodies overlap, neither has a per-call scope."""
    harness = Harness([("shielded_then_returns", True), ("shielded_then_returns", True)])
    seen = await harness.run(Fire.ABORT, max_parallel=2)
    assert spy.asked == ["c1", "c2"]
    assert spy.shared == ["c1", "c2"]
    assert spy.per_call == []
    assert seen.results == {"c1": aborted((context_of("c1"),)), "c2": aborted((context_of("c2"),))}


async def test_a_wrapper_makes_the_driver_use_the_per_call_scope(spy: PathSpy) -> None:
    """A ``tools/execute`` wrapper applies: the shared stage declines, ``dispatch`` runs it."""
    runtime = ToolRuntime()
    runtime.register(behaving_tool("t", "returns_at_once", Gates()))
    wrapped: list[str] = []

    async def wrapper(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        wrapped.append(execution.call_id)
        return await call_next()

    runtime.wrap_execute(wrapper)
    outcome = await run_tool_calls(runtime, calls("t:c1", "t:c2"), max_parallel=2)
    assert spy.asked == ["c1", "c2"]
    assert spy.shared == []
    assert sorted(spy.per_call) == ["c1", "c2"]
    assert sorted(wrapped) == ["c1", "c2"]
    assert [c.result.value for c in outcome.results] == ["done", "done"]
    assert [c.result.additional_contexts for c in outcome.results] == [
        (context_of("c1"),),
        (context_of("c2"),),
    ]


async def test_only_a_wrapper_that_applies_to_the_call_declines_the_shared_scope(
    spy: PathSpy,
) -> None:
    """Wrappers are filtered by scope: one on an unrelated scope leaves the shared path."""
    runtime = ToolRuntime()
    runtime.register(behaving_tool("t", "returns_at_once", Gates()))
    wrapped: list[str] = []

    async def wrapper(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        wrapped.append(execution.call_id)
        return await call_next()

    agent = runtime.open_scope(name="agent")
    other = runtime.open_scope(name="other")
    agent.wrap_execute(wrapper)
    sub_agent = runtime.open_scope(parent=agent, name="sub")
    await run_tool_calls(runtime, calls("t:o1", "t:o2"), scope=other, max_parallel=2)
    assert (spy.shared, spy.per_call, wrapped) == (["o1", "o2"], [], [])
    await run_tool_calls(runtime, calls("t:s1", "t:s2"), scope=sub_agent, max_parallel=2)
    assert spy.shared == ["o1", "o2"]
    assert sorted(spy.per_call) == ["s1", "s2"]
    assert sorted(wrapped) == ["s1", "s2"]


@pytest.mark.parametrize(
    ("tools", "max_parallel"),
    [
        pytest.param([True, True], 1, id="max_parallel=1"),
        pytest.param([True], 10, id="a single call"),
        pytest.param([False, False], 10, id="exclusive calls"),
    ],
)
async def test_a_batch_that_cannot_overlap_never_opens_the_shared_scope(
    spy: PathSpy, tools: list[bool], max_parallel: int
) -> None:
    """No two bodies can run at once: every call keeps its per-call scope (S-010)."""
    harness = Harness([("parks", parallel) for parallel in tools])
    seen = await harness.run(Fire.ABORT, max_parallel=max_parallel)
    assert spy.asked == []
    assert spy.shared == []
    assert spy.per_call == ["c1"]  # the abort came while c1 ran: the rest never started
    assert seen.results == {"c1": aborted((context_of("c1"),))}
    assert seen.synthetic == {f"c{i}": aborted_before_dispatch() for i in range(2, len(tools) + 1)}


async def test_an_exclusive_call_before_the_first_parallel_group_keeps_its_own_scope(
    spy: PathSpy,
) -> None:
    """The shared nursery opens with the first group that may overlap, not before."""
    harness = Harness([("returns_at_once", False), ("parks", True), ("parks", True)])
    seen = await harness.run(Fire.ABORT, max_parallel=2)
    assert spy.per_call == ["c1"]
    assert spy.shared == ["c2", "c3"]
    assert seen.results == {
        "c1": ToolResult(
            is_error=False,
            content=(TextContent("done"),),
            value="done",
            additional_contexts=(context_of("c1"),),
        ),
        "c2": aborted((context_of("c2"),)),
        "c3": aborted((context_of("c3"),)),
    }


async def test_an_exclusive_call_after_a_parallel_group_is_aborted_as_on_the_per_call_path() -> (
    None
):
    """S-016/C-012 for a barrier that runs once the shared nursery is open: whichever path
    the driver picks for it, the Abort mid-body gives the per-call result."""
    tools = [("returns_at_once", True), ("returns_at_once", True), ("parks", False)]
    seen: list[Seen] = []
    for force in (False, True):
        with pytest.MonkeyPatch.context() as patch:
            spy = PathSpy(force_per_call=force).install(patch)
            seen.append(await Harness(tools).run(Fire.ABORT, max_parallel=2))
            assert spy.asked[:2] == ["c1", "c2"]
            assert spy.shared[:2] == ([] if force else ["c1", "c2"])
    shared, per_call = seen
    assert shared == per_call
    assert shared.results["c3"] == aborted((context_of("c3"),))
    assert shared.post.keys() == {"c1", "c2", "c3"}
    assert shared.post["c3"] == aborted((context_of("c3"),))  # checks E/F before post


# -- 2. differential: the Abort (and/or the caller) mid-body ------------------------------


@pytest.mark.parametrize(("behaviour", "fire"), _cases())
async def test_abort_mid_body_gives_the_per_call_result(behaviour: str, fire: Fire) -> None:
    """C-010, C-012, C-014, C-019, C-020, C-021, C-028, S-016, S-020 per call, through the
    shared scope: two overlapping calls get exactly what the per-call path gives them (the
    same batch forced onto ``lowlevel.dispatch``, and ``max_parallel=1``; for the Abort
    alone also ``execute()``, whose caller is the body's own task, so under native
    cancellation a body that swallows the ``Cancelled`` legitimately ends it normally)."""
    shared, shared_spy = await observe_route(Route.SHARED, behaviour, fire)
    per_call, per_call_spy = await observe_route(Route.PER_CALL, behaviour, fire)
    serial, serial_spy = await observe_route(Route.SERIAL, behaviour, fire)
    execute = serial
    if not fire.cancels:
        execute, _ = await observe_route(Route.EXECUTE, behaviour, fire)
    # The routes took the paths they are named after.
    assert (shared_spy.shared, shared_spy.per_call) == (["c1", "c2"], [])
    assert (per_call_spy.shared, sorted(per_call_spy.per_call)) == ([], ["c1", "c2"])
    assert (serial_spy.asked, serial_spy.per_call) == ([], ["c1"])
    # The per-call path, three ways, and the rules themselves.
    assert shared == per_call
    assert shared.results["c1"] == serial.results["c1"] == execute.results["c1"]
    assert shared.post.get("c1") == serial.post.get("c1") == execute.post.get("c1")
    assert shared.results == {
        "c1": expected(behaviour, fire, 1),
        "c2": expected(behaviour, fire, 2),
    }
    keeps_going = fire is Fire.ABORT
    # Post-execute sees the result after checks E and F; none runs after a Cancelled.
    assert shared.post == (shared.results if keeps_going else {})
    assert shared.raised == ((trio.Cancelled,) if fire.cancels else ())  # bare (S-020)


@st.composite
def fuzz_batches(draw: st.DrawFn) -> tuple[Fire, int, list[tuple[str, bool]]]:
    fire = draw(st.sampled_from(Fire))
    names = sorted(BEHAVIOURS)
    if fire is Fire.ABORT_AND_CANCEL:
        names.remove(GROUP_WITH_ERROR)  # decision 19, pinned by test_decision_19_*
    tools = draw(st.lists(st.tuples(st.sampled_from(names), st.booleans()), min_size=2, max_size=6))
    return fire, draw(st.integers(2, 4)), tools


@given(fuzz_batches())
def test_fuzzed_batches_record_the_same_on_both_paths(
    batch: tuple[Fire, int, list[tuple[str, bool]]],
) -> None:
    """S-016, S-020, C-028 with mixed bodies, parallel and exclusive calls and a rolling
    pool: the shared scope and the forced per-call path record the same results, post
    hooks, contexts and exceptions."""
    fire, max_parallel, tools = batch
    seen: list[Seen] = []
    for force in (False, True):
        with pytest.MonkeyPatch.context() as patch:
            spy = PathSpy(force_per_call=force).install(patch)
            seen.append(trio.run(partial(Harness(tools).run, fire, max_parallel=max_parallel)))
            if force:
                assert spy.shared == []
    shared, per_call = seen
    assert shared == per_call


def _nested_cases() -> list[Any]:
    # GROUP_WITH_ERROR differs between the paths here (decision 19, see test_decision_19_*).
    return [pytest.param(b, id=b) for b in MID_BODY if b != GROUP_WITH_ERROR]


async def _nested_run(
    behaviour: str, *, force_per_call: bool
) -> tuple[Seen, dict[str, ToolResult]]:
    """Two composite calls, each running two leaf calls of ``behaviour`` as a sub-batch that
    shares the batch Abort (S-043 with ``abort=ctx.abort``); the Abort fires mid-leaf."""
    leaves = Harness([(behaviour, True), (behaviour, True)])
    runtime = leaves.runtime
    sub_results: dict[str, ToolResult] = {}

    async def composite(args: JsonValue, ctx: ToolRunContext) -> object:
        sub = RecordingSink()
        try:
            await run_tool_calls(
                runtime,
                calls(*(f"t{i}:{ctx.call_id}.{i}" for i in (1, 2))),
                abort=ctx.abort,
                parent=ctx.token,
                root_call_id=ctx.root_call_id,
                max_parallel=2,
                sink=sub,
            )
        finally:
            sub_results.update(
                (e.call.call_id, e.result) for e in sub.events if isinstance(e, CallCommitted)
            )
        return "composite done"

    runtime.register(
        ToolDefinition(
            name="comp",
            description="runs a sub-batch",
            parameters={},
            output=output(),
            execute=composite,
            is_concurrency_safe=True,
        )
    )
    with pytest.MonkeyPatch.context() as patch:
        spy = PathSpy(force_per_call=force_per_call).install(patch)
        seen = await leaves.run(Fire.ABORT, max_parallel=2, batch=calls("comp:c1", "comp:c2"))
    if not force_per_call:
        assert sorted(spy.shared) == ["c1", "c1.1", "c1.2", "c2", "c2.1", "c2.2"]
    return seen, sub_results


@pytest.mark.parametrize("behaviour", _nested_cases())
async def test_s043_a_sub_batch_sharing_the_abort_gives_the_per_call_results(
    behaviour: str,
) -> None:
    """S-043, C-028: shared scopes nest (a sub-batch's inside its composite call's); one
    Abort cancels both levels and every call gets the per-call path's result."""
    shared, shared_leaves = await _nested_run(behaviour, force_per_call=False)
    per_call, per_call_leaves = await _nested_run(behaviour, force_per_call=True)
    assert shared_leaves == per_call_leaves
    assert shared == per_call
    assert shared.results == {"c1": aborted(), "c2": aborted()}


# -- decision 19: a body's error arriving with the Abort's Cancelled --------------------------

_NURSERY_ERROR = "Exceptions from Trio nursery (1 sub-exception)"


async def test_decision_19_a_grouped_body_error_is_kept_when_the_caller_is_cancelled_too() -> None:
    """A body's own nursery raises the Abort's ``Cancelled`` with a ``ValueError`` while the
    caller is cancelled as well. The shared path keeps the body's error (C-010: any error
    beats cancellation), as it does when only the Abort fires. The per-call scope cannot:
    trio hands the group to the caller's cancelled scope, so the call ends as ``ABORTED``.
    Either way one bare ``Cancelled`` leaves the batch and no post hook runs."""
    shared, _ = await observe_route(Route.SHARED, GROUP_WITH_ERROR, Fire.ABORT_AND_CANCEL)
    per_call, _ = await observe_route(Route.PER_CALL, GROUP_WITH_ERROR, Fire.ABORT_AND_CANCEL)
    # The body's error with its deferred context, as with the Abort alone (decision 20).
    assert shared.results == {
        "c1": failure(_NURSERY_ERROR, None, (context_of("c1"),)),
        "c2": failure(_NURSERY_ERROR, None, (context_of("c2"),)),
    }
    assert per_call.results == {
        "c1": aborted((context_of("c1"),)),
        "c2": aborted((context_of("c2"),)),
    }
    assert shared.raised == per_call.raised == (trio.Cancelled,)
    assert shared.post == per_call.post == {}


async def test_decision_19_a_sub_batch_sharing_the_abort_keeps_a_grouped_body_error() -> None:
    """S-043 with decision 19: a composite tool runs a sub-batch with ``abort=ctx.abort``;
    firing the Abort also cancels the composite's scope around the sub-batch. The leaves'
    grouped errors are kept on the shared path; the per-call path reports them ``ABORTED``.
    The composite calls themselves are ``ABORTED`` on both paths."""
    shared, shared_leaves = await _nested_run(GROUP_WITH_ERROR, force_per_call=False)
    per_call, per_call_leaves = await _nested_run(GROUP_WITH_ERROR, force_per_call=True)
    leaves = ("c1.1", "c1.2", "c2.1", "c2.2")
    assert shared_leaves == {
        leaf: failure(_NURSERY_ERROR, None, (context_of(leaf),)) for leaf in leaves
    }
    assert per_call_leaves == {leaf: aborted((context_of(leaf),)) for leaf in leaves}
    assert shared == per_call
    assert shared.results == {"c1": aborted(), "c2": aborted()}


async def _wrapped_calls(*, force_per_call: bool) -> list[str]:
    """Three parallel calls; ``c2``'s pre hook registers a wrapper: the calls it wraps."""
    runtime = ToolRuntime()
    runtime.register(behaving_tool("t", "returns_at_once", Gates()))
    wrapped: list[str] = []

    async def wrapper(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        wrapped.append(execution.call_id)
        return await call_next()

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        if execution.call_id == "c2":
            # Synchronous, in the driver's task: c1's dispatch task has not run yet.
            runtime.wrap_execute(wrapper)
        return await call_next()

    runtime.on_pre_execute(pre)
    with pytest.MonkeyPatch.context() as patch:
        PathSpy(force_per_call=force_per_call).install(patch)
        await run_tool_calls(runtime, calls("t:c1", "t:c2", "t:c3"), max_parallel=3)
    return sorted(wrapped)


async def test_stage_2_of_a_shared_call_starts_when_its_dispatch_task_runs() -> None:
    """The ``tools/execute`` list is snapshotted when stage 2 starts (runtime.md §6), and
    stage 2 runs in the call's dispatch task (scheduler.md §3). A wrapper registered by the
    next call's pre hook, after ``c1`` was handed to its dispatch task but before that task
    ran, wraps ``c1`` on the per-call path; the shared path must not differ."""
    seen = [await _wrapped_calls(force_per_call=force) for force in (False, True)]
    shared, per_call = seen
    assert per_call == ["c1", "c2", "c3"]
    assert shared == per_call


# -- 3. wrappers never see the Abort's Cancelled -------------------------------------------


async def test_c012_a_wrapper_never_sees_the_abort_while_siblings_overlap(spy: PathSpy) -> None:
    """C-012 with two overlapping calls: the bodies get the Abort's Cancelled, the wrappers
    around them do not (their own scopes untouched, their code after ``call_next()`` runs,
    a checkpoint there raises nothing), and both calls are ``ABORTED``."""
    gates = Gates()
    runtime = ToolRuntime()
    runtime.register(behaving_tool("t", "parks", gates))
    after: list[tuple[str, bool, bool]] = []

    async def wrapper(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        with trio.CancelScope() as scope:
            result = await call_next()
        await trio.lowlevel.checkpoint()  # would raise if the wrapper sat in a cancelled scope
        after.append((execution.call_id, scope.cancel_called, scope.cancelled_caught))
        return result

    runtime.wrap_execute(wrapper)
    abort = Abort()
    async with trio.open_nursery() as nursery:
        box: list[Any] = []

        async def go() -> None:
            box.append(
                await run_tool_calls(runtime, calls("t:c1", "t:c2"), abort=abort, max_parallel=2)
            )

        nursery.start_soon(go)
        await wait_blocked()
        assert spy.asked == ["c1", "c2"]  # the shared nursery was open, and declined
        abort.abort()
    assert spy.shared == []
    assert sorted(spy.per_call) == ["c1", "c2"]
    assert sorted(after) == [("c1", False, False), ("c2", False, False)]
    [outcome] = box
    assert [c.result for c in outcome.results] == [
        aborted((context_of("c1"),)),
        aborted((context_of("c2"),)),
    ]


# -- 4. native cancellation of the caller --------------------------------------------------


@pytest.mark.parametrize("fire", [Fire.CANCEL, Fire.ABORT_AND_CANCEL], ids=lambda f: f.value)
async def test_s020_caller_cancelled_while_bodies_run_in_the_shared_scope(
    spy: PathSpy, fire: Fire
) -> None:
    """S-020 (and C-021 per call): the bodies drain, every started call gets exactly one
    ``ABORTED``, the unstarted call a synthetic pair, then one bare ``Cancelled`` reaches
    the cancelled scope. With the Abort fired at the same moment, nothing changes."""
    harness = Harness([("parks", True), ("parks", True), ("parks", True)])
    sink_steps: list[str] = []
    sink = RecordingSink()
    abort = Abort()
    raised: list[BaseException] = []

    async def go() -> None:
        try:
            await run_tool_calls(
                harness.runtime, harness.calls, abort=abort, max_parallel=2, sink=sink
            )
        except BaseException as exc:
            raised.append(exc)
            raise

    with trio.CancelScope() as caller:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(go)
            await wait_blocked()
            assert spy.shared == ["c1", "c2"]
            if fire.aborts:
                abort.abort()
            caller.cancel()
    assert caller.cancelled_caught
    assert [type(e) for e in raised] == [trio.Cancelled]  # bare, not a group
    for event in sink.events:
        if isinstance(event, CallStarted | CallCommitted):
            synthetic = " synthetic" if event.synthetic else ""
            sink_steps.append(f"{type(event).__name__} {event.call.call_id}{synthetic}")
    assert sink_steps == [
        "CallStarted c1",
        "CallStarted c2",
        "CallCommitted c1",
        "CallCommitted c2",
        "CallStarted c3 synthetic",
        "CallCommitted c3 synthetic",
    ]
    committed = [e for e in sink.events if isinstance(e, CallCommitted)]
    assert [e.result for e in committed] == [
        aborted((context_of("c1"),)),
        aborted((context_of("c2"),)),
        aborted_before_dispatch(),
    ]
    assert harness.observed == {"c1": committed[0].result, "c2": committed[1].result}
    assert harness.post == {}
    assert [e.message for e in sink.events if isinstance(e, ContextAccepted)] == [
        context_of("c1"),
        context_of("c2"),
    ]


# -- 5. internal failure while the shared nursery is open ----------------------------------


class FailingSink:
    """A recording sink whose ``on_call`` for ``call_id`` raises ``error`` (a sink bug)."""

    def __init__(self, call_id: str, error: Exception) -> None:
        self.events: list[CallStarted | CallCommitted | ContextAccepted] = []
        self.call_id = call_id
        self.error = error

    def on_call(self, event: CallStarted) -> None:
        self.events.append(event)
        if event.call.call_id == self.call_id:
            raise self.error

    def on_result(self, event: CallCommitted) -> None:
        self.events.append(event)

    def on_context(self, event: ContextAccepted) -> None:
        self.events.append(event)


async def test_s019_failure_with_the_shared_nursery_open_and_nothing_in_it(
    spy: PathSpy, autojump_clock: trio.testing.MockClock
) -> None:
    """S-019: the first ``on_call`` fails right after the shared nursery opened; the batch
    closes it and raises the failure alone (a host left open would hang the batch: the
    deadline turns that into a failure in virtual time)."""
    harness = Harness([("parks", True), ("parks", True)])
    failure_ = RuntimeError("on_call failed")
    sink = FailingSink("c1", failure_)
    with trio.fail_after(60), pytest.raises(RuntimeError) as info:
        await run_tool_calls(harness.runtime, harness.calls, max_parallel=2, sink=sink)
    assert info.value is failure_
    assert (spy.asked, spy.per_call) == ([], [])
    assert [type(e).__name__ for e in sink.events] == ["CallStarted"]
    assert trio.current_time() == 0


async def test_s019_failure_waits_for_the_shared_bodies_without_cancelling_them(
    spy: PathSpy, autojump_clock: trio.testing.MockClock
) -> None:
    """S-019 / §8 steps 2–5 with bodies in the shared nursery: ``c3``'s ``on_call`` fails
    while ``c2`` runs; nothing more starts, ``c2`` is neither cancelled nor aborted and is
    awaited, and then the failure alone is raised."""
    gates = Gates()
    steps: list[str] = []
    runtime = ToolRuntime()

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        steps.append(f"{ctx.call_id} start")
        try:
            await gates.wait(ctx.call_id)
        except trio.Cancelled:  # pragma: no cover - the failure must not cancel a body
            steps.append(f"{ctx.call_id} cancelled")
            raise
        steps.append(f"{ctx.call_id} end")
        return ctx.call_id

    runtime.register(
        ToolDefinition(
            name="t",
            description="t",
            parameters={},
            output=output(),
            execute=body,
            is_concurrency_safe=True,
        )
    )
    failure_ = RuntimeError("on_call failed")
    sink = FailingSink("c3", failure_)
    box: list[BaseException] = []
    batch = calls("t:c1", "t:c2", "t:c3", "t:c4")
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:

            async def go() -> None:
                try:
                    await run_tool_calls(runtime, batch, max_parallel=2, sink=sink)
                except RuntimeError as exc:
                    box.append(exc)

            nursery.start_soon(go)
            await wait_blocked()
            assert spy.shared == ["c1", "c2"]
            gates.release("c1")  # c1 commits, c3 starts: its on_call fails
            await wait_blocked()
            assert box == []  # c2 still runs in the shared nursery: no return yet
            assert sorted(steps) == ["c1 end", "c1 start", "c2 start"]
            await trio.sleep(10)
            assert box == []
            gates.release("c2")
    assert box == [failure_]
    assert sorted(steps[:3]) == ["c1 end", "c1 start", "c2 start"]
    assert steps[3:] == ["c2 end"]  # not cancelled: it ran to its own end
    assert spy.shared == ["c1", "c2"]  # c3 was not dispatched, c4 never started
    assert [(type(e).__name__, e.call.call_id) for e in sink.events] == [
        ("CallStarted", "c1"),
        ("CallStarted", "c2"),
        ("CallCommitted", "c1"),
        ("CallStarted", "c3"),
    ]
    assert trio.current_time() == 10


async def test_s019_a_shared_stage_bug_is_the_failure_and_siblings_drain(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    """S-019: a shared-scope stage raising (a ``lowlevel`` bug) is an internal failure:
    raised alone, after the sibling in the same nursery has ended on its own."""
    gates = Gates()
    bug = RuntimeError("dispatch stage bug")

    def buggy(step: ReadyToDispatch) -> Stage | None:
        stage = _real_shared(step)
        if step.execution.call_id != "c1" or stage is None:
            return stage
        stage.close()  # never started: c1's body does not run

        async def fail() -> NeedsFinalize | NeedsFinish:
            await gates.wait("bug")
            raise bug

        return fail()

    monkeypatch.setattr(dsh_sched._driver, "dispatch_in_abort_scope", buggy)
    harness = Harness([("parks", True), ("shielded_then_returns", True)])
    box: list[BaseException] = []
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:

            async def go() -> None:
                try:
                    await run_tool_calls(harness.runtime, harness.calls, max_parallel=2)
                except RuntimeError as exc:
                    box.append(exc)

            nursery.start_soon(go)
            await wait_blocked()
            gates.release("bug")
            await wait_blocked()
            assert box == []  # c2 still runs: the failure waits for it
            harness.gates.release("shield")
    assert box == [bug]
    assert harness.post == {}  # nothing more committed


# -- 6. lowlevel.dispatch_in_abort_scope -------------------------------------------------


def unit_runtime(behaviour: str = "returns_at_once", gates: Gates | None = None) -> ToolRuntime:
    runtime = ToolRuntime()
    runtime.register(behaving_tool("t1", behaviour, Gates() if gates is None else gates))
    return runtime


async def ready(runtime: ToolRuntime, **options: Any) -> ReadyToDispatch:
    execution = lowlevel.create(runtime, ToolCall(call_id="c1", name="t1", arguments={}, **options))
    step = await lowlevel.prepare(execution)
    assert isinstance(step, ReadyToDispatch)
    return step


async def run_shared(stage: Stage, abort: Abort) -> NeedsFinalize | NeedsFinish:
    """Await ``stage`` the way the driver does: a task of a nursery inside the abort scope."""
    box: list[NeedsFinalize | NeedsFinish | ReadyToDispatch] = []

    async def task() -> None:
        box.append(await stage)

    with abort.move_on_abort():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(task)
    [step] = box
    assert not isinstance(step, ReadyToDispatch)  # no wrapper was registered meanwhile
    return step


@pytest.mark.parametrize("step", ["step", None, 3])
def test_dispatch_in_abort_scope_rejects_what_is_not_a_ready_step(step: object) -> None:
    with pytest.raises(TypeError) as info:
        lowlevel.dispatch_in_abort_scope(step)  # type: ignore[arg-type]
    assert "expects a ReadyToDispatch" in str(info.value)
    assert str(info.value).endswith(f"got {type(step).__name__}")


async def test_dispatch_in_abort_scope_rejects_a_later_state() -> None:
    runtime = unit_runtime()
    step = await lowlevel.dispatch(await ready(runtime))
    with pytest.raises(TypeError) as info:
        lowlevel.dispatch_in_abort_scope(step)  # type: ignore[arg-type]
    assert str(info.value).endswith("got NeedsFinalize")


async def test_p063_a_step_already_dispatched_is_not_ready() -> None:
    """P-063 for the shared stage: once stage 2 started, by either entry point, the same
    ``ReadyToDispatch`` is refused with ``execution is not ready for dispatch``."""
    runtime = unit_runtime()
    step = await ready(runtime)
    stage = lowlevel.dispatch_in_abort_scope(step)
    assert stage is not None
    with pytest.raises(RuntimeError, match=exactly("execution is not ready for dispatch")):
        lowlevel.dispatch_in_abort_scope(step)
    with pytest.raises(RuntimeError, match=exactly("execution is not ready for dispatch")):
        await lowlevel.dispatch(step)
    done = await run_shared(stage, step.execution.abort)
    assert isinstance(done, NeedsFinalize)
    with pytest.raises(RuntimeError, match=exactly("execution is not ready for dispatch")):
        lowlevel.dispatch_in_abort_scope(step)

    other = await ready(runtime)
    await lowlevel.dispatch(other)
    with pytest.raises(RuntimeError, match=exactly("execution is not ready for dispatch")):
        lowlevel.dispatch_in_abort_scope(other)


async def test_dispatch_in_abort_scope_declines_when_a_wrapper_applies() -> None:
    """``None`` and the execution untouched: ``lowlevel.dispatch`` then runs it, wrapped."""
    runtime = unit_runtime()
    wrapped: list[str] = []

    async def wrapper(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        wrapped.append(execution.call_id)
        return await call_next()

    dispose = runtime.wrap_execute(wrapper)
    step = await ready(runtime)
    assert lowlevel.dispatch_in_abort_scope(step) is None
    assert lowlevel.dispatch_in_abort_scope(step) is None  # still ready
    done = await lowlevel.dispatch(step)
    assert isinstance(done, NeedsFinalize)
    assert done.result.value == "done"
    assert wrapped == ["c1"]
    dispose()
    stage = lowlevel.dispatch_in_abort_scope(await ready(runtime))
    assert stage is not None  # the wrapper list is read when stage 2 starts
    assert isinstance(await run_shared(stage, Abort()), NeedsFinalize)
    assert wrapped == ["c1"]


def is_cancellation(exc: BaseException) -> bool:
    """``Cancelled``, or a group of ``Cancelled`` and ``Exception``s (runtime.md §8.4)."""
    if isinstance(exc, trio.Cancelled):
        return True
    if not isinstance(exc, BaseExceptionGroup):
        return False
    cancelled, rest = exc.split(trio.Cancelled)
    return cancelled is not None and (rest is None or rest.split(Exception)[1] is None)


def _stage_view(step: NeedsFinalize | NeedsFinish) -> tuple[str, ToolResult]:
    return type(step).__name__, step.result


@pytest.mark.parametrize("fails", [False, True], ids=["returns", "raises"])
async def test_p063_the_shared_stage_returns_what_dispatch_returns(fails: bool) -> None:
    """P-063: a body that ends by itself gives the same state and, through ``finalize``,
    the same observed result on both entry points; its run context is inactive after both."""
    views: list[tuple[str, ToolResult]] = []
    finalized: list[ToolResult] = []
    contexts: list[ToolRunContext] = []
    for shared in (True, False):
        runtime = ToolRuntime()

        async def body(args: JsonValue, ctx: ToolRunContext) -> object:
            contexts.append(ctx)
            ctx.defer_context(context_of(ctx.call_id))
            ctx.conclude_turn()
            if fails:
                raise ValueError("body failed")
            return "value"

        runtime.register(
            ToolDefinition(
                name="t1", description="t1", parameters={}, output=output(), execute=body
            )
        )
        step = await ready(runtime)
        if shared:
            stage = lowlevel.dispatch_in_abort_scope(step)
            assert stage is not None
            done = await run_shared(stage, step.execution.abort)
        else:
            done = await lowlevel.dispatch(step)
        views.append(_stage_view(done))
        # Inactive when stage 2 ends (runtime.md §7.4), not only once stage 4 ran.
        with pytest.raises(RuntimeError):
            contexts[-1].defer_context(context_of("late"))
        assert isinstance(done, NeedsFinalize)
        finalized.append(await lowlevel.finalize(done))
    assert views[0] == views[1]
    assert finalized[0] == finalized[1]
    if fails:
        assert views[0] == ("NeedsFinalize", failure("body failed", None, (context_of("c1"),)))
    else:
        assert views[0] == (
            "NeedsFinalize",
            ToolResult(
                is_error=False,
                content=(TextContent("value"),),
                value="value",
                additional_contexts=(context_of("c1"),),
                concludes_turn=True,
            ),
        )
    assert len(contexts) == 2


async def test_the_shared_stage_checks_d1_and_the_live_tool_like_dispatch() -> None:
    """Check D1 (an Abort fired after prepare) and a tool disposed after prepare: the body
    never runs, and the state equals ``dispatch``'s."""
    views: list[list[tuple[str, ToolResult]]] = []
    runs: list[str] = []
    for shared in (True, False):
        runtime = ToolRuntime()

        async def body(args: JsonValue, ctx: ToolRunContext) -> object:
            runs.append(ctx.call_id)  # pragma: no cover - must not run
            return "ran"  # pragma: no cover

        dispose = runtime.register(
            ToolDefinition(
                name="t1", description="t1", parameters={}, output=output(), execute=body
            )
        )
        abort = Abort()
        fired = await ready(runtime, abort=abort)
        abort.abort("after prepare")
        gone = await ready(runtime)
        dispose()
        view: list[tuple[str, ToolResult]] = []
        for step in (fired, gone):
            if shared:
                stage = lowlevel.dispatch_in_abort_scope(step)
                assert stage is not None
                view.append(_stage_view(await run_shared(stage, step.execution.abort)))
            else:
                view.append(_stage_view(await lowlevel.dispatch(step)))
        views.append(view)
    assert runs == []
    assert views[0] == views[1]
    assert views[0][0] == ("NeedsFinalize", aborted_before_dispatch(reason="after prepare"))
    assert views[0][1][0] == "NeedsFinalize"
    assert views[0][1][1].error is not None
    assert views[0][1][1].error.info == ErrorInfo("ToolNotFoundError", "UNKNOWN_TOOL")


async def lowlevel_outcome(behaviour: str, fire: Fire, *, shared: bool) -> ToolResult:
    """Dispatch one call of ``behaviour`` through one entry point, fire mid-body, and
    return what a driver records for it (§13: ``cancelled_result`` when cancelled)."""
    gates = Gates()
    runtime = unit_runtime(behaviour, gates)
    abort = Abort()
    step = await ready(runtime, abort=abort)
    box: list[NeedsFinalize | NeedsFinish | ReadyToDispatch | BaseException] = []

    async def task(stage: Stage) -> None:
        try:
            box.append(await stage)
        except BaseException as exc:
            box.append(exc)

    with trio.CancelScope() as caller:
        if shared:
            stage = lowlevel.dispatch_in_abort_scope(step)
            assert stage is not None
            with abort.move_on_abort():
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(task, stage)
                    await fire.once_parked(abort, caller, gates)
        else:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(task, lowlevel.dispatch(step))
                await fire.once_parked(abort, caller, gates)
    [outcome] = box
    execution = step.execution
    if isinstance(outcome, BaseException):
        # Only the caller's cancellation may escape a stage (§7.4, §8.4).
        assert fire.cancels, outcome
        assert is_cancellation(outcome), outcome
        return lowlevel.cancelled_result(execution)
    assert not isinstance(outcome, ReadyToDispatch)  # no wrapper was registered meanwhile
    if fire.cancels:
        return lowlevel.cancelled_result(execution, outcome.result)
    return outcome.result


@pytest.mark.parametrize(("behaviour", "fire"), _cases())
async def test_c031_the_shared_stage_records_what_dispatch_records(
    behaviour: str, fire: Fire
) -> None:
    """C-010, C-012, C-019, C-021, C-031 at the stage level: awaited in a nursery inside
    ``abort.move_on_abort()``, the shared stage leaves a driver the same result as
    ``dispatch`` does: returned, or ``cancelled_result`` of what it held when cancelled."""
    shared = await lowlevel_outcome(behaviour, fire, shared=True)
    per_call = await lowlevel_outcome(behaviour, fire, shared=False)
    assert shared == per_call
    assert shared == expected(behaviour, fire, 1)


class _Halt(BaseException):
    """A non-``Exception`` error, like ``KeyboardInterrupt`` but inert to trio."""


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "per-call"])
async def test_decision_20_a_grouped_base_exception_still_propagates(shared: bool) -> None:
    """§8.4 / decision 20: when the body's nursery raises the Abort's ``Cancelled`` with a
    non-``Exception`` error, the ``Cancelled`` is taken out and the rest propagates from
    the stage (no result): only an ``Exception`` rest becomes the body's error."""

    runtime = ToolRuntime()
    runtime.register(
        ToolDefinition(
            name="t1",
            description="d",
            parameters={},
            output=output(),
            execute=failing_nursery_body(_Halt),
        )
    )
    abort = Abort()
    step = await ready(runtime, abort=abort)
    escaped: list[BaseException] = []

    async def task(stage: Stage) -> None:
        try:
            await stage
        except BaseException as exc:
            escaped.append(exc)

    if shared:
        stage = lowlevel.dispatch_in_abort_scope(step)
        assert stage is not None
        with abort.move_on_abort():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(task, stage)
                await trio.testing.wait_all_tasks_blocked()
                abort.abort()
    else:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(task, lowlevel.dispatch(step))
            await trio.testing.wait_all_tasks_blocked()
            abort.abort()
    [exc] = escaped
    assert isinstance(exc, BaseExceptionGroup)
    assert not isinstance(exc, Exception)
    assert exc.split(_Halt)[1] is None  # nothing but the _Halt is left


async def test_c021_the_callers_cancellation_escapes_the_shared_stage() -> None:
    """C-021: without the Abort, the shared stage does not absorb a ``Cancelled``: it is the
    caller's, and ``cancelled_result`` then gives ``ABORTED`` (the body started)."""
    runtime = unit_runtime("parks")
    step = await ready(runtime)
    stage = lowlevel.dispatch_in_abort_scope(step)
    assert stage is not None
    escaped: list[BaseException] = []

    async def task() -> None:
        try:
            await stage
        except BaseException as exc:
            escaped.append(exc)
            raise

    with trio.CancelScope() as caller, step.execution.abort.move_on_abort() as abort_scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(task)
            await wait_blocked()
            caller.cancel()
    assert caller.cancelled_caught
    assert not abort_scope.cancelled_caught
    assert [type(e) for e in escaped] == [trio.Cancelled]
    assert lowlevel.cancelled_result(step.execution) == aborted((context_of("c1"),))


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "per-call"])
async def test_c023_check_d2_stops_a_cancelled_caller_before_the_body(shared: bool) -> None:
    """Check D2 (and C-023 for stage 2): the caller's scope is already cancelled when the
    stage starts: ``Cancelled`` is raised before the body, which never starts, and the
    driver's ``cancelled_result`` is ``ABORTED_BEFORE_DISPATCH``, on both entry points."""
    runs: list[str] = []
    runtime = ToolRuntime()

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        runs.append(ctx.call_id)  # pragma: no cover - must not run
        return "ran"  # pragma: no cover

    runtime.register(
        ToolDefinition(name="t1", description="t1", parameters={}, output=output(), execute=body)
    )
    step = await ready(runtime)
    escaped: list[BaseException] = []

    async def task(stage: Stage) -> None:
        try:
            await stage
        except BaseException as exc:
            escaped.append(exc)
            raise

    with trio.CancelScope() as caller:
        caller.cancel()
        if shared:
            stage = lowlevel.dispatch_in_abort_scope(step)
            assert stage is not None
            with step.execution.abort.move_on_abort():
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(task, stage)
        else:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(task, lowlevel.dispatch(step))
    assert caller.cancelled_caught
    assert [type(e) for e in escaped] == [trio.Cancelled]
    assert runs == []
    assert lowlevel.cancelled_result(step.execution) == aborted_before_dispatch()


async def test_c028_one_shared_scope_cancels_every_body_of_its_abort() -> None:
    """C-028: three calls of one Abort in one nursery under its scope: firing it once
    cancels all three bodies, and each stage returns its own ``ABORTED``."""
    gates = Gates()
    runtime = unit_runtime("parks", gates)
    abort = Abort()
    steps = []
    for i in range(3):
        execution = lowlevel.create(
            runtime, ToolCall(call_id=f"c{i}", name="t1", arguments={}, abort=abort)
        )
        step = await lowlevel.prepare(execution)
        assert isinstance(step, ReadyToDispatch)
        steps.append(step)
    done: dict[str, NeedsFinalize | NeedsFinish] = {}

    async def task(stage: Stage, call_id: str) -> None:
        outcome = await stage
        assert not isinstance(outcome, ReadyToDispatch)  # no wrapper was registered meanwhile
        done[call_id] = outcome

    with abort.move_on_abort() as scope:
        async with trio.open_nursery() as nursery:
            for step in steps:
                stage = lowlevel.dispatch_in_abort_scope(step)
                assert stage is not None
                nursery.start_soon(task, stage, step.execution.call_id)
            await wait_blocked()
            abort.abort("all")
    assert scope.cancel_called
    assert {k: _stage_view(v) for k, v in done.items()} == {
        f"c{i}": ("NeedsFinalize", aborted((context_of(f"c{i}"),), reason="all")) for i in range(3)
    }


async def test_a_wrapper_registered_before_the_shared_stage_runs_hands_the_call_back() -> None:
    """Stage 2 starts when the shared coroutine runs (runtime.md §6: the wrapper list is
    snapshotted then). A wrapper registered after ``dispatch_in_abort_scope`` returned but
    before its coroutine ran: the coroutine dispatches nothing and returns the step itself,
    still ready, and ``dispatch`` then runs the call wrapped, outside the shared scope."""
    runtime = unit_runtime()
    step = await ready(runtime)
    stage = lowlevel.dispatch_in_abort_scope(step)
    assert stage is not None
    wrapped: list[str] = []

    async def wrapper(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
        wrapped.append(execution.call_id)
        return await call_next()

    runtime.wrap_execute(wrapper)
    box: list[NeedsFinalize | NeedsFinish | ReadyToDispatch] = []

    async def task() -> None:
        box.append(await stage)

    with step.execution.abort.move_on_abort():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(task)
    assert box == [step]
    assert wrapped == []
    # Still ready, and a wrapper applies now: the shared path declines it outright.
    assert lowlevel.dispatch_in_abort_scope(step) is None
    finished = await lowlevel.dispatch(step)
    assert wrapped == ["c1"]
    assert isinstance(finished, NeedsFinalize)
    assert finished.result.value == "done"

"""``execute()``'s two paths give one behaviour (runtime.md §7, §8, §13).

``ToolRuntime.execute()`` runs a call through a fused fast path when nothing can intervene
before the body (no scope, no stage-0 error, no pre-execute hook, guard or ``tools/execute``
wrapper), and through the ``lowlevel`` stages otherwise. The specification allows no
difference: ``execute()`` *is* ``create``, ``prepare``, ``dispatch``, ``finalize``/``finish``
run back to back, followed by one schedule point (§13).

The differential test here runs each generated scenario twice on fresh runtimes, once with
``runtime.execute`` and once with :func:`staged_execute` (the driver of the
``dsh_tools.lowlevel`` docstring, which never takes the fast path), and compares everything
a user can observe: the body's steps, hook, finalizer and observer calls with the results
they received, logged observer failures, what escaped ``execute()`` and the final result.
The scenario strategy is specific to this comparison, so it lives here rather than in
``tests/strategies.py``.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal, TypeAlias, cast, get_args

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import dsh_tools._body  # only to break the success step of every path
import dsh_tools._execute  # only to spy on which path execute() takes
from dsh_tools import (
    Abort,
    Accept,
    Allow,
    Block,
    CallNext,
    Disposer,
    HarnessError,
    JsonValue,
    PostDecision,
    PostExecuteHook,
    PreDecision,
    ResultObserver,
    TextContent,
    ToolCall,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    UserMessage,
    lowlevel,
)
from dsh_tools.lowlevel import NeedsFinalize, ReadyToDispatch
from tests.pipeline_helpers import raw_tool

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

# -- the reference driver -----------------------------------------------------------------


def is_native_cancellation(exc: BaseException) -> bool:
    """§8.4: ``trio.Cancelled``, or a group holding one and no non-``Exception`` besides."""
    if isinstance(exc, trio.Cancelled):
        return True
    if not isinstance(exc, BaseExceptionGroup) or isinstance(exc, Exception):
        return False
    rest = exc.split(lambda e: isinstance(e, trio.Cancelled | Exception))[1]
    return rest is None and exc.subgroup(trio.Cancelled) is not None


async def staged_execute(runtime: ToolRuntime, call: ToolCall) -> ToolResult:
    """``execute()`` as the ``dsh_tools.lowlevel`` docstring spells it: the stages in order,
    ``finish(execution, cancelled_result(execution, r))`` on native cancellation, then one
    schedule point."""
    execution = lowlevel.create(runtime, call)
    held: ToolResult | None = None
    try:
        step = await lowlevel.prepare(execution)
        if isinstance(step, ReadyToDispatch):
            step = await lowlevel.dispatch(step)
        held = step.result
        if isinstance(step, NeedsFinalize):
            result = await lowlevel.finalize(step)
        else:
            result = lowlevel.finish(step.execution, step.result)
    except BaseException as exc:
        if is_native_cancellation(exc):
            lowlevel.finish(execution, lowlevel.cancelled_result(execution, held))
        raise
    await trio.lowlevel.cancel_shielded_checkpoint()
    return result


@contextmanager
def fast_path_spy() -> Iterator[list[ToolExecution]]:
    """Record each execution ``execute()`` runs on its fast path (``unhooked()`` said yes)."""
    taken: list[ToolExecution] = []
    # Whatever execute() consults now (a module global of _execute, looked up per call).
    original: Callable[[ToolExecution], bool] = vars(dsh_tools._execute)["unhooked"]

    def spy(execution: ToolExecution) -> bool:
        fast = original(execution)
        if fast:
            taken.append(execution)
        return fast

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dsh_tools._execute, "unhooked", spy)
        yield taken


# -- scenarios ----------------------------------------------------------------------------

BodyStep: TypeAlias = Literal[
    "defer",  # ctx.defer_context(...)
    "defer_bad",  # a context whose text is not lossless (stage 4 turns it into an error)
    "conclude",  # ctx.conclude_turn()
    "checkpoint",  # a schedule point (a cancelled scope raises here)
    "fire_abort",  # the body fires its own Abort
    "park",  # wait for the controller; a Cancelled propagates
    "park_swallow",  # ... catch the Cancelled and go on
    "park_raise",  # ... turn the Cancelled into an Exception
    "park_shielded",  # ... in a shielded scope: cancellation is ignored
    "park_nursery",  # ... in the body's own nursery, next to a parked child
    "park_nursery_failing",  # ... whose child turns its Cancelled into an Exception
    "register_post",  # a post-execute hook registered from inside the body
    "register_observer",  # a result observer registered from inside the body
    "register_gates",  # a pre hook, a guard and a wrapper: too late for this call
    "dispose_tool",  # the body disposes its own tool
    "stash_ctx",  # keep the context, to probe it after dispatch
]
Ending: TypeAlias = Literal[
    "valid", "invalid", "not_lossless", "raise", "raise_harness", "interrupt"
]
Moment: TypeAlias = Literal["never", "before", "parked"]
PostKind: TypeAlias = Literal[
    "delegate",
    "accept",
    "accept_context",
    "accept_content",
    "accept_value",
    "block",
    "raise",
    "bad_return",
    "interrupt",
]
Wait: TypeAlias = Literal["none", "checkpoint", "park"]
Finalizer: TypeAlias = Literal["none", "keep", "replace", "raise"]
FailingObserver: TypeAlias = Literal["none", "exception", "interrupt"]

BODY_STEPS: tuple[BodyStep, ...] = get_args(BodyStep)
ENDINGS: tuple[Ending, ...] = get_args(Ending)
MOMENTS: tuple[Moment, ...] = get_args(Moment)
POST_KINDS: tuple[PostKind, ...] = get_args(PostKind)
WAITS: tuple[Wait, ...] = get_args(Wait)
FINALIZERS: tuple[Finalizer, ...] = get_args(Finalizer)
FAILING_OBSERVERS: tuple[FailingObserver, ...] = get_args(FailingObserver)


@attrs.frozen
class PostSpec:
    """One post-execute hook registered before the call."""

    kind: PostKind
    wait: Wait = "none"
    fires_abort: bool = False


@attrs.frozen(kw_only=True)
class Scenario:
    """One call and everything around it."""

    known_tool: bool = True
    lossless_args: bool = True
    steps: tuple[BodyStep, ...] = ()
    ending: Ending = "valid"
    abort: Moment = "never"
    cancel: Moment = "never"
    posts: tuple[PostSpec, ...] = ()
    finalizer: Finalizer = "none"
    observers: int = 1
    #: A last observer that raises an ``Exception`` (logged) or an ``Interrupt``.
    failing_observer: FailingObserver = "none"
    #: A pre hook, a guard and a wrapper registered and disposed before the call.
    disposed_gates: bool = False

    @property
    def takes_fast_path(self) -> bool:
        return self.lossless_args


def _mostly(value: bool) -> st.SearchStrategy[bool]:
    return st.sampled_from([value, value, value, not value])


post_specs = st.builds(
    PostSpec,
    kind=st.sampled_from(POST_KINDS),
    wait=st.sampled_from(WAITS),
    fires_abort=_mostly(False),
)

scenarios = st.builds(
    Scenario,
    known_tool=_mostly(True),
    lossless_args=_mostly(True),
    steps=st.lists(st.sampled_from(BODY_STEPS), max_size=5).map(tuple),
    ending=st.sampled_from(ENDINGS),
    abort=st.sampled_from(MOMENTS),
    cancel=st.sampled_from(MOMENTS),
    posts=st.lists(post_specs, max_size=2).map(tuple),
    finalizer=st.sampled_from(FINALIZERS),
    observers=st.integers(0, 2),
    failing_observer=st.sampled_from(["none", "none", "none", *FAILING_OBSERVERS[1:]]),
    disposed_gates=_mostly(False),
)


# -- running a scenario -------------------------------------------------------------------

Event: TypeAlias = tuple[object, ...]


class Interrupt(BaseException):
    """A non-``Exception`` that is not cancellation: propagates at once (§8.4)."""


def _message(text: str) -> UserMessage:
    # A fixed id: two runs of one scenario must build equal contexts.
    return UserMessage(content=[TextContent(text)], id=f"id-{text}")


def _describe(exc: BaseException) -> object:
    if isinstance(exc, BaseExceptionGroup):
        return ("group", sorted(repr(_describe(e)) for e in exc.exceptions))
    if isinstance(exc, trio.Cancelled):
        return "Cancelled"
    return (type(exc).__name__, str(exc))


def _snapshot(result: ToolResult) -> Event:
    return (
        result.to_json(),
        result.is_error,
        result.value,
        result.concludes_turn,
        result.additional_contexts,
    )


class _Recorder(logging.Handler):
    def __init__(self, trace: list[Event]) -> None:
        super().__init__()
        self.trace = trace

    def emit(self, record: logging.LogRecord) -> None:
        self.trace.append(("log", record.levelname, record.getMessage()))


@attrs.define
class _Env:
    """One run's live objects: the trace and what the body and hooks share."""

    scenario: Scenario
    runtime: ToolRuntime
    trace: list[Event] = attrs.Factory(list)
    release: trio.Event = attrs.Factory(trio.Event)
    stash: list[ToolRunContext] = attrs.Factory(list)
    results_seen: list[ToolResult] = attrs.Factory(list)
    tool_disposer: Disposer | None = None

    def probe(self, where: str) -> None:
        """Record whether a stashed run context still accepts actions (§2.4: it must not
        once dispatch ended)."""
        if not self.stash:
            return
        try:
            self.stash[0].defer_context(_message("late"))
        except RuntimeError as exc:
            self.trace.append((where, "ctx", str(exc)))
        else:
            self.trace.append((where, "ctx", "still active"))

    async def park(self) -> None:
        await self.release.wait()

    # -- the tool body --

    async def body(self, args: JsonValue, ctx: ToolRunContext) -> object:
        trace = self.trace
        for step in self.scenario.steps:
            trace.append(("body", step))
            await self.step(step, ctx)
        ending = self.scenario.ending
        trace.append(("body", ending))
        if ending == "valid":
            return "done"
        if ending == "invalid":
            return 42  # the output schema wants a string
        if ending == "not_lossless":
            return float("nan")
        if ending == "raise":
            raise ValueError("body failed")
        if ending == "raise_harness":
            raise HarnessError("body failed with a code", "BODY_FAILURE")
        raise Interrupt("body interrupted")

    async def step(self, step: BodyStep, ctx: ToolRunContext) -> None:
        trace = self.trace
        runtime = self.runtime
        if step == "defer":
            ctx.defer_context(_message(f"deferred-{len(trace)}"))
        elif step == "defer_bad":
            ctx.defer_context(UserMessage(content=[TextContent("\ud800")], id="id-bad"))
        elif step == "conclude":
            ctx.conclude_turn()
        elif step == "checkpoint":
            await trio.lowlevel.checkpoint()
        elif step == "fire_abort":
            ctx.abort.abort("fired by the body")
        elif step == "park":
            await self.park()
        elif step == "park_swallow":
            try:
                await self.park()
            except trio.Cancelled:
                trace.append(("body", "swallowed Cancelled"))
        elif step == "park_raise":
            try:
                await self.park()
            except trio.Cancelled:
                raise RuntimeError("body cancelled") from None
        elif step == "park_shielded":
            with trio.CancelScope(shield=True):
                await self.park()
        elif step in ("park_nursery", "park_nursery_failing"):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.child, step == "park_nursery_failing")
                await self.park()
        elif step == "register_post":
            runtime.on_post_execute(self.post_hook("body-post", PostSpec("accept_context")))
        elif step == "register_observer":
            runtime.on_result(self.observer("body-observer"))
        elif step == "register_gates":
            runtime.on_pre_execute(self.late_pre)
            runtime.guard(self.late_guard)
            runtime.wrap_execute(self.late_wrapper)
        elif step == "dispose_tool":
            assert self.tool_disposer is not None
            self.tool_disposer()
        else:
            assert step == "stash_ctx"
            self.stash.append(ctx)

    async def child(self, failing: bool) -> None:
        try:
            await self.park()
        except trio.Cancelled:
            if failing:
                raise ValueError("child cancelled") from None
            raise

    # -- gates registered too late: they must not run for this call --

    async def late_pre(
        self, execution: ToolExecution, call_next: CallNext[PreDecision]
    ) -> PreDecision:
        self.trace.append(("late pre",))  # pragma: no cover - must not run
        return Allow()  # pragma: no cover

    def late_guard(self, execution: ToolExecution) -> str | None:
        self.trace.append(("late guard",))  # pragma: no cover - must not run
        return None  # pragma: no cover

    async def late_wrapper(
        self, execution: ToolExecution, call_next: CallNext[ToolResult]
    ) -> ToolResult:
        self.trace.append(("late wrapper",))  # pragma: no cover - must not run
        return await call_next()  # pragma: no cover

    # -- post hooks, finalizer, observers --

    def post_hook(self, name: str, spec: PostSpec) -> PostExecuteHook:
        async def post(
            execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
        ) -> PostDecision:
            self.trace.append(("post", name, execution.abort.aborted, *_snapshot(result)))
            self.probe(name)
            if spec.fires_abort:
                execution.abort.abort(f"fired by {name}")
            if spec.wait == "checkpoint":
                await trio.lowlevel.checkpoint()
            elif spec.wait == "park":
                await self.park()
            self.trace.append(("post", name, "decides", spec.kind))
            kind = spec.kind
            if kind == "delegate":
                return await call_next()
            if kind == "accept":
                return Accept()
            if kind == "accept_context":
                return Accept(additional_contexts=[_message(f"from-{name}")])
            if kind == "accept_content":
                return Accept(content=[TextContent(f"content of {name}")])
            if kind == "accept_value":
                return Accept(value=f"value of {name}")
            if kind == "block":
                return Block(
                    [TextContent(f"blocked by {name}")],
                    additional_contexts=[_message(f"block-{name}")],
                )
            if kind == "raise":
                raise HarnessError(f"{name} failed", "POST_FAILURE")
            if kind == "bad_return":
                return cast("PostDecision", None)
            raise Interrupt(f"{name} interrupted")

        return post

    def finalize_content(self, execution: ToolExecution, result: ToolResult) -> object:
        self.trace.append(("finalize_content", *_snapshot(result)))
        self.probe("finalize_content")
        kind = self.scenario.finalizer
        if kind == "keep":
            return None
        if kind == "replace":
            return [TextContent("finalized")]
        raise RuntimeError("finalizer failed")

    def observer(self, name: str) -> ResultObserver:
        def observe(execution: ToolExecution, result: ToolResult) -> None:
            self.trace.append(
                ("observer", name, execution.call_id, execution.arguments, *_snapshot(result))
            )
            self.results_seen.append(result)

        return observe

    def failing(self, execution: ToolExecution, result: ToolResult) -> None:
        self.trace.append(("observer", "failing"))
        if self.scenario.failing_observer == "interrupt":
            raise Interrupt("observer interrupted")
        raise RuntimeError("observer failed")


Driver: TypeAlias = Literal["execute", "staged"]


def _install(env: _Env) -> None:
    scenario = env.scenario
    runtime = env.runtime
    defn = raw_tool(
        "echo",
        env.body,
        finalize_content=None if scenario.finalizer == "none" else env.finalize_content,
    )
    env.tool_disposer = runtime.register(defn)
    if scenario.disposed_gates:
        runtime.on_pre_execute(env.late_pre)()
        runtime.guard(env.late_guard)()
        runtime.wrap_execute(env.late_wrapper)()
    for i, spec in enumerate(scenario.posts):
        runtime.on_post_execute(env.post_hook(f"post-{i}", spec))
    for i in range(scenario.observers):
        runtime.on_result(env.observer(f"observer-{i}"))
    if scenario.failing_observer != "none":
        runtime.on_result(env.failing)


async def run_scenario(scenario: Scenario, driver: Driver) -> list[Event]:
    """Run one scenario with ``driver`` on a fresh runtime; return its trace."""
    env = _Env(scenario, ToolRuntime())
    _install(env)
    trace = env.trace
    abort = Abort()
    call = ToolCall(
        call_id="c1",
        name="echo" if scenario.known_tool else "missing",
        arguments={"text": "hi"} if scenario.lossless_args else {"text": float("nan")},
        abort=abort,
    )
    if scenario.abort == "before":
        abort.abort("fired before execute")
    caller = trio.CancelScope()
    if scenario.cancel == "before":
        caller.cancel()

    async def run() -> None:
        with caller:
            try:
                if driver == "execute":
                    result = await env.runtime.execute(call)
                else:
                    result = await staged_execute(env.runtime, call)
            except BaseException as exc:
                # Record what escaped and absorb it here: the trace is the comparison.
                trace.append(("escaped", _describe(exc)))
                return
            trace.append(("returned", *_snapshot(result)))
            seen = env.results_seen
            trace.append(("observers got the returned object", all(r is result for r in seen)))

    async def controller() -> None:
        # Act once, at the first moment the call is parked (or after it ended), then let
        # every park go on: deterministic whatever the body does.
        await trio.testing.wait_all_tasks_blocked()
        trace.append(("controller",))
        if scenario.abort == "parked":
            abort.abort("fired while parked")
        if scenario.cancel == "parked":
            caller.cancel()
        env.release.set()

    handler = _Recorder(trace)
    logger = logging.getLogger("dsh_tools")
    logger.addHandler(handler)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            nursery.start_soon(controller)
    finally:
        logger.removeHandler(handler)
    env.probe("after the call")
    return trace


def run_both(scenario: Scenario) -> tuple[list[Event], list[Event], int]:
    """Both traces, and how many times the ``execute`` run took the fast path."""
    with fast_path_spy() as taken:
        via_execute = trio.run(run_scenario, scenario, "execute")
        fast = len(taken)
        via_stages = trio.run(run_scenario, scenario, "staged")
        assert len(taken) == fast, "the staged driver must never take the fast path"
    return via_execute, via_stages, fast


# -- the differential property ------------------------------------------------------------


# Two runs of a scenario take about a millisecond: afford many more than the profile's.
@settings(max_examples=10 * settings().max_examples)
@given(scenarios)
def test_p063_execute_is_the_staged_pipeline(scenario: Scenario) -> None:
    """P-063, §13: ``execute()`` (fast path or not) is observably the ``lowlevel`` stages run
    back to back: same body steps, hook/finalizer/observer calls with the same results, the
    same escaping exception (C-021, C-023, C-024, C-030) and the same final result, under
    aborts before dispatch (C-015, C-016), from the body (C-019) or mid-body (C-012, C-014)."""
    via_execute, via_stages, fast = run_both(scenario)
    assert fast == int(scenario.takes_fast_path)
    assert via_execute == via_stages


# Hand-picked corners, so each runs on every test run whatever Hypothesis draws.
CORNERS = {
    "plain": Scenario(),
    "deferred contexts": Scenario(steps=("defer", "conclude", "defer")),
    "abort fired by the body": Scenario(steps=("defer", "fire_abort")),
    "abort while parked": Scenario(steps=("defer", "park"), abort="parked"),
    "abort ignored by a shielded body": Scenario(steps=("defer", "park_shielded"), abort="parked"),
    "abort swallowed": Scenario(steps=("park_swallow", "defer"), abort="parked"),
    "abort turned into an error": Scenario(steps=("park_raise",), abort="parked"),
    "abort in the body's nursery": Scenario(steps=("park_nursery",), abort="parked"),
    "abort and a failing child": Scenario(
        steps=("defer", "park_nursery_failing"),
        abort="parked",
        posts=(PostSpec("accept_context"),),
    ),
    "pre-fired abort": Scenario(
        abort="before", finalizer="replace", posts=(PostSpec("accept_context"),)
    ),
    "caller already cancelled": Scenario(cancel="before", finalizer="keep"),
    "caller cancelled mid-body": Scenario(steps=("defer", "park"), cancel="parked"),
    "caller cancelled, body swallows": Scenario(
        steps=("defer", "park_swallow"), cancel="parked", posts=(PostSpec("accept", "park"),)
    ),
    "caller cancelled in the body's nursery": Scenario(
        steps=("park_nursery_failing",), cancel="parked"
    ),
    "caller cancelled during post on an error": Scenario(
        ending="invalid", posts=(PostSpec("accept", "park"),), cancel="parked"
    ),
    "caller cancelled during post on a success": Scenario(
        steps=("defer",), posts=(PostSpec("delegate", "park"),), cancel="parked"
    ),
    "post hook registered by the body": Scenario(steps=("defer", "register_post")),
    "post hook registered by the body, then abort": Scenario(steps=("register_post", "fire_abort")),
    "observer registered by the body": Scenario(steps=("register_observer",)),
    "gates registered by the body": Scenario(steps=("register_gates",)),
    "abort from a post hook (check G)": Scenario(
        steps=("defer",), posts=(PostSpec("accept_context", fires_abort=True),)
    ),
    "post blocks": Scenario(steps=("defer",), posts=(PostSpec("block"),)),
    "post replaces the value of a disposed tool": Scenario(
        steps=("dispose_tool",), posts=(PostSpec("accept_value"),)
    ),
    "stashed context probed": Scenario(
        steps=("stash_ctx",), posts=(PostSpec("delegate"),), finalizer="keep"
    ),
    "non-lossless context": Scenario(steps=("defer_bad",)),
    "non-lossless value": Scenario(ending="not_lossless"),
    "body error with a code": Scenario(steps=("defer",), ending="raise_harness"),
    "body interrupted": Scenario(ending="interrupt"),
    "post interrupted": Scenario(posts=(PostSpec("interrupt"),)),
    "failing observer": Scenario(failing_observer="exception", observers=2),
    "interrupting observer": Scenario(failing_observer="interrupt", posts=(PostSpec("accept"),)),
    "unknown tool": Scenario(known_tool=False, finalizer="keep"),
    "non-lossless arguments": Scenario(lossless_args=False, abort="before", finalizer="keep"),
    "gates registered then disposed": Scenario(disposed_gates=True, steps=("defer",)),
}


@pytest.mark.parametrize("scenario", list(CORNERS.values()), ids=list(CORNERS))
def test_p063_execute_is_the_staged_pipeline_in_corners(scenario: Scenario) -> None:
    """P-063, §13: the same comparison on hand-picked corners (C-012, C-014, C-019, C-021,
    C-023, C-024, C-030, P-039, P-057)."""
    via_execute, via_stages, fast = run_both(scenario)
    assert fast == int(scenario.takes_fast_path)
    assert via_execute == via_stages


def test_the_comparison_sees_the_call() -> None:
    """The traces hold what the comparison relies on: a broken harness cannot pass by
    recording nothing."""
    scenario = Scenario(
        steps=("defer", "stash_ctx", "register_post"),
        posts=(PostSpec("delegate"),),
        finalizer="keep",
        observers=1,
    )
    trace, _, fast = run_both(scenario)
    assert fast == 1
    deferred = _message("deferred-1")
    kinds = [event[0] for event in trace]
    assert kinds == [
        "body",  # defer
        "body",  # stash_ctx
        "body",  # register_post
        "body",  # valid
        "post",  # post-0 sees the dispatch result
        "post-0",  # its probe of the stashed context
        "post",  # post-0 decides
        "post",  # body-post (registered by the body) sees it too
        "body-post",
        "post",
        "finalize_content",
        "finalize_content",
        "observer",
        "returned",
        "observers got the returned object",
        "controller",
        "after the call",
    ]
    returned = trace[kinds.index("returned")]
    assert returned[2:] == (False, "done", False, (deferred, _message("from-body-post")))
    assert trace[kinds.index("post-0")] == (
        "post-0",
        "ctx",
        "tool call context is no longer active",
    )
    assert trace[-1] == ("after the call", "ctx", "tool call context is no longer active")


# -- which path execute() takes -----------------------------------------------------------


async def _pass_pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
    return await call_next()


def _pass_guard(execution: ToolExecution) -> str | None:
    return None


async def _pass_wrapper(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
    return await call_next()


async def _accept(
    execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
) -> PostDecision:
    return Accept(additional_contexts=[_message("post")])


def _ignore(execution: ToolExecution, result: ToolResult) -> None:
    return None


def _gates_on_a_scope(runtime: ToolRuntime) -> None:
    scope = runtime.open_scope(name="other")
    scope.on_pre_execute(_pass_pre)
    scope.guard(_pass_guard)
    scope.wrap_execute(_pass_wrapper)


def _gates_disposed(runtime: ToolRuntime) -> None:
    runtime.on_pre_execute(_pass_pre)()
    runtime.guard(_pass_guard)()
    runtime.wrap_execute(_pass_wrapper)()


def _post_and_observer(runtime: ToolRuntime) -> None:
    runtime.on_post_execute(_accept)
    runtime.on_result(_ignore)


FAST: dict[str, Callable[[ToolRuntime], None]] = {
    "nothing registered": lambda runtime: None,
    "post hook and observer": _post_and_observer,
    "gates on another scope": _gates_on_a_scope,
    "gates registered then disposed": _gates_disposed,
}


@pytest.mark.parametrize("setup", list(FAST.values()), ids=list(FAST))
async def test_c033_fast_path_taken_without_pre_guard_or_wrapper(
    setup: Callable[[ToolRuntime], None],
) -> None:
    """§7, C-033: a scope-less call with no global pre hook, guard or wrapper takes the fast
    path (post hooks and observers do not prevent it); it is still a checkpoint and gives
    what the staged driver gives."""
    results: list[ToolResult] = []
    for driver in ("execute", "staged"):
        runtime = ToolRuntime()
        runtime.register(raw_tool())
        setup(runtime)
        call = ToolCall(call_id="c1", name="echo", arguments={"text": "hi"})
        with fast_path_spy() as taken, trio.testing.assert_checkpoints():
            if driver == "execute":
                results.append(await runtime.execute(call))
            else:
                results.append(await staged_execute(runtime, call))
        assert len(taken) == (driver == "execute")
    via_execute, via_stages = results
    assert via_execute.value == "hi"
    assert via_execute == via_stages


def _scoped(runtime: ToolRuntime) -> ToolCall:
    return ToolCall(call_id="c1", name="echo", scope=runtime.open_scope())


def _with_pre(runtime: ToolRuntime) -> ToolCall:
    runtime.on_pre_execute(_pass_pre)
    return ToolCall(call_id="c1", name="echo")


def _with_guard(runtime: ToolRuntime) -> ToolCall:
    runtime.guard(_pass_guard)
    return ToolCall(call_id="c1", name="echo")


def _with_wrapper(runtime: ToolRuntime) -> ToolCall:
    runtime.wrap_execute(_pass_wrapper)
    return ToolCall(call_id="c1", name="echo")


def _not_lossless(runtime: ToolRuntime) -> ToolCall:
    return ToolCall(call_id="c1", name="echo", arguments={"text": float("nan")})


SLOW: dict[str, Callable[[ToolRuntime], ToolCall]] = {
    "a scope": _scoped,
    "a pre hook": _with_pre,
    "a guard": _with_guard,
    "a wrapper": _with_wrapper,
    "non-lossless arguments": _not_lossless,
}


@pytest.mark.parametrize("setup", list(SLOW.values()), ids=list(SLOW))
async def test_c033_fast_path_not_taken_when_something_can_intervene(
    setup: Callable[[ToolRuntime], ToolCall],
) -> None:
    """§7, C-033: a scope, a global pre hook, guard or wrapper, or a stage-0 failure sends
    ``execute()`` through the stages; still one checkpoint, and the staged driver's result."""
    results: list[ToolResult] = []
    for driver in ("execute", "staged"):
        runtime = ToolRuntime()
        runtime.register(raw_tool())
        call = setup(runtime)
        with fast_path_spy() as taken, trio.testing.assert_checkpoints():
            if driver == "execute":
                results.append(await runtime.execute(call))
            else:
                results.append(await staged_execute(runtime, call))
        assert taken == []
    via_execute, via_stages = results
    assert via_execute == via_stages
    if setup is _not_lossless:
        assert via_execute.is_error
    else:
        assert via_execute.value == ""


@pytest.mark.parametrize("fast", [True, False], ids=["execute", "staged"])
async def test_p063_an_unexpected_failure_building_the_success_is_final_on_both_paths(
    fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug after the body returned (here: building its success raises something other
    than ``ToolOutputError``) is what ``dispatch()`` makes a final result: an error result,
    no post-execute, the observers see it. The fast path agrees."""
    bug = RuntimeError("success builder bug")

    def broken(*args: object) -> ToolResult:
        raise bug

    monkeypatch.setattr(dsh_tools._body, "build_success", broken)
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    posted: list[str] = []
    observed: list[ToolResult] = []

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        posted.append(execution.call_id)
        return await call_next()

    runtime.on_post_execute(post)  # a post hook leaves execute() on its fast path
    runtime.on_result(lambda execution, result: observed.append(result))
    call = ToolCall(call_id="c1", name="echo", arguments={"text": "hi"})
    with fast_path_spy() as taken:
        if fast:
            result = await runtime.execute(call)
        else:
            result = await staged_execute(runtime, call)
    assert len(taken) == int(fast)
    assert result.is_error
    assert result.error is not None
    assert result.error.message == "success builder bug"
    assert posted == []
    assert observed == [result]


async def test_p063_an_unexpected_failure_building_the_success_is_final_in_the_shared_scope(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same bug on the scheduler's shared-scope path (``dispatch_in_abort_scope``):
    stage 2 ends with a final result (``NeedsFinish``), like the other two paths, since all
    three build the success in the same body step."""
    bug = RuntimeError("success builder bug")

    def broken(*args: object) -> ToolResult:
        raise bug

    monkeypatch.setattr(dsh_tools._body, "build_success", broken)
    runtime = ToolRuntime()
    runtime.register(raw_tool())
    call = ToolCall(call_id="c1", name="echo", arguments={"text": "hi"})
    execution = lowlevel.create(runtime, call)
    step = await lowlevel.prepare(execution)
    assert type(step) is ReadyToDispatch
    stage = lowlevel.dispatch_in_abort_scope(step)
    assert stage is not None
    with execution.abort.move_on_abort():
        done = await stage
    assert type(done) is lowlevel.NeedsFinish
    assert done.result.error is not None
    assert done.result.error.message == "success builder bug"
    assert lowlevel.finish(execution, done.result) is done.result

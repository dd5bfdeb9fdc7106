"""Hypothesis strategies and a runner for fuzzing tool sets against the trace invariants.

Importing this module needs ``hypothesis``; nothing else in ``dsh_sched`` does. Reach it
through ``dsh_sched.testing`` (for example ``from dsh_sched.testing import scenarios``).

Two ways to fuzz:

- :func:`scenarios` generates everything (tools, classifiers, bodies, hooks, calls,
  ``max_parallel``, abort/cancel moments, sink failures); :func:`run_scenario` runs one and
  :func:`check_scenario_run` checks it.
- For your own tools: register ``recorder.instrument(defn)`` on a runtime with a
  :class:`~dsh_sched.testing.TraceRecorder`, draw calls with :func:`model_tool_calls` and
  moments with :func:`moments`, and run :func:`run_checked`.

Run each example under ``trio.testing.MockClock(autojump_threshold=0)``: every run of a
:class:`Scenario` from :func:`scenarios` is then deterministic (the same trace and the same
outcome every time), and the moments below are virtual seconds.

Timing. trio runs the tasks that are ready in one scheduling round in a random order, and
tasks whose waits end at the same virtual time are ready together; so a generated scenario
keeps apart every two tasks whose order would show in the trace or the outcome:

- The driver's waits end on the half-second grid: ``sleep`` hooks wait until a half
  second, and a pacing pre-execute hook, the innermost, waits for the next one before
  every dispatch. So the driver dispatches at most one body per instant, and each body's
  first steps run alone.
- Each body's waits end on its own lane: the grid shifted by an odd number of 64ths of a
  second (128ths beyond 16 calls, and so on), one lane per dispatched call. Bodies start
  on the grid, so a body waits its ``delay`` plus its lane. A body cancelled together with
  others waits, shielded, for its lane's next point before it ends: each reacts at its own
  time.
- Injected moments are odd multiples of 1/8 s, off the grid and every lane, with one phase
  per kind so that two never coincide: the batch ``Abort`` fires at ``k/2 + 1/4``, the
  scope is cancelled at ``k/2 + 1/8`` and the block raises at ``k/2 + 3/8`` (``k`` from 0
  to 7). A moment of ``0.0`` means "before the batch starts": it is applied before the
  batch is entered, not raced against it.

What else is ready at one of these instants (the driver reacting to a cancellation, the
block reading the iteration, trio's own tasks) records nothing or is the only task that
records. :func:`run_checked` with your own tools is as deterministic as your tools are.
"""

from __future__ import annotations

import json
import math
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, final

import attrs
import trio
from hypothesis import strategies as st

from dsh_tools import (
    ABORTED,
    Abort,
    Ask,
    Block,
    Deny,
    Output,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolResult,
    ToolRuntime,
    UserMessage,
)

from ._batch import open_batch
from ._calls import ModelToolCall, parse_arguments
from ._outcome import BatchOutcome, CommittedCall
from ._trace import TraceEvent, TraceRecorder, check_trace

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from dsh_tools import (
        CallNext,
        Disposer,
        ExecutionToken,
        JsonValue,
        PostDecision,
        PreDecision,
        Scope,
        ToolExecution,
        ToolRunContext,
    )

    from ._sinks import CallCommitted, CallStarted, ContextAccepted, Sink

__all__ = [
    "FuzzInterrupt",
    "HookSpec",
    "Scenario",
    "ScenarioRun",
    "SinkFailure",
    "ToolSpec",
    "build_runtime",
    "check_scenario_run",
    "hook_specs",
    "model_tool_calls",
    "moments",
    "run_checked",
    "run_scenario",
    "scenarios",
    "tool_specs",
]

Classifier: TypeAlias = Literal["parallel", "exclusive", "raises", "by_argument"]
BodyKind: TypeAlias = Literal[
    "instant", "sleep", "raise", "swallow_cancel", "shielded", "abort_batch", "interrupt"
]
HookStage: TypeAlias = Literal["pre", "post", "observer"]
HookAction: TypeAlias = Literal["deny", "ask", "raise", "sleep", "block", "flip"]

#: Body and hook delays: whole numbers of grid steps.
_DELAYS = (0.0, 0.5, 1.0, 2.0, 3.0)
#: The grid the driver's waits end on (virtual seconds); lanes and phases are fractions of it.
_STEP = 0.5
#: Where in each half second the injected moments of each kind fall: multiples of 1/8, so
#: never on the grid (0) nor on a lane (an odd number of 64ths, or finer).
_ABORT_PHASE = 0.25
_CANCEL_PHASE = 0.125
_BLOCK_PHASE = 0.375


class FuzzInterrupt(BaseException):
    """A ``KeyboardInterrupt`` stand-in raised by ``interrupt`` bodies.

    Not an ``Exception`` and not ``Cancelled``: the batch treats it as native cancellation
    (scheduler.md §9), without disturbing the test runner the way a real
    ``KeyboardInterrupt`` would.
    """


class SinkFailure(Exception):
    """Raised by the scenario's failing sink: an internal failure of the batch (§8)."""


class BlockError(Exception):
    """Raised by the ``async with open_batch`` block of a scenario (scheduler.md §9)."""


@final
@attrs.frozen(kw_only=True)
class ToolSpec:
    """One generated tool.

    Attributes:
        name: Its name.
        classifier: ``parallel`` / ``exclusive`` (a ``bool``), ``raises`` (a classifier
            that raises, so ``EXCLUSIVE``) or ``by_argument`` (``PARALLEL`` exactly when the
            arguments are an object with ``"parallel": true``).
        body: ``instant``, ``sleep`` (``delay`` seconds), ``raise`` (after ``delay``),
            ``swallow_cancel`` (catches ``Cancelled`` and returns), ``shielded`` (sleeps in
            a shielded scope), ``abort_batch`` (fires the batch ``Abort`` and returns),
            ``interrupt`` (raises :class:`FuzzInterrupt` after ``delay``).
        delay: Virtual seconds the body waits, at least: the wait ends on the call's lane
            (see the module docstring), and a cancelled wait ends at its next lane point.
        contexts: How many contexts the body defers (0–2).
        concludes: Whether the body concludes the turn.
    """

    name: str
    classifier: Classifier
    body: BodyKind
    delay: float
    contexts: int
    concludes: bool


@final
@attrs.frozen(kw_only=True)
class HookSpec:
    """One generated hook, acting only on calls of ``tool``.

    ``flip`` (any stage) re-registers ``tool`` with the opposite fixed classification: a
    registry change that live reclassification must see. ``sleep`` makes the stage slow.
    ``deny``/``ask``/``raise`` are pre-execute decisions (``ask`` with no approval service
    is a denial); ``block``/``raise`` are post-execute decisions. A ``sleep`` waits at least
    ``delay`` virtual seconds, until a half second (the driver's grid).
    """

    stage: HookStage
    action: HookAction
    tool: str
    delay: float


@final
@attrs.frozen(kw_only=True)
class Scenario:
    """Everything one fuzzed batch needs.

    Attributes:
        tools: The tool set.
        hooks: Hooks installed after the recorder's.
        calls: The batch.
        max_parallel: The batch's ``max_parallel``.
        abort_at: When the batch ``Abort`` fires (virtual seconds after the start), or
            never; ``0.0`` fires it before the batch starts.
        cancel_at: When the scope around the batch is cancelled, or never; ``0.0``
            cancels it before the batch starts.
        block_raises_at: With ``open_batch``, when the block raises :class:`BlockError`
            (at once if its iteration ended later; ``0.0``: on entering the block).
        sink_fails_at: The sink event (0-based) whose forwarding raises
            :class:`SinkFailure`, or never.
        iterate: Whether the block iterates the batch (with ``open_batch``).
        keep_results: The batch's ``keep_results``.
        use_open_batch: ``open_batch`` in a block, rather than ``run_tool_calls``.

    Runs are deterministic when no two moments are equal and none falls on the half-second
    grid or on a lane (see the module docstring), as :func:`scenarios` draws them; ``0.0``
    is always safe.
    """

    tools: tuple[ToolSpec, ...]
    hooks: tuple[HookSpec, ...]
    calls: tuple[ModelToolCall, ...]
    max_parallel: int
    abort_at: float | None
    cancel_at: float | None
    block_raises_at: float | None
    sink_fails_at: int | None
    iterate: bool
    keep_results: bool
    use_open_batch: bool


@final
@attrs.frozen(kw_only=True)
class ScenarioRun:
    """What running one batch produced.

    Attributes:
        events: The recorder's trace.
        outcome: The batch's outcome (``None`` unless it finished).
        failure: The internal failure it raised (:class:`SinkFailure`), if any.
        interrupted: The native exception it raised (:class:`FuzzInterrupt`), if any.
        block_error: The :class:`BlockError` it raised, if any.
        cancelled: Whether the enclosing scope absorbed a cancellation.
        iterated: What the block's iteration yielded, or ``None`` if it did not iterate.
        max_parallel: The batch's ``max_parallel``.
        problems: What the run's monitor saw go wrong at ``on_call`` time: a call started
            after the batch ``Abort`` fired (§6), or under a mode other than the one it
            classifies as at that moment (§4.2).
        aborted_at: When the batch ``Abort`` fired (``trio.current_time()``), or ``None``.
    """

    events: tuple[Any, ...]
    outcome: BatchOutcome | None
    failure: SinkFailure | None
    interrupted: FuzzInterrupt | None
    block_error: BlockError | None
    cancelled: bool
    iterated: tuple[CommittedCall, ...] | None
    max_parallel: int
    problems: tuple[str, ...] = ()
    aborted_at: float | None = None


# -- strategies -------------------------------------------------------------------------


def moments(*, phase: float = _ABORT_PHASE) -> st.SearchStrategy[float | None]:
    """``None`` (never), ``0.0`` (before the batch starts) or ``phase + k/2`` for k in 0..7.

    The default phase puts every moment on an odd multiple of a quarter second, strictly
    between the half seconds on which whole-half-second waits end. Give each kind of moment
    its own phase, so that two never coincide: :func:`scenarios` uses 1/4 for the abort,
    1/8 for the cancellation and 3/8 for the block's exception.

    Args:
        phase: Where in each half second the moments fall.

    Raises:
        ValueError: ``phase`` is not strictly between 0 and 0.5.
    """
    if not 0 < phase < _STEP:
        raise ValueError(f"phase must be strictly between 0 and 0.5, got {phase!r}")
    # k = -1 stands for 0.0: "before the batch starts" as often as any one moment.
    return st.one_of(
        st.none(), st.integers(-1, 7).map(lambda k: 0.0 if k < 0 else phase + k * _STEP)
    )


@st.composite
def tool_specs(draw: st.DrawFn, name: str, *, allow_interrupt: bool = True) -> ToolSpec:
    """A generated tool named ``name``.

    Args:
        draw: Supplied by Hypothesis.
        name: The tool's name.
        allow_interrupt: Whether an ``interrupt`` body may be drawn.
    """
    bodies: list[BodyKind] = [
        "instant",
        "sleep",
        "sleep",
        "raise",
        "swallow_cancel",
        "shielded",
        "abort_batch",
    ]
    if allow_interrupt:
        bodies.append("interrupt")
    return ToolSpec(
        name=name,
        classifier=draw(
            st.sampled_from(("parallel", "parallel", "exclusive", "raises", "by_argument"))
        ),
        body=draw(st.sampled_from(bodies)),
        delay=draw(st.sampled_from(_DELAYS)),
        contexts=draw(st.integers(0, 2)),
        concludes=draw(st.booleans()),
    )


def hook_specs(tool_names: Sequence[str]) -> st.SearchStrategy[HookSpec]:
    """A generated hook targeting one of ``tool_names``."""
    pre = st.sampled_from(("deny", "ask", "raise", "sleep", "flip"))
    post = st.sampled_from(("block", "raise", "sleep", "flip"))
    tools = st.sampled_from(tuple(tool_names))
    delays = st.sampled_from(_DELAYS)
    return st.one_of(
        st.builds(HookSpec, stage=st.just("pre"), action=pre, tool=tools, delay=delays),
        st.builds(HookSpec, stage=st.just("post"), action=post, tool=tools, delay=delays),
        st.builds(
            HookSpec, stage=st.just("observer"), action=st.just("flip"), tool=tools, delay=delays
        ),
    )


def _arguments() -> st.SearchStrategy[str | dict[str, Any]]:
    return st.one_of(
        st.just(""),
        st.just("{bad"),
        st.just("NaN"),
        st.just('{"parallel": true}'),
        st.just('{"parallel": false}'),
        st.just("[1, 2]"),
        st.fixed_dictionaries({"parallel": st.booleans()}),
        st.fixed_dictionaries({}, optional={"text": st.text(max_size=3)}),
    )


def model_tool_calls(
    tool_names: Sequence[str], *, max_size: int = 8, unknown: bool = True
) -> st.SearchStrategy[tuple[ModelToolCall, ...]]:
    """A batch of calls to ``tool_names`` (and, if ``unknown``, to a missing tool).

    Arguments are drawn from a small set of raw texts (empty, malformed, ``NaN``, arrays,
    objects with ``"parallel"``) and mappings. Call ids are ``c0``, ``c1``, ...
    """
    names = list(tool_names) + (["missing"] if unknown else [])

    def build(items: list[tuple[str, str | dict[str, Any]]]) -> tuple[ModelToolCall, ...]:
        return tuple(
            ModelToolCall(call_id=f"c{i}", name=name, arguments=arguments)
            for i, (name, arguments) in enumerate(items)
        )

    return st.lists(st.tuples(st.sampled_from(names), _arguments()), max_size=max_size).map(build)


@st.composite
def scenarios(
    draw: st.DrawFn,
    *,
    max_tools: int = 4,
    max_calls: int = 8,
    max_hooks: int = 3,
    allow_interrupt: bool = True,
) -> Scenario:
    """A whole fuzzed batch: tools, hooks, calls, limits, aborts, cancellations, failures.

    Args:
        draw: Supplied by Hypothesis.
        max_tools: The most tools in the tool set.
        max_calls: The most calls in the batch.
        max_hooks: The most generated hooks.
        allow_interrupt: Whether native interruptions (:class:`FuzzInterrupt`) may occur.
    """
    count = draw(st.integers(1, max_tools))
    names = [f"t{i}" for i in range(count)]
    tools = tuple(draw(tool_specs(name, allow_interrupt=allow_interrupt)) for name in names)
    hooks = tuple(draw(st.lists(hook_specs(names), max_size=max_hooks)))
    calls = draw(model_tool_calls(names, max_size=max_calls))
    use_open_batch = draw(st.booleans())
    return Scenario(
        tools=tools,
        hooks=hooks,
        calls=calls,
        max_parallel=draw(st.integers(1, 4)),
        abort_at=draw(moments(phase=_ABORT_PHASE)),
        cancel_at=draw(moments(phase=_CANCEL_PHASE)),
        block_raises_at=draw(moments(phase=_BLOCK_PHASE)) if use_open_batch else None,
        sink_fails_at=draw(st.one_of(st.none(), st.integers(0, 2 * max_calls + 2))),
        iterate=draw(st.booleans()) if use_open_batch else False,
        keep_results=draw(st.booleans()),
        use_open_batch=use_open_batch,
    )


# -- building a runtime from a scenario -------------------------------------------------


def _render(args: JsonValue, value: JsonValue) -> list[TextContent]:
    return [TextContent(json.dumps(value))]


@cache
def _output() -> Output:
    # One immutable Output serves every generated tool.
    return Output(schema={}, render=_render)


def _by_argument(arguments: object) -> bool:
    return isinstance(arguments, dict) and arguments.get("parallel") is True


def _raising_classifier(arguments: object) -> bool:
    raise ValueError("classifier exploded")


def _classifier(kind: Classifier) -> Any:
    if kind == "parallel":
        return True
    if kind == "exclusive":
        return False
    if kind == "raises":
        return _raising_classifier
    return _by_argument


@final
class _Timeline:
    """Where the waits of a scenario's hooks and bodies end (see the module docstring).

    The driver's waits end on the grid ``origin + k * _STEP``; a body's on its call's lane,
    the grid shifted by an odd multiple of ``1/denominator``. :meth:`pace` is the innermost
    pre-execute hook: it gives each call its lane and makes the driver wait for the next grid
    point before every dispatch.

    Args:
        calls: How many calls a batch has: one lane each.
    """

    def __init__(self, calls: int) -> None:
        #: Where the grid starts: the clock's zero, or the start of :func:`run_scenario`.
        self.origin = 0.0
        self._lanes = max(calls, 1)
        # Lanes are odd multiples of 1/denominator below _STEP: with a denominator of 64 or
        # more, never a multiple of 1/8, so never the grid or an injected moment.
        denominator = 64
        while denominator < 4 * self._lanes:
            denominator *= 2
        self._denominator = denominator
        self._paced = 0
        self._lane: dict[ExecutionToken, float] = {}

    def _next(self, phase: float, delay: float) -> float:
        """The first time ``origin + phase + k * _STEP`` at least ``delay`` from now, and later
        than now."""
        now = trio.current_time()
        k = math.ceil((now + delay - self.origin - phase) / _STEP)
        at = self.origin + phase + k * _STEP
        return at if at > now else at + _STEP

    async def pace(self, execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        # Runs in the driver just before the call is dispatched. trio runs the tasks started
        # in one scheduling round in a random order: waiting here lets the body dispatched
        # before this one start alone. Calls are paced in a fixed order, so lanes are too.
        self._lane[execution.token] = (2 * (self._paced % self._lanes) + 1) / self._denominator
        self._paced += 1
        await trio.sleep_until(self._next(0.0, 0.0))
        return await call_next()

    async def hook_sleep(self, delay: float) -> None:
        """Wait at least ``delay``, until a grid point (hooks run in the driver)."""
        await trio.sleep_until(self._next(0.0, delay))

    async def body_sleep(self, token: ExecutionToken, delay: float) -> None:
        """Wait at least ``delay``, until a point of the call's lane.

        Raises:
            trio.Cancelled: At the lane's next point after the cancellation arrived.
        """
        # Every body that reaches a wait was paced first (pace is a global pre-execute hook).
        lane = self._lane[token]
        try:
            await trio.sleep_until(self._next(lane, delay))
        except trio.Cancelled:
            # One cancellation wakes every waiting body in the same round, and trio runs
            # them in a random order: each ends on its own lane instead.
            with trio.CancelScope(shield=True):
                await trio.sleep_until(self._next(lane, 0.0))
            raise


def _body(spec: ToolSpec, timeline: _Timeline) -> Any:
    async def execute(args: JsonValue, ctx: ToolRunContext) -> object:
        for i in range(spec.contexts):
            ctx.defer_context(UserMessage(content=[TextContent(f"{spec.name} context {i}")]))
        if spec.concludes:
            ctx.conclude_turn()
        kind = spec.body
        if kind == "sleep":
            await timeline.body_sleep(ctx.token, spec.delay)
        elif kind == "raise":
            await timeline.body_sleep(ctx.token, spec.delay)
            raise ValueError(f"{spec.name} failed")
        elif kind == "swallow_cancel":
            try:
                await timeline.body_sleep(ctx.token, spec.delay)
            except trio.Cancelled:
                return {"swallowed": spec.name}
        elif kind == "shielded":
            with trio.CancelScope(shield=True):
                await timeline.body_sleep(ctx.token, spec.delay)
        elif kind == "abort_batch":
            ctx.abort.abort("aborted by a body")
        elif kind == "interrupt":
            await timeline.body_sleep(ctx.token, spec.delay)
            raise FuzzInterrupt(spec.name)
        return {"tool": spec.name}

    return execute


@final
class _Tools:
    """The live registrations of a scenario, so hooks can flip a tool's classification."""

    def __init__(
        self,
        runtime: ToolRuntime,
        recorder: TraceRecorder,
        specs: Sequence[ToolSpec],
        timeline: _Timeline,
    ):
        self.runtime = runtime
        self.recorder = recorder
        self.timeline = timeline
        self.specs = {spec.name: spec for spec in specs}
        self.disposers: dict[str, Disposer] = {}
        self.parallel: dict[str, bool] = {}
        for spec in specs:
            self._register(spec.name, _classifier(spec.classifier))

    def _register(self, name: str, classifier: Any) -> None:
        spec = self.specs[name]
        defn = ToolDefinition(
            name=name,
            description=f"generated tool {name}",
            parameters={"type": "object"},
            output=_output(),
            execute=_body(spec, self.timeline),
            is_concurrency_safe=classifier,
        )
        self.disposers[name] = self.runtime.register(self.recorder.instrument(defn))
        self.parallel[name] = classifier is True

    def flip(self, name: str) -> None:
        self.disposers[name]()
        self._register(name, not self.parallel[name])


def _install_hook(spec: HookSpec, runtime: ToolRuntime, tools: _Tools) -> None:
    target = spec.tool
    if spec.stage == "pre":

        async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
            if execution.name != target:
                return await call_next()
            action = spec.action
            if action == "deny":
                return Deny(f"{target} denied")
            if action == "ask":
                return Ask(f"{target} needs approval")
            if action == "raise":
                raise ValueError("pre exploded")
            if action == "sleep":
                await tools.timeline.hook_sleep(spec.delay)
            else:
                tools.flip(target)
            return await call_next()

        runtime.on_pre_execute(pre)
    elif spec.stage == "post":

        async def post(
            execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
        ) -> PostDecision:
            if execution.name != target:
                return await call_next()
            action = spec.action
            if action == "block":
                return Block([TextContent(f"{target} blocked")])
            if action == "raise":
                raise ValueError("post exploded")
            if action == "sleep":
                await tools.timeline.hook_sleep(spec.delay)
            else:
                tools.flip(target)
            return await call_next()

        runtime.on_post_execute(post)
    else:

        def observe(execution: ToolExecution, result: ToolResult) -> None:
            if execution.name == target:
                tools.flip(target)

        runtime.on_result(observe)


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


def _build(scenario: Scenario, sink: Sink | None) -> tuple[ToolRuntime, TraceRecorder, _Timeline]:
    runtime = ToolRuntime()
    recorder = TraceRecorder(runtime, sink=sink)
    timeline = _Timeline(len(scenario.calls))
    tools = _Tools(runtime, recorder, scenario.tools, timeline)
    for hook in scenario.hooks:
        _install_hook(hook, runtime, tools)
    # Registered last, so innermost: it runs just before each dispatch.
    runtime.on_pre_execute(timeline.pace)
    return runtime, recorder, timeline


def build_runtime(
    scenario: Scenario, *, sink: Sink | None = None
) -> tuple[ToolRuntime, TraceRecorder]:
    """A fresh runtime with the scenario's tools (instrumented) and hooks installed.

    The recorder is registered first, so its spans are outermost; it forwards to ``sink``.
    A pacing pre-execute hook is registered last: before each dispatch it waits for the
    next half second of virtual time (counted from 0, where a fresh ``MockClock`` starts),
    so that no two bodies start in the same scheduling round (see the module docstring).
    """
    runtime, recorder, _ = _build(scenario, sink)
    return runtime, recorder


async def run_scenario(scenario: Scenario) -> ScenarioRun:
    """Build and run one scenario, then check it (:func:`check_scenario_run`).

    Run it under ``MockClock(autojump_threshold=0)``, e.g.
    ``trio.run(run_scenario, scenario, clock=MockClock(autojump_threshold=0))``.

    Raises:
        AssertionError: An invariant or an exception rule is violated.
    """
    failing = _FailingSink(scenario.sink_fails_at)
    runtime, recorder, timeline = _build(scenario, failing)
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
    one. ``ignore`` names invariants the check does not report (see :func:`check_trace`:
    ``{"I6"}`` for a tool set whose own code raises ``AbortError``).

    Give the three moments different values that none of your tools' waits ends on (as
    :func:`moments` with a different ``phase`` each does for whole-half-second waits):
    tasks that become ready together run in a random order.

    Raises:
        AssertionError: ``check`` is true and an invariant or an exception rule is violated.
    """
    abort = Abort()
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
        async with trio.open_nursery() as timers:
            timers.start_soon(note_abort)
            if abort_at:
                timers.start_soon(fire_abort, abort_at)
            if cancel_at:
                timers.start_soon(cancel_later, outer, cancel_at)
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

"""Building a runtime from a :class:`~dsh_sched.testing.Scenario`: tools, hooks and pacing.

Each generated tool is registered through a :class:`~dsh_sched.testing.TraceRecorder`'s
``instrument``; its body and the generated hooks wait on the timing model's grid and lanes
(see :mod:`dsh_sched._fuzz_scenario`), so a scenario's run is deterministic under
``MockClock(autojump_threshold=0)``. Nothing here needs ``hypothesis``.
"""

from __future__ import annotations

import json
import math
from functools import cache
from typing import TYPE_CHECKING, Any, final

import trio

from dsh_tools import (
    Ask,
    Block,
    Deny,
    Output,
    TextContent,
    ToolDefinition,
    ToolResult,
    ToolRuntime,
    UserMessage,
)

from ._fuzz_scenario import STEP, Classifier, FuzzInterrupt, HookSpec, Scenario, ToolSpec
from ._trace_recorder import TraceRecorder

if TYPE_CHECKING:
    from collections.abc import Sequence

    from dsh_tools import (
        CallNext,
        Disposer,
        ExecutionToken,
        JsonValue,
        PostDecision,
        PreDecision,
        ToolExecution,
        ToolRunContext,
    )

    from ._sinks import Sink

__all__ = ["Timeline", "build", "build_runtime"]


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
class Timeline:
    """Where the waits of a scenario's hooks and bodies end (see the module docstring).

    The driver's waits end on the grid ``origin + k * STEP``; a body's on its call's lane,
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
        # Lanes are odd multiples of 1/denominator below STEP: with a denominator of 64 or
        # more, never a multiple of 1/8, so never the grid or an injected moment.
        denominator = 64
        while denominator < 4 * self._lanes:
            denominator *= 2
        self._denominator = denominator
        self._paced = 0
        self._lane: dict[ExecutionToken, float] = {}

    def _next(self, phase: float, delay: float) -> float:
        """The first time ``origin + phase + k * STEP`` at least ``delay`` from now, and later
        than now."""
        now = trio.current_time()
        k = math.ceil((now + delay - self.origin - phase) / STEP)
        at = self.origin + phase + k * STEP
        return at if at > now else at + STEP

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


def _body(spec: ToolSpec, timeline: Timeline) -> Any:
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
        timeline: Timeline,
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
            finalize_content=_interrupting_finalizer if spec.finalizer_interrupts else None,
        )
        self.disposers[name] = self.runtime.register(self.recorder.instrument(defn))
        self.parallel[name] = classifier is True

    def flip(self, name: str) -> None:
        self.disposers[name]()
        self._register(name, not self.parallel[name])


def _interrupting_finalizer(execution: ToolExecution, result: ToolResult) -> None:
    # A BaseException out of stage 4: the call must still get its one result.
    raise FuzzInterrupt(f"finalizer of {execution.name}")


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
                if spec.action == "interrupt":
                    raise FuzzInterrupt(f"observer of {target}")
                tools.flip(target)

        runtime.on_result(observe)


def build(scenario: Scenario, sink: Sink | None) -> tuple[ToolRuntime, TraceRecorder, Timeline]:
    runtime = ToolRuntime()
    recorder = TraceRecorder(runtime, sink=sink)
    timeline = Timeline(len(scenario.calls))
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
    runtime, recorder, _ = build(scenario, sink)
    return runtime, recorder

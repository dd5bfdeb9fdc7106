"""L-103: Hypothesis fuzzing of the sub-call lane with ``ScriptedCodeRuntime`` under MockClock.

Each example generates a program (sequential calls, gathered calls, calls left running in
the background when the program ends, sleeps; parallel-safe, exclusive and
argument-classified tools whose bodies are instant, sleeping or raising; pre-execute hooks
that sleep, deny or raise), the pool size, the sub-call limit, how the program ends
(returns or fails) and when the outer ``Abort`` fires or the caller cancels, then checks
the lane's invariants:

- every started sub-call has exactly one start event, one settle event and one result
  notification; refused calls have none;
- starts and settle events follow acceptance order (ids ``<call_id>:code:1, 2, ...``);
- at most ``max_parallel_sub_calls`` bodies run at once, and an exclusive body overlaps no
  other body;
- nothing starts after the program ended or after the outer cancellation;
- every call the program made got its answer (no task is left waiting);
- ``PipelineInvariants`` records no violation.

The number of programs is 1000 in the ``ci`` profile (and in the default one).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_tools import (
    Abort,
    CodeRunFailedError,
    Deny,
    JsonValue,
    Output,
    PreDecision,
    TextContent,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    define_tool,
    thaw_json,
)
from dsh_tools.code import CodeRunLimits, CodeRunOutcome, Dispatch, ToolCallError
from dsh_tools.testing import PipelineInvariants
from tests.code_helpers import code_runtime, run_program

_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev")
#: Programs per run: at least 1000 in CI (L-103); the nightly knob of the scheduler's fuzzing.
EXAMPLES = 20_000 if os.environ.get("DSH_FUZZ_NIGHTLY") == "1" else 1000


@attrs.frozen
class Call:
    """One tool call of a generated program (its arguments tell the body and hooks what
    to do)."""

    tool: str  # "par" (parallel-safe), "exc" (exclusive), "cls" (classified by "p")
    seconds: int
    fail: bool
    deny: bool
    hook_raise: bool
    pre_sleep: bool
    parallel: bool

    def args(self) -> dict[str, object]:
        return {
            "d": self.seconds,
            "fail": self.fail,
            "deny": self.deny,
            "raise": self.hook_raise,
            "pre": self.pre_sleep,
            "p": self.parallel,
        }

    def exclusive(self) -> bool:
        return self.tool == "exc" or (self.tool == "cls" and not self.parallel)


@attrs.frozen
class Program:
    steps: tuple[tuple[str, Any], ...]
    fails: bool
    max_parallel: int
    max_sub_calls: int
    abort_at: float | None
    cancel_at: float | None


_calls = st.builds(
    Call,
    tool=st.sampled_from(["par", "par", "exc", "cls"]),
    seconds=st.integers(0, 3),
    fail=st.booleans(),
    deny=st.integers(0, 6).map(lambda n: n == 0),
    hook_raise=st.integers(0, 6).map(lambda n: n == 0),
    pre_sleep=st.integers(0, 4).map(lambda n: n == 0),
    parallel=st.booleans(),
)
_steps = st.one_of(
    st.tuples(st.just("one"), _calls),
    st.tuples(st.just("gather"), st.lists(_calls, min_size=1, max_size=4).map(tuple)),
    st.tuples(st.just("background"), _calls),
    st.tuples(st.just("sleep"), st.integers(0, 2)),
)
_moments = st.none() | st.integers(0, 16).map(lambda n: n / 2)
programs = st.builds(
    Program,
    steps=st.lists(_steps, min_size=1, max_size=5).map(tuple),
    fails=st.booleans(),
    max_parallel=st.integers(1, 4),
    max_sub_calls=st.integers(2, 12),
    abort_at=_moments,
    cancel_at=_moments,
)


class _State:
    """What one run records, and the violations it found."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.violations: list[str] = []
        self.running = 0
        self.exclusive_running = 0
        self.starts: list[str] = []
        self.settles: list[str] = []
        self.results: dict[str, int] = {}
        self.ended = False
        self.stopped = False
        self.submitted = 0
        self.answered = 0


def _runtime(state: _State, pool: int | None, invariants: PipelineInvariants) -> Any:
    program = state.program

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        async def one(call: Call, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            task_status.started()
            state.submitted += 1
            args = call.args()
            try:
                value = await dispatch(call.tool, args)
            except ToolCallError:
                pass
            else:
                if thaw_json(value) != args:
                    state.violations.append(f"value {value!r} for {args!r}")
            state.answered += 1

        async with trio.open_nursery() as background:
            for kind, payload in program.steps:
                if kind == "one":
                    await one(payload)
                elif kind == "gather":
                    async with trio.open_nursery() as nursery:
                        for call in payload:
                            await nursery.start(one, call)
                elif kind == "background":
                    await background.start(one, payload)
                else:
                    await trio.sleep(payload)
            # The program has ended: a code runtime cancels its own pending calls.
            background.cancel_scope.cancel()
        state.ended = True
        if program.fails:
            raise CodeRunFailedError.for_run("exception", "RuntimeError: end (line 9)")
        return CodeRunOutcome()

    runtime, _ = code_runtime(
        script,
        max_parallel_sub_calls=program.max_parallel if pool is None else pool,
        limits=CodeRunLimits(max_sub_calls=program.max_sub_calls),
    )
    # Installed first, so that its hooks are outermost (a denying hook short-circuits).
    invariants.install(runtime)

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        assert isinstance(args, dict)
        exclusive = ctx.name == "exc" or (ctx.name == "cls" and not args["p"])
        if state.exclusive_running or (exclusive and state.running):
            state.violations.append(f"{ctx.call_id} overlaps an exclusive body")
        state.running += 1
        state.exclusive_running += exclusive
        if state.running > program.max_parallel:
            state.violations.append(f"{state.running} bodies at once")
        try:
            await trio.sleep(args["d"])
        finally:
            state.running -= 1
            state.exclusive_running -= exclusive
        if args["fail"]:
            raise RuntimeError("body failed")
        return args

    output = Output(schema={}, render=lambda args, value: [TextContent("done")])
    for name, classifier in (("par", True), ("exc", False), ("cls", _by_p)):
        runtime.register(
            define_tool(
                name=name,
                description=name,
                parameters={"type": "object"},
                output=output,
                execute=body,
                is_concurrency_safe=classifier,
            )
        )

    async def pre(execution: ToolExecution, call_next: Any) -> PreDecision:
        args = execution.arguments
        if execution.parent is not None and isinstance(args, dict):
            if args["pre"]:
                await trio.sleep(1)
            if args["deny"]:
                return Deny("denied")
            if args["raise"]:
                raise ValueError("hook failed")
        decision: PreDecision = await call_next()
        return decision

    def on_start(event: Any) -> None:
        if state.ended or state.stopped:
            state.violations.append(f"{event.sub_call_id} started after the run was over")
        state.starts.append(event.sub_call_id)

    def on_settle(event: Any) -> None:
        state.settles.append(event.sub_call_id)

    def on_result(execution: ToolExecution, result: ToolResult) -> None:
        state.results[execution.call_id] = state.results.get(execution.call_id, 0) + 1

    runtime.on_pre_execute(pre)
    runtime.on_code_dispatch_start(on_start)
    runtime.on_code_dispatch(on_settle)
    runtime.on_result(on_result)
    return runtime


def _by_p(args: Any) -> bool:
    return bool(args["p"])


def _run(program: Program, *, pool: int | None = None) -> _State:
    state = _State(program)
    invariants = PipelineInvariants()
    runtime = _runtime(state, pool, invariants)
    abort = Abort()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            if program.abort_at is not None:

                async def fire(at: float) -> None:
                    await trio.sleep(at)
                    state.stopped = True
                    abort.abort("stop")

                nursery.start_soon(fire, program.abort_at)
            # A hang would sleep forever: fail in virtual time instead.
            with trio.fail_after(1000):
                cancel = (
                    trio.move_on_after(program.cancel_at)
                    if program.cancel_at is not None
                    else contextlib.nullcontext()
                )
                with cancel:
                    try:
                        await run_program(runtime, abort=abort)
                    except trio.Cancelled:
                        state.stopped = True
                        raise
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    state.violations.extend(invariants.violations)
    return state


def _check(state: _State) -> None:
    assert state.violations == []
    # One start and one settle per started sub-call, both in acceptance order.
    numbers = [int(s.rsplit(":", 1)[1]) for s in state.starts]
    assert numbers == sorted(set(numbers))
    assert state.settles == state.starts
    # One result notification per started sub-call, and for the run itself; none for a
    # refused call (it has no execution).
    assert {k: v for k, v in state.results.items() if k != "c1"} == dict.fromkeys(state.starts, 1)
    assert state.results.get("c1") == 1
    # Every call the program made was answered, unless its task was cancelled first.
    assert state.answered <= state.submitted
    if not state.stopped:
        assert len(state.starts) <= state.program.max_sub_calls


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs)
def test_l103_lane_invariants_hold_for_generated_programs(program: Program) -> None:
    """L-103: see the module docstring."""
    _check(_run(program))


def test_l103_the_checks_catch_a_broken_lane() -> None:
    """The checks are not vacuous: a lane whose pool is larger than the program's bound
    is reported."""
    program = Program(
        steps=(("gather", (Call("par", 1, False, False, False, False, True),) * 3),),
        fails=False,
        max_parallel=2,
        max_sub_calls=10,
        abort_at=None,
        cancel_at=None,
    )
    _check(_run(program))
    state = _run(program, pool=3)
    assert state.violations == ["3 bodies at once"]
    assert state.starts == ["c1:code:1", "c1:code:2", "c1:code:3"]

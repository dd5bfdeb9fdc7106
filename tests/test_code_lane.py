"""The sub-call lane of ``run_code`` (code-mode §5): acceptance, pool, barriers, commits,
settlement and cancellation, driven by ``ScriptedCodeRuntime`` under trio's MockClock."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import trio
import trio.testing

from dsh_tools import (
    Block,
    Deny,
    ExecutionToken,
    JsonValue,
    PostDecision,
    PreDecision,
    TextContent,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    UserMessage,
    thaw_json,
)
from dsh_tools.code import CodeRunLimits, CodeRunOutcome, Dispatch, ToolCallError
from tests.code_helpers import Trace, code_runtime, gather, run_program, submit, tool


def _calls(*names: str) -> list[tuple[str, object]]:
    return [(name, {"n": i}) for i, name in enumerate(names)]


async def test_l019_gathered_parallel_calls_overlap(autojump_clock: trio.testing.MockClock) -> None:
    """L-019: three gathered calls to a parallel-safe tool overlap (peak 3), with three
    start events in submission order."""
    trace = Trace()

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        return CodeRunOutcome(result=await gather(dispatch, _calls("safe", "safe", "safe")))

    runtime, _ = code_runtime(script)
    runtime.register(tool("safe", trace.body()))
    trace.install(runtime)
    result = await run_program(runtime)
    assert trace.peak == 3
    assert trace.kinds("S") == [("S", "c1:code:1"), ("S", "c1:code:2"), ("S", "c1:code:3")]
    assert [e.arguments for e in trace.starts] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert thaw_json(result.value) == {"logs": [], "result": [{"n": 0}, {"n": 1}, {"n": 2}]}
    assert trio.current_time() == 1.0


async def test_l020_l030_exclusive_calls_are_barriers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """L-020, L-030: ``writer`` starts only after both earlier ``safe`` calls committed and
    runs alone; the last ``safe`` starts after ``writer`` committed; two writers run one
    after the other in submission order."""
    trace = Trace()

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        await gather(dispatch, _calls("safe", "safe", "writer", "writer", "safe"))
        return CodeRunOutcome()

    runtime, _ = code_runtime(script)
    runtime.register(tool("safe", trace.body()))
    runtime.register(tool("writer", trace.body(), parallel=False))
    trace.install(runtime)
    await run_program(runtime)
    times = {(e[0], e[1]): e[2] for e in trace.events if e[0] in ("start", "end")}
    assert times == {
        **{("start", f"c1:code:{n}"): t for n, t in ((1, 0), (2, 0), (3, 1), (4, 2), (5, 3))},
        **{("end", f"c1:code:{n}"): t for n, t in ((1, 1), (2, 1), (3, 2), (4, 3), (5, 4))},
    }
    order = [e[:2] for e in trace.events if e[0] in ("start", "D")]
    assert [e for e in order if e[0] == "D"] == [("D", f"c1:code:{n}") for n in range(1, 6)]
    # Each barrier starts after everything before it committed.
    assert order.index(("start", "c1:code:3")) > order.index(("D", "c1:code:2"))
    assert order.index(("start", "c1:code:4")) > order.index(("D", "c1:code:3"))
    assert order.index(("start", "c1:code:5")) > order.index(("D", "c1:code:4"))


async def test_l021_the_pool_is_bounded_by_max_parallel_sub_calls(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """L-021: with ``max_parallel_sub_calls=2``, five gathered calls overlap at most two at
    a time (a rolling pool: three rounds of one second)."""
    trace = Trace()

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        await gather(dispatch, _calls(*["safe"] * 5))
        return CodeRunOutcome()

    runtime, _ = code_runtime(script, max_parallel_sub_calls=2)
    runtime.register(tool("safe", trace.body()))
    await run_program(runtime)
    assert trace.peak == 2
    assert trio.current_time() == 3.0


async def test_l022_a_tool_disposed_after_the_run_started(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """L-022: a bound tool disposed while the program runs fails when its sub-call
    dispatches: ``unknown tool``, its body never runs, one start and one settle event."""
    trace = Trace()
    ran: list[str] = []

    async def ephemeral(args: JsonValue, ctx: ToolRunContext) -> object:
        ran.append(ctx.call_id)
        return None

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        assert "ephemeral" in tools
        dispose()
        try:
            await dispatch("ephemeral", {})
        except ToolCallError as exc:
            return CodeRunOutcome(result=[exc.tool_name, str(exc)])
        raise AssertionError("unreachable")

    runtime, _ = code_runtime(script)
    dispose = runtime.register(tool("ephemeral", ephemeral))
    trace.install(runtime)
    result = await run_program(runtime)
    assert thaw_json(result.value) == {
        "logs": [],
        "result": ["ephemeral", 'unknown tool "ephemeral"'],
    }
    assert ran == []
    assert trace.kinds("S", "D") == [("S", "c1:code:1"), ("D", "c1:code:1", True)]


async def test_l023_a_slow_pre_execute_hook_delays_the_next_start(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """L-023: starts are one at a time: the second call's start event and pre-execute wait
    for the first call's slow pre-execute hook."""
    trace = Trace()
    seen: list[tuple[str, str, float]] = []

    async def pre(execution: ToolExecution, call_next: Any) -> PreDecision:
        seen.append(("pre", execution.call_id, trio.current_time()))
        if execution.call_id.endswith(":1"):
            await trio.sleep(5)
        decision: PreDecision = await call_next()
        return decision

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        await gather(dispatch, _calls("safe", "safe"))
        return CodeRunOutcome()

    runtime, _ = code_runtime(script)
    runtime.register(tool("safe", trace.body()))
    trace.install(runtime)
    runtime.on_pre_execute(pre)
    start_times: list[float] = []
    runtime.on_code_dispatch_start(lambda e: start_times.append(trio.current_time()))
    await run_program(runtime)
    assert [s for s in seen if s[1].startswith("c1:")] == [
        ("pre", "c1:code:1", 0.0),
        ("pre", "c1:code:2", 5.0),
    ]
    assert start_times == [0.0, 5.0]


async def test_l024_the_program_ends_while_a_post_execute_hook_awaits(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """L-024: settlement drains a commit whose post-execute hook is still running: the
    program's value waits for it, and the settle event follows it. The body had returned
    before the run Abort fired, so its success is kept (runtime.md §8.3 wins over L-024's
    "ABORTED"; see the decisions)."""
    trace = Trace()
    in_post = trio.Event()

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> PostDecision:
        if execution.parent is not None:
            in_post.set()
            await trio.sleep(5)
        decision: PostDecision = await call_next()
        return decision

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(dispatch, "safe", {})
            await in_post.wait()
            # The program ends: a runtime cancels its own pending dispatch awaits.
            nursery.cancel_scope.cancel()
        return CodeRunOutcome()

    runtime, _ = code_runtime(script)
    runtime.register(tool("safe", trace.body()))
    runtime.on_post_execute(post)
    trace.install(runtime)
    result = await run_program(runtime)
    assert not result.is_error
    assert trace.kinds("S", "D") == [("S", "c1:code:1"), ("D", "c1:code:1", False)]
    assert trace.settles[0].execution.abort.reason == "run_code settled"
    assert trio.current_time() == 6.0


async def test_l025_commits_follow_submission_order(autojump_clock: trio.testing.MockClock) -> None:
    """L-025: bodies finishing in reverse order: post-execute, settle events, contexts and
    the values the program receives follow submission order."""
    trace = Trace()
    posts: list[str] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        assert isinstance(args, dict)
        await trio.sleep(3 - args["n"])
        ctx.defer_context(UserMessage(content=[TextContent(f"ctx {args['n']}")]))
        return args["n"]

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> PostDecision:
        posts.append(execution.call_id)
        decision: PostDecision = await call_next()
        return decision

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        return CodeRunOutcome(result=await gather(dispatch, _calls("safe", "safe", "safe")))

    runtime, _ = code_runtime(script)
    runtime.register(tool("safe", body))
    runtime.on_post_execute(post)
    trace.install(runtime)
    result = await run_program(runtime)
    assert thaw_json(result.value) == {"logs": [], "result": [0, 1, 2]}, result.content
    assert posts[:3] == ["c1:code:1", "c1:code:2", "c1:code:3"]
    assert trace.kinds("D") == [("D", f"c1:code:{n}", False) for n in (1, 2, 3)]
    assert [m.content[0] for m in result.additional_contexts] == [
        TextContent("ctx 0"),
        TextContent("ctx 1"),
        TextContent("ctx 2"),
    ]


async def test_l026_a_queued_call_is_refused_at_settlement(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """L-026: a ``writer`` still queued behind a running exclusive call when the program
    ends gets no event and the settled refusal; so does a call made after settlement."""
    trace = Trace()
    got: list[object] = []
    kept: list[Dispatch] = []

    async with trio.open_nursery() as outer:

        async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
            kept.append(dispatch)
            await submit(outer, dispatch, "writer", {}, got)
            await submit(outer, dispatch, "writer", {}, got)
            await trio.sleep(1)
            return CodeRunOutcome()

        runtime, _ = code_runtime(script)
        runtime.register(tool("writer", trace.body(10), parallel=False))
        trace.install(runtime)
        result = await run_program(runtime)
    assert not result.is_error
    assert trace.kinds("S", "D") == [("S", "c1:code:1"), ("D", "c1:code:1", True)]
    message = "run_code run is over (run_code settled); writer tool call abandoned"
    refused = [g for g in got if isinstance(g, ToolCallError) and str(g) == message]
    assert len(refused) == 1
    assert trio.current_time() == 1.0
    with pytest.raises(ToolCallError, match=r"^run_code run is over \(run_code settled\)"):
        await kept[0]("writer", {})


async def test_l027_l028_events_and_value_of_a_finished_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """L-027, L-028: exact event fields; sub-call observers see the run_code token as
    ``parent`` and the outer ``root_call_id``; the outer result has no ``meta``."""
    trace = Trace()
    observed: list[tuple[str, ExecutionToken | None, str]] = []
    outer: list[ExecutionToken] = []

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        a = await dispatch("safe", {"x": 1})
        try:
            await dispatch("boom", {"y": [2]})
        except ToolCallError as exc:
            return CodeRunOutcome(logs=["done"], result={"a": a, "b": str(exc)})
        raise AssertionError("unreachable")

    runtime, _ = code_runtime(script)
    runtime.register(tool("safe", trace.body(0)))
    runtime.register(tool("boom", trace.body(0, fail="bad")))
    trace.install(runtime)

    def on_result(execution: ToolExecution, result: ToolResult) -> None:
        if execution.parent is None:
            outer.append(execution.token)
        else:
            observed.append((execution.call_id, execution.parent, execution.root_call_id))

    runtime.on_result(on_result)
    result = await run_program(runtime, call_id="call-7", root_call_id="turn-3")
    assert thaw_json(result.value) == {"logs": ["done"], "result": {"a": {"x": 1}, "b": "bad"}}
    assert result.meta is None
    assert [e.to_json() for e in trace.settles] == [
        {
            "root_call_id": "turn-3",
            "parent_call_id": "call-7",
            "sub_call_id": "call-7:code:1",
            "name": "safe",
            "arguments": {"x": 1},
            "is_error": False,
            "content": [{"type": "text", "text": '{"x": 1}'}],
        },
        {
            "root_call_id": "turn-3",
            "parent_call_id": "call-7",
            "sub_call_id": "call-7:code:2",
            "name": "boom",
            "arguments": {"y": [2]},
            "is_error": True,
            "content": [{"type": "text", "text": "Error: bad"}],
        },
    ]
    assert observed == [
        ("call-7:code:1", outer[0], "turn-3"),
        ("call-7:code:2", outer[0], "turn-3"),
    ]
    assert all(e.execution.parent is outer[0] for e in trace.starts)


@pytest.mark.parametrize("case", ["plain", "blocked", "failed"])
async def test_l029_a_sub_call_concludes_the_turn(case: str) -> None:
    """L-029: a sub-call's ``conclude_turn`` reaches a successful run_code result; not when a
    post hook blocked that sub-result; never when run_code fails."""

    async def finish(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.conclude_turn()
        return "bye"

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        with contextlib.suppress(ToolCallError):
            await dispatch("finish", {})
        if case == "failed":
            from dsh_tools import CodeRunFailedError

            raise CodeRunFailedError.for_run("exception", "ValueError: x (line 1)")
        return CodeRunOutcome()

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> PostDecision:
        if case == "blocked" and execution.name == "finish":
            return Block("no")
        decision: PostDecision = await call_next()
        return decision

    runtime, _ = code_runtime(script)
    runtime.register(tool("finish", finish))
    runtime.on_post_execute(post)
    result = await run_program(runtime)
    assert result.is_error == (case == "failed")
    assert result.concludes_turn == (case == "plain")


async def test_l031_l033_l034_failures_reach_the_program_as_tool_call_errors() -> None:
    """L-031, L-033, L-034: a body's exception, a raising pre-execute hook and a denial all
    reach the program as ``ToolCallError`` with the sub-result's message; the hook's and the
    denial's bodies never run, and a raising hook gets no post-execute."""
    trace = Trace()
    posts: list[str] = []

    async def pre(execution: ToolExecution, call_next: Any) -> PreDecision:
        if execution.name == "hooked":
            raise ValueError("hook exploded")
        if execution.name == "writer":
            return Deny("no writes")
        decision: PreDecision = await call_next()
        return decision

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> PostDecision:
        posts.append(execution.name)
        decision: PostDecision = await call_next()
        return decision

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        out = []
        for name in ("disk", "hooked", "writer"):
            try:
                await dispatch(name, {})
            except ToolCallError as exc:
                out.append([exc.tool_name, str(exc)])
        return CodeRunOutcome(result=out)

    runtime, _ = code_runtime(script)
    runtime.register(tool("disk", trace.body(0, fail="disk on fire")))
    runtime.register(tool("hooked", trace.body(0)))
    runtime.register(tool("writer", trace.body(0)))
    runtime.on_pre_execute(pre)
    runtime.on_post_execute(post)
    trace.install(runtime)
    result = await run_program(runtime)
    assert thaw_json(result.value)["result"] == [
        ["disk", "disk on fire"],
        ["hooked", "hook exploded"],
        ["writer", "no writes"],
    ]
    assert trace.kinds("start") == [("start", "c1:code:1")]
    assert "hooked" not in posts
    assert "writer" in posts  # a denial goes through post-execute
    assert [s.is_error for s in trace.settles] == [True, True, True]


async def test_l035_l085_refused_calls_create_nothing() -> None:
    """L-035, L-085: arguments that are not lossless JSON, an unknown name and the sub-call
    limit are refused before anything is created: no event, no number used."""
    trace = Trace()

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        import datetime

        out = []
        bad: list[tuple[str, object]] = [
            ("safe", {"tags": {1, 2}}),
            ("safe", {"when": datetime.date(2026, 1, 1)}),
            ("safe", {"f": print}),
            ("safe", {"x": [float("nan")]}),
            ("nope", {}),
            ("run_code", {}),
            ("safe", {"n": 1}),
            ("safe", {"n": 2}),
            ("safe", {"n": 3}),
        ]
        for name, args in bad:
            try:
                out.append(await dispatch(name, args))
            except ToolCallError as exc:
                out.append(str(exc))
        return CodeRunOutcome(result=out)

    runtime, _ = code_runtime(script, limits=CodeRunLimits(max_sub_calls=2))
    runtime.register(tool("safe", trace.body(0)))
    trace.install(runtime)
    result = await run_program(runtime)
    assert thaw_json(result.value)["result"] == [
        "tool arguments must be lossless JSON (unsupported type set at $.tags)",
        "tool arguments must be lossless JSON (unsupported type datetime.date at $.when)",
        "tool arguments must be lossless JSON (unsupported type builtin_function_or_method at $.f)",
        "tool arguments must be lossless JSON (non-finite float at $.x[0])",
        'unknown tool "nope"',
        'unknown tool "run_code"',
        {"n": 1},
        {"n": 2},
        "run_code sub-call limit reached (2 calls)",
    ]
    assert trace.kinds("S") == [("S", "c1:code:1"), ("S", "c1:code:2")]

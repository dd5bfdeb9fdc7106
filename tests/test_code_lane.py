"""The sub-call lane of ``run_code`` (code-mode §5): acceptance, pool, barriers, commits,
settlement and cancellation, driven by ``ScriptedCodeRuntime`` under trio's MockClock."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import trio
import trio.testing

from dsh_tools import (
    ABORTED,
    TOOL_TIMEOUT,
    Abort,
    Accept,
    Block,
    Deny,
    ExecutionToken,
    ImageContent,
    JsonValue,
    PostDecision,
    PreDecision,
    TextContent,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolTimeoutError,
    UserMessage,
    error_result,
    thaw_json,
)
from dsh_tools.code import CODE_MODE_SOURCE, CodeRunLimits, CodeRunOutcome, Dispatch, ToolCallError
from tests.code_helpers import Trace, code_runtime, gather, run_program, submit, tool


async def _two_second_deadline(execution: ToolExecution, call_next: Any) -> ToolResult:
    if execution.name != "run_code":
        result: ToolResult = await call_next()
        return result
    with trio.move_on_after(2):
        result = await call_next()
        return result
    return error_result(ToolTimeoutError(2.0))


def _code(result: ToolResult) -> str | None:
    error = result.error
    return None if error is None or error.info is None else error.info.code


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


async def test_l036_l037_one_frozen_snapshot_even_5000_deep() -> None:
    """L-036, L-037: the program mutating its dict after the call changes nothing; the body
    cannot mutate its arguments; 5000-deep arguments are dispatched and carried by both
    events (and their JSON) without recursion errors."""
    trace = Trace()
    bodies: list[object] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        assert isinstance(args, dict)
        try:
            args["x"] = 2
        except TypeError as exc:
            bodies.append(type(exc).__name__)
        return "ok"

    deep: Any = []
    for _ in range(5000):
        deep = [deep]

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        args: dict[str, Any] = {"x": 1, "deep": deep}
        async with trio.open_nursery() as nursery:
            nursery.start_soon(dispatch, "safe", args)
            await trio.testing.wait_all_tasks_blocked()
            args["x"] = 99
        return CodeRunOutcome()

    runtime, _ = code_runtime(script)
    runtime.register(tool("safe", body))
    trace.install(runtime)
    await run_program(runtime)
    assert bodies == ["TypeError"]
    start, settle = trace.starts[0], trace.settles[0]
    assert start.arguments is settle.arguments is start.execution.arguments
    assert isinstance(start.arguments, dict)
    assert start.arguments["x"] == 1
    data = settle.to_json()["arguments"]
    assert isinstance(data, dict)
    depth, node = 0, data["deep"]
    while node:
        node, depth = node[0], depth + 1
    assert depth == 5000


async def test_l038_contexts_stay_on_a_failed_run() -> None:
    """L-038: contexts deferred by sub-calls stay on run_code's error result, in
    submission order."""

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        assert isinstance(args, dict)
        ctx.defer_context(UserMessage(content=[TextContent(f"note {args['n']}")]))
        return None

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        await gather(dispatch, _calls("safe", "safe"))
        raise ValueError("program bug")

    runtime, _ = code_runtime(script)
    runtime.register(tool("safe", body))
    result = await run_program(runtime)
    assert result.is_error
    assert result.content == (TextContent("Error: code run failed (internal): program bug"),)
    assert [m.content for m in result.additional_contexts] == [
        (TextContent("note 0"),),
        (TextContent("note 1"),),
    ]


_IMAGE = ImageContent(data="aGk=", mime_type="image/png")


def _with_image(args: object, value: object) -> list[Any]:
    return [TextContent("look"), _IMAGE]


@pytest.mark.parametrize("case", ["image", "blocked", "replaced", "failed"])
async def test_l039_an_image_result_adds_a_code_mode_message(case: str) -> None:
    """L-039: a successful sub-result whose final content holds an image adds one message
    with that content and the Code Mode source, after the sub-call's own contexts; none when
    a post hook blocked it or replaced the content without the image, none for a failure."""

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.defer_context(UserMessage(content=[TextContent("own")]))
        if case == "failed":
            raise RuntimeError("no picture")
        return "picture"

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> PostDecision:
        if execution.name == "shot" and case == "blocked":
            return Block("hidden")
        if execution.name == "shot" and case == "replaced":
            return Accept(content=[TextContent("described")])
        decision: PostDecision = await call_next()
        return decision

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        with contextlib.suppress(ToolCallError):
            await dispatch("shot", {})
        return CodeRunOutcome()

    runtime, _ = code_runtime(script)
    runtime.register(tool("shot", body, render=_with_image))
    runtime.on_post_execute(post)
    result = await run_program(runtime)
    contexts = result.additional_contexts
    images = [m for m in contexts if m.source == CODE_MODE_SOURCE]
    if case == "image":
        assert [m.content for m in contexts] == [
            (TextContent("own"),),
            (TextContent("look"), _IMAGE),
        ]
        assert contexts[1].source == {"kind": "plugin", "plugin": "tools-code-mode"}
    else:
        assert images == []
        # A block drops the sub-result's own contexts (runtime.md §7.5); the others keep it.
        assert len(contexts) == (0 if case == "blocked" else 1)


async def test_l050_l054_event_content_is_the_final_content_and_never_a_context() -> None:
    """L-050, L-054: the settle event's content is exactly the sub-result's final content
    (an image and 100,000 characters of text); code-dispatch events never become contexts:
    the outer contexts are exactly the sub-calls' contexts and image messages."""
    trace = Trace()
    long_text = TextContent("y" * 100_000)

    def render(args: object, value: object) -> list[Any]:
        return [_IMAGE, long_text]

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        await dispatch("shot", {})
        return CodeRunOutcome()

    runtime, _ = code_runtime(script)
    runtime.register(tool("shot", trace.body(0), render=render))
    trace.install(runtime)
    result = await run_program(runtime)
    settle = trace.settles[0]
    assert settle.content == settle.result.content == (_IMAGE, long_text)
    assert [m.content for m in result.additional_contexts] == [(_IMAGE, long_text)]


async def test_l044_l088_code_dispatch_observers_are_scoped() -> None:
    """L-044, L-088: a scope-less run reaches global observers only; a run in a child scope
    reaches the global ones, its own scope's and its ancestors', never a sibling's."""
    seen: list[str] = []

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        await dispatch("safe", {})
        return CodeRunOutcome()

    runtime, _ = code_runtime(script)
    runtime.register(tool("safe", Trace().body(0)))
    runtime.on_code_dispatch_start(lambda e: seen.append(f"global start {e.sub_call_id}"))
    runtime.on_code_dispatch(lambda e: seen.append(f"global settle {e.sub_call_id}"))
    parent = runtime.open_scope(name="parent")
    child = runtime.open_scope(parent=parent, name="child")
    sibling = runtime.open_scope(name="sibling")
    for scope in (parent, child, sibling):
        name = scope.name
        scope.on_code_dispatch_start(lambda e, name=name: seen.append(f"{name} start"))
        scope.on_code_dispatch(lambda e, name=name: seen.append(f"{name} settle"))
    await run_program(runtime, call_id="a")
    assert seen == ["global start a:code:1", "global settle a:code:1"]
    seen.clear()
    await run_program(runtime, call_id="b", scope=child)
    assert seen == [
        "global start b:code:1",
        "parent start",
        "child start",
        "global settle b:code:1",
        "parent settle",
        "child settle",
    ]


async def test_l042_l053_the_outer_abort_stops_the_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """L-042, L-053: the outer Abort fires with one sub-call running and one queued: the
    running one is ABORTED (settle event, no post-execute), the queued one is refused with
    no event, and execute() returns ABORTED once all that is done; a call submitted after
    that is refused the same way and never dispatched."""
    trace = Trace()
    posts: list[str] = []
    got: list[object] = []
    kept: list[Dispatch] = []
    outer_abort = Abort()

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> PostDecision:
        posts.append(execution.call_id)
        decision: PostDecision = await call_next()
        return decision

    async with trio.open_nursery() as outer:

        async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
            kept.append(dispatch)
            await submit(outer, dispatch, "writer", {}, got)
            await submit(outer, dispatch, "writer", {}, got)
            await trio.sleep(100)
            raise AssertionError("unreachable")

        runtime, _ = code_runtime(script)
        runtime.register(tool("writer", trace.body(10), parallel=False))
        runtime.on_post_execute(post)
        trace.install(runtime)

        async def fire() -> None:
            await trio.sleep(2)
            outer_abort.abort("user stop")

        outer.start_soon(fire)
        result = await run_program(runtime, abort=outer_abort)
        # Everything settled before execute() returned.
        assert trace.kinds("S", "D") == [("S", "c1:code:1"), ("D", "c1:code:1", True)]
    message = "run_code run is over (run_code aborted); writer tool call abandoned"
    # The two waiters were resolved together: they ran in either order.
    assert sorted(str(g) for g in got) == [message, "tool call aborted: run_code aborted"]
    assert _code(result) == ABORTED
    assert _code(trace.settles[0].result) == ABORTED
    assert [p for p in posts if ":code:" in p] == []
    assert trio.current_time() == 2.0
    with pytest.raises(ToolCallError, match=r"^run_code run is over \(run_code aborted\); w"):
        await kept[0]("writer", {})
    assert len(trace.starts) == 1


async def test_l043_a_failing_program_settles_its_sub_calls_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """L-043: a runtime that starts a sub-call, then raises CodeRunFailedError: the sub-call
    is aborted, committed and its settle event emitted before run_code's error result."""
    from dsh_tools import CodeRunFailedError

    trace = Trace()
    order: list[str] = []
    got: list[object] = []

    async with trio.open_nursery() as outer:

        async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
            await submit(outer, dispatch, "slow", {}, got)
            await trio.sleep(1)
            raise CodeRunFailedError.for_run("exception", "ValueError: bad (line 2)", ["hi"])

        runtime, _ = code_runtime(script)
        runtime.register(tool("slow", trace.body(10)))
        runtime.on_code_dispatch(lambda e: order.append(f"settle {e.sub_call_id}"))
        runtime.on_result(lambda execution, result: order.append(f"result {execution.call_id}"))
        result = await run_program(runtime)
    assert order == ["result c1:code:1", "settle c1:code:1", "result c1"]
    assert result.content == (
        TextContent(
            "Error: code run failed (exception): ValueError: bad (line 2)\nCaptured output:\nhi"
        ),
    )
    assert [str(g) for g in got] == ["tool call aborted: run_code settled"]
    assert trio.current_time() == 1.0


async def test_l084_dispatch_is_a_checkpoint_and_waiters_can_leave(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """L-084: a success returns the frozen value; every path of dispatch is a checkpoint;
    cancelling a task awaiting dispatch leaves the sub-call running until settlement aborts
    it (its settle event is emitted)."""
    trace = Trace()
    values: list[object] = []

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        value = await dispatch("quick", {"k": [1]})
        values.append(value)
        with trio.testing.assert_checkpoints():
            await dispatch("quick", {})
        for name, args in (("nope", {}), ("quick", {1: 2})):
            with trio.testing.assert_checkpoints(), pytest.raises(ToolCallError):
                await dispatch(name, args)
        with trio.move_on_after(1):
            await dispatch("slow", {})
        values.append(trace.running)  # the body still runs
        return CodeRunOutcome()

    runtime, _ = code_runtime(script)
    runtime.register(tool("quick", trace.body(0)))
    runtime.register(tool("slow", trace.body(10)))
    trace.install(runtime)
    await run_program(runtime)
    assert values[0] == {"k": (1,)}
    assert type(values[0]).__name__ == "FrozenDict"
    assert values[1] == 1
    assert trace.kinds("D")[-1] == ("D", "c1:code:3", True)
    assert trace.settles[-1].result.error is not None
    assert _code(trace.settles[-1].result) == ABORTED


async def test_l086_sub_call_calls(autojump_clock: trio.testing.MockClock) -> None:
    """L-086: ids count accepted calls from 1 (refused ones skipped); every sub-call has
    the run_code call's scope, its token as parent and its root; all share one run Abort,
    distinct from the outer one, which fires with "run_code settled" after the program."""
    trace = Trace()
    outer_tokens: list[ExecutionToken] = []
    aborted_during: list[bool] = []

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        await dispatch("safe", {})
        with contextlib.suppress(ToolCallError):
            await dispatch("missing", {})
        await dispatch("safe", {})
        aborted_during.append(trace.starts[0].execution.abort.aborted)
        return CodeRunOutcome()

    runtime, _ = code_runtime(script)
    runtime.register(tool("safe", trace.body(0)))
    trace.install(runtime)
    runtime.on_result(
        lambda execution, result: (
            outer_tokens.append(execution.token) if execution.parent is None else None
        )
    )
    scope = runtime.open_scope(name="agent")
    outer_abort = Abort()
    await run_program(runtime, call_id="x", scope=scope, abort=outer_abort, root_call_id="r")
    executions = [e.execution for e in trace.starts]
    assert [e.call_id for e in executions] == ["x:code:1", "x:code:2"]
    assert all(e.scope is scope for e in executions)
    assert all(e.parent is outer_tokens[0] for e in executions)
    assert all(e.root_call_id == "r" for e in executions)
    run_abort = executions[0].abort
    assert executions[1].abort is run_abort
    assert run_abort is not outer_abort
    assert aborted_during == [False]
    assert run_abort.aborted
    assert run_abort.reason == "run_code settled"
    assert not outer_abort.aborted


@pytest.mark.parametrize("how", ["caller", "timeout"])
async def test_l087_native_cancellation_of_run_code(
    how: str, autojump_clock: trio.testing.MockClock
) -> None:
    """L-087: cancelled natively (the caller's scope, or a timeout policy deadline), running
    sub-calls are finished with their cancelled results (no post-execute, a decided error
    kept), settle events are emitted without the log waterfall, and their contexts are on
    the ABORTED (or TOOL_TIMEOUT) outer result; the caller's Cancelled propagates."""
    trace = Trace()
    posts: list[str] = []
    logged: list[str] = []
    outer: list[ToolResult] = []

    async def noted(args: JsonValue, ctx: ToolRunContext) -> object:
        ctx.defer_context(UserMessage(content=[TextContent("before the sleep")]))
        await trio.sleep(10)
        return None

    async def post(execution: ToolExecution, result: ToolResult, call_next: Any) -> PostDecision:
        posts.append(execution.call_id)
        decision: PostDecision = await call_next()
        return decision

    async def log_hook(event: Any, call_next: Any) -> Any:
        logged.append(event.sub_call_id)
        return await call_next()

    async def script(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
        await gather(dispatch, [("noted", {}), ("failing", {})])
        raise AssertionError("unreachable")

    runtime, _ = code_runtime(script)
    runtime.register(tool("noted", noted))
    runtime.register(tool("failing", trace.body(1, fail="decided")))
    runtime.on_post_execute(post)
    runtime.on_code_dispatch_log(log_hook)
    runtime.on_result(lambda e, r: outer.append(r) if e.parent is None else None)
    trace.install(runtime)
    if how == "timeout":
        # run_code declares no timeout of its own: a wrapper gives it a policy's deadline.
        runtime.wrap_execute(_two_second_deadline)
        result = await run_program(runtime)
    else:
        with trio.move_on_after(2) as cancel_scope:
            await run_program(runtime)
        assert cancel_scope.cancelled_caught
        result = outer[0]
    assert trio.current_time() == 2.0
    assert [p for p in posts if ":code:" in p] == []
    assert logged == []
    assert [(s.sub_call_id, s.is_error) for s in trace.settles] == [
        ("c1:code:1", True),
        ("c1:code:2", True),
    ]
    first, second = (s.result for s in trace.settles)
    assert _code(first) == ABORTED
    assert second.error is not None
    assert second.error.message == "decided"
    assert _code(result) == (TOOL_TIMEOUT if how == "timeout" else ABORTED)
    assert [m.content for m in result.additional_contexts] == [(TextContent("before the sleep"),)]

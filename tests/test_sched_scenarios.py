"""Scheduling scenarios: groups, the rolling pool, barriers, reclassification, commits.

Worked examples of scheduler.md §13 (1, 2, 4) and S-001..S-005, S-008..S-013, S-022, S-023,
S-026, S-045. Bodies block on gates released by the test; tasks record steps into lists and
``wait_all_tasks_blocked()`` separates the phases.
"""

from __future__ import annotations

import trio
import trio.testing

from dsh_sched import ModelToolCall, RecordingSink, run_tool_calls
from dsh_tools import (
    Accept,
    Allow,
    CallNext,
    Deny,
    FrozenDict,
    PostDecision,
    PreDecision,
    TextContent,
    ToolDefinition,
    ToolExecution,
    ToolResult,
    ToolRuntime,
)
from tests.test_sched_fixtures import (
    Gates,
    StepSink,
    calls,
    gated_tool,
    ids,
    output,
    start_batch,
    text_of,
)

wait_blocked = trio.testing.wait_all_tasks_blocked


def runtime_with(*tools: object) -> ToolRuntime:
    runtime = ToolRuntime()
    for tool in tools:
        runtime.register(tool)  # type: ignore[arg-type]
    return runtime


async def test_s001_three_parallel_bodies_start_before_any_finishes() -> None:
    steps: list[str] = []
    gates = Gates()
    runtime = runtime_with(gated_tool("r", parallel=True, steps=steps, gates=gates))
    async with trio.open_nursery() as nursery:
        run = start_batch(nursery, runtime, calls("r:c1", "r:c2", "r:c3"))
        await wait_blocked()
        # Dispatch tasks start in trio's (randomized) order; all three are running.
        assert sorted(steps) == ["c1 start", "c2 start", "c3 start"]
        gates.release("c1", "c2", "c3")
    assert run.outcome is not None
    assert ids(run.outcome.results) == ["c1", "c2", "c3"]


async def test_s002_example1_read_write_read_runs_three_groups() -> None:
    """§13 example 1: ``[r1, w2, r3]``."""
    bodies: list[str] = []
    sink_steps: list[str] = []
    gates = Gates()
    runtime = runtime_with(
        gated_tool("r", parallel=True, steps=bodies, gates=gates),
        gated_tool("w", parallel=False, steps=bodies, gates=gates),
    )
    async with trio.open_nursery() as nursery:
        run = start_batch(
            nursery, runtime, calls("r:A1", "w:A2", "r:A3"), sink=StepSink(sink_steps)
        )
        await wait_blocked()
        # The pool reclassified w2 as exclusive and stopped refilling.
        assert bodies == ["A1 start"]
        assert sink_steps == ["call A1"]
        gates.release("A1")
        await wait_blocked()
        assert bodies == ["A1 start", "A1 end", "A2 start"]
        assert sink_steps == ["call A1", "result A1", "call A2"]
        gates.release("A2")
        await wait_blocked()
        assert sink_steps[-2:] == ["result A2", "call A3"]
        gates.release("A3")
    assert bodies == ["A1 start", "A1 end", "A2 start", "A2 end", "A3 start", "A3 end"]
    assert sink_steps == [
        "call A1",
        "result A1",
        "call A2",
        "result A2",
        "call A3",
        "result A3",
    ]
    assert run.outcome is not None
    assert [c.mode.value if c.mode else None for c in run.outcome.results] == [
        "parallel",
        "exclusive",
        "parallel",
    ]


async def test_s003_barrier_replaces_tool_and_later_calls_are_reclassified() -> None:
    """An exclusive call's body swaps ``x`` for an exclusive version; two ``x`` calls follow."""
    steps: list[str] = []
    gates = Gates()
    runtime = ToolRuntime()
    runtime.register(gated_tool("x", parallel=True, steps=steps, gates=gates))
    disposer = runtime.register(gated_tool("y", parallel=True, steps=steps, gates=gates))

    async def swap_body(args: object, ctx: object) -> object:
        disposer()
        runtime.register(gated_tool("y", parallel=False, steps=steps, gates=gates))
        return "swapped"

    runtime.register(
        ToolDefinition(
            name="swap", description="swap", parameters={}, output=output(), execute=swap_body
        )
    )
    sink_steps: list[str] = []
    async with trio.open_nursery() as nursery:
        run = start_batch(
            nursery, runtime, calls("swap:s", "y:x1", "y:x2"), sink=StepSink(sink_steps)
        )
        await wait_blocked()
        # x1 was classified after the barrier committed: it is exclusive now, runs alone.
        assert steps == ["x1 start"]
        assert sink_steps == ["call s", "result s", "call x1"]
        gates.release("x1")
        await wait_blocked()
        assert sink_steps[-2:] == ["result x1", "call x2"]
        assert steps == ["x1 start", "x1 end", "x2 start"]
        gates.release("x2")
    assert run.outcome is not None
    assert [c.mode.value if c.mode else None for c in run.outcome.results] == [
        "exclusive",
        "exclusive",
        "exclusive",
    ]


async def test_s004_example4_observer_makes_tool_exclusive_mid_group() -> None:
    """§13 example 4: ``[x1, x2, x3]``, ``max_parallel=2``, observer swaps ``x`` on x1's commit."""
    steps: list[str] = []
    replacement_steps: list[str] = []
    gates = Gates()
    runtime = ToolRuntime()
    state = {"disposer": runtime.register(gated_tool("x", parallel=True, steps=steps, gates=gates))}

    def observer(execution: ToolExecution, result: ToolResult) -> None:
        if execution.call_id == "x1":
            state["disposer"]()
            runtime.register(gated_tool("x", parallel=False, steps=replacement_steps, gates=gates))

    runtime.on_result(observer)
    sink_steps: list[str] = []
    async with trio.open_nursery() as nursery:
        run = start_batch(
            nursery,
            runtime,
            calls("x:x1", "x:x2", "x:x3"),
            max_parallel=2,
            sink=StepSink(sink_steps),
        )
        await wait_blocked()
        assert sorted(steps) == ["x1 start", "x2 start"]
        gates.release("x1")
        await wait_blocked()
        # x1 committed; the pool reclassified x3 (now exclusive) and stopped.
        assert sink_steps == ["call x1", "call x2", "result x1"]
        assert replacement_steps == []
        gates.release("x2")
        await wait_blocked()
        assert sink_steps == ["call x1", "call x2", "result x1", "result x2", "call x3"]
        assert replacement_steps == ["x3 start"]  # the replacement definition runs
        gates.release("x3")
    assert run.outcome is not None
    assert run.outcome.results[2].mode is not None
    assert run.outcome.results[2].mode.value == "exclusive"


async def test_s005_later_call_finishing_first_waits_for_the_head() -> None:
    steps: list[str] = []
    sink_steps: list[str] = []
    gates = Gates()
    runtime = runtime_with(gated_tool("r", parallel=True, steps=steps, gates=gates))
    async with trio.open_nursery() as nursery:
        run = start_batch(nursery, runtime, calls("r:c1", "r:c2"), sink=StepSink(sink_steps))
        await wait_blocked()
        gates.release("c2")
        await wait_blocked()
        assert steps[-1] == "c2 end"
        assert sink_steps == ["call c1", "call c2"]  # no on_result before c1 commits
        gates.release("c1")
    assert sink_steps == ["call c1", "call c2", "result c1", "result c2"]
    assert run.outcome is not None
    assert ids(run.outcome.results) == ["c1", "c2"]


async def test_s008_default_max_parallel_is_ten() -> None:
    steps: list[str] = []
    gates = Gates()
    runtime = runtime_with(gated_tool("r", parallel=True, steps=steps, gates=gates))
    batch = calls(*(f"r:c{i}" for i in range(1, 13)))
    async with trio.open_nursery() as nursery:
        start_batch(nursery, runtime, batch)
        await wait_blocked()
        assert sorted(steps) == sorted(f"c{i} start" for i in range(1, 11))
        gates.release("c5")  # a body other than the head finishes
        await wait_blocked()
        assert steps[10:] == ["c5 end", "c11 start"]
        assert "c12 start" not in steps
        for i in range(1, 13):
            gates.release(f"c{i}")


async def test_s009_example2_rolling_pool_of_two() -> None:
    """§13 example 2: four ``r`` calls, ``max_parallel=2``."""
    steps: list[str] = []
    sink_steps: list[str] = []
    gates = Gates()
    runtime = runtime_with(gated_tool("r", parallel=True, steps=steps, gates=gates))
    async with trio.open_nursery() as nursery:
        run = start_batch(
            nursery,
            runtime,
            calls("r:c1", "r:c2", "r:c3", "r:c4"),
            max_parallel=2,
            sink=StepSink(sink_steps),
        )
        await wait_blocked()
        assert sink_steps == ["call c1", "call c2"]
        gates.release("c1")
        await wait_blocked()
        assert sink_steps == ["call c1", "call c2", "result c1", "call c3"]
        gates.release("c2")
        await wait_blocked()
        assert sink_steps[4:] == ["result c2", "call c4"]
        gates.release("c4", "c3")
    assert run.outcome is not None
    assert ids(run.outcome.results) == ["c1", "c2", "c3", "c4"]


async def test_s010_max_parallel_one_is_fully_serial() -> None:
    steps: list[str] = []
    runtime = runtime_with(gated_tool("r", parallel=True, steps=steps))

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        steps.append(f"pre {execution.call_id}")
        return await call_next()

    def observe(execution: ToolExecution, result: ToolResult) -> None:
        steps.append(f"commit {execution.call_id}")

    runtime.on_pre_execute(pre)
    runtime.on_result(observe)
    await run_tool_calls(runtime, calls("r:c1", "r:c2", "r:c3"), max_parallel=1)
    assert steps == [
        step
        for i in (1, 2, 3)
        for step in (f"pre c{i}", f"c{i} start", f"c{i} end", f"commit c{i}")
    ]


async def test_s011_hooks_observe_model_order_when_bodies_finish_in_reverse() -> None:
    steps: list[str] = []
    hooks: list[str] = []
    gates = Gates()
    runtime = runtime_with(gated_tool("r", parallel=True, steps=steps, gates=gates))

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        hooks.append(f"pre {execution.call_id}")
        return await call_next()

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        hooks.append(f"post {execution.call_id}")
        return await call_next()

    runtime.on_pre_execute(pre)
    runtime.on_post_execute(post)
    async with trio.open_nursery() as nursery:
        start_batch(nursery, runtime, calls("r:c1", "r:c2", "r:c3"))
        await wait_blocked()
        for call_id in ("c3", "c2", "c1"):
            gates.release(call_id)
            await wait_blocked()
    assert steps[3:] == ["c3 end", "c2 end", "c1 end"]
    assert sorted(steps[:3]) == ["c1 start", "c2 start", "c3 start"]
    assert hooks == ["pre c1", "pre c2", "pre c3", "post c1", "post c2", "post c3"]


async def test_s012_contexts_after_the_last_result_in_model_order() -> None:
    steps: list[str] = []
    sink_steps: list[str] = []
    gates = Gates()
    runtime = runtime_with(
        gated_tool("one", parallel=True, steps=steps, gates=gates, contexts=1),
        gated_tool("two", parallel=True, steps=steps, gates=gates, contexts=2),
    )
    async with trio.open_nursery() as nursery:
        run = start_batch(
            nursery, runtime, calls("one:c1", "two:c2", "one:c3"), sink=StepSink(sink_steps)
        )
        await wait_blocked()
        gates.release("c3", "c2", "c1")
    assert sink_steps == [
        "call c1",
        "call c2",
        "call c3",
        "result c1",
        "result c2",
        "result c3",
        "context c1:0",
        "context c2:0",
        "context c2:1",
        "context c3:0",
    ]
    assert run.outcome is not None
    assert [m.content[0] for m in run.outcome.additional_contexts] == [
        TextContent(t) for t in ("c1:0", "c2:0", "c2:1", "c3:0")
    ]


async def test_s013_s022_denial_and_pre_failure_are_results() -> None:
    steps: list[str] = []
    post_seen: list[str] = []
    runtime = runtime_with(gated_tool("r", parallel=True, steps=steps))

    async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        if execution.call_id == "c2":
            return Deny("blocked by policy")
        if execution.call_id == "c3":
            raise RuntimeError("pre exploded")
        return await call_next()

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        post_seen.append(execution.call_id)
        return await call_next()

    runtime.on_pre_execute(pre)
    runtime.on_post_execute(post)
    outcome = await run_tool_calls(runtime, calls("r:c1", "r:c2", "r:c3"))
    assert steps == ["c1 start", "c1 end"]  # only c1 dispatched; the denied body never ran
    assert post_seen == ["c1", "c2"]
    assert ids(outcome.results) == ["c1", "c2", "c3"]
    first, denied, failed = (c.result for c in outcome.results)
    assert not first.is_error
    assert denied.is_error
    assert "blocked by policy" in text_of(denied)
    assert failed.is_error
    assert "pre exploded" in text_of(failed)


async def test_s023_a_concluding_call_does_not_stop_its_siblings() -> None:
    steps: list[str] = []
    runtime = runtime_with(
        gated_tool("stop", parallel=True, steps=steps, conclude=True),
        gated_tool("r", parallel=True, steps=steps),
    )
    outcome = await run_tool_calls(runtime, calls("r:c1", "stop:c2", "r:c3"))
    assert outcome.concludes_turn
    assert [c.result.concludes_turn for c in outcome.results] == [False, True, False]
    assert sorted(steps) == ["c1 end", "c1 start", "c2 end", "c2 start", "c3 end", "c3 start"]


async def test_s026_post_hook_of_a_barrier_registers_a_tool_the_next_call_uses() -> None:
    steps: list[str] = []
    runtime = runtime_with(gated_tool("w", parallel=False, steps=steps))

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        if execution.name == "w" and runtime.get("fresh") is None:
            runtime.register(gated_tool("fresh", parallel=True, steps=steps))
        return await call_next()

    runtime.on_post_execute(post)
    outcome = await run_tool_calls(runtime, calls("w:c1", "fresh:c2"))
    assert not outcome.results[1].result.is_error
    assert outcome.results[1].mode is not None
    assert outcome.results[1].mode.value == "parallel"
    assert steps == ["c1 start", "c1 end", "c2 start", "c2 end"]


async def test_s045_a_reclassified_call_gets_the_same_arguments_object() -> None:
    seen: list[object] = []

    def classify(arguments: object) -> bool:
        seen.append(arguments)
        # c2 is a barrier by its arguments; c1 is parallel.
        return isinstance(arguments, dict) and arguments.get("parallel") is True

    steps: list[str] = []
    runtime = runtime_with(gated_tool("t", parallel=classify, steps=steps))
    batch = (
        ModelToolCall(call_id="c1", name="t", arguments='{"parallel": true}'),
        ModelToolCall(call_id="c2", name="t", arguments='{"parallel": false}'),
    )
    outcome = await run_tool_calls(runtime, batch)
    # c1 once, by the outer loop (starting the shared-scope host is no checkpoint, decision
    # 114); c2 twice: by the pool (a barrier) and again by the outer loop. A call keeps its
    # arguments object throughout.
    assert len(seen) == 3
    assert seen[0] == {"parallel": True}
    assert seen[1] == {"parallel": False}
    assert seen[1] is seen[2]
    assert [c.mode.value if c.mode else None for c in outcome.results] == [
        "parallel",
        "exclusive",
    ]


async def test_mapping_arguments_reach_the_tool_frozen_and_unparsed() -> None:
    """S-042: a mapping is used as it is (frozen), never parsed."""
    received: list[object] = []

    async def body(args: object, ctx: object) -> object:
        received.append(args)
        return "ok"

    runtime = runtime_with(
        ToolDefinition(name="t", description="t", parameters={}, output=output(), execute=body)
    )
    call = ModelToolCall(call_id="c1", name="t", arguments={"a": [1]})
    await run_tool_calls(runtime, [call])
    assert received == [{"a": (1,)}]
    assert isinstance(received[0], FrozenDict)


async def test_s034_empty_batch_has_an_empty_outcome_and_no_event() -> None:
    sink = RecordingSink()
    outcome = await run_tool_calls(ToolRuntime(), [], sink=sink)
    assert outcome.results == ()
    assert outcome.additional_contexts == ()
    assert not outcome.concludes_turn
    assert not outcome.aborted
    assert sink.events == []


async def test_unknown_tool_is_an_exclusive_error_result() -> None:
    outcome = await run_tool_calls(ToolRuntime(), calls("nope:c1"))
    (only,) = outcome.results
    assert only.result.is_error
    assert text_of(only.result) == 'Error: unknown tool "nope"'
    assert only.mode is not None
    assert only.mode.value == "exclusive"


async def test_post_execute_replaced_content_is_committed() -> None:
    steps: list[str] = []
    runtime = runtime_with(gated_tool("r", parallel=True, steps=steps))

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        return Accept(content=[TextContent("replaced")])

    async def allow(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
        return Allow()

    runtime.on_pre_execute(allow)
    runtime.on_post_execute(post)
    outcome = await run_tool_calls(runtime, calls("r:c1"))
    assert text_of(outcome.results[0].result) == "replaced"

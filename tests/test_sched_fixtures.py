"""Shared building blocks for the scheduler tests (public API only), and their own tests.

Import as ``from tests.test_sched_fixtures import ...``. Bodies block on explicit gates and
record steps into lists, so ordering tests read as the scheduler spec's worked examples.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import attrs
import trio
import trio.testing

from dsh_sched import (
    BatchOutcome,
    CallCommitted,
    CallStarted,
    ContextAccepted,
    ModelToolCall,
    run_tool_calls,
)
from dsh_tools import (
    JsonValue,
    Output,
    TextContent,
    ToolDefinition,
    ToolResult,
    ToolRunContext,
    UserMessage,
)

__all__ = [
    "BatchRun",
    "Gates",
    "StepSink",
    "calls",
    "exactly",
    "gated_tool",
    "output",
    "start_batch",
    "starting",
    "text_of",
]

Body = Callable[[JsonValue, ToolRunContext], Awaitable[object]]


def exactly(message: str) -> str:
    """A ``match=`` pattern accepting exactly ``message``."""
    return f"^{re.escape(message)}$"


def starting(message: str) -> str:
    """A ``match=`` pattern accepting messages that start with ``message``."""
    return f"^{re.escape(message)}"


def output() -> Output:
    """Accepts any value; renders it as one text block (``str(value)``)."""
    return Output(schema={}, render=lambda args, value: [TextContent(str(value))])


def text_of(result: ToolResult) -> str:
    """The joined text of a result's text blocks."""
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


class Gates:
    """One ``trio.Event`` per key (a call id): bodies wait, the test releases."""

    def __init__(self) -> None:
        self._events: dict[str, trio.Event] = {}

    def event(self, key: str) -> trio.Event:
        if key not in self._events:
            self._events[key] = trio.Event()
        return self._events[key]

    async def wait(self, key: str) -> None:
        await self.event(key).wait()

    def release(self, *keys: str) -> None:
        for key in keys:
            self.event(key).set()


def gated_tool(
    name: str,
    *,
    parallel: bool | Callable[[object], object],
    steps: list[str],
    gates: Gates | None = None,
    contexts: int = 0,
    conclude: bool = False,
    fail: str | None = None,
) -> ToolDefinition:
    """A raw tool whose body logs ``<call_id> start``/``<call_id> end`` around its gate.

    Without ``gates`` the body does not block. It defers ``contexts`` contexts (texts
    ``<call_id>:<i>``), optionally concludes the turn, returns its call id or raises
    ``ValueError(fail)``.
    """

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        steps.append(f"{ctx.call_id} start")
        for i in range(contexts):
            ctx.defer_context(UserMessage(content=[TextContent(f"{ctx.call_id}:{i}")]))
        if conclude:
            ctx.conclude_turn()
        try:
            if gates is not None:
                await gates.wait(ctx.call_id)
        finally:
            steps.append(f"{ctx.call_id} end")
        if fail is not None:
            raise ValueError(fail)
        return ctx.call_id

    return ToolDefinition(
        name=name,
        description=f"the {name} tool",
        parameters={"type": "object"},
        output=output(),
        execute=body,
        is_concurrency_safe=parallel,
    )


def sleeping_tool(name: str, seconds: float, *, parallel: bool = True) -> ToolDefinition:
    """A tool whose body sleeps ``seconds`` of virtual time, then returns its name."""

    async def body(args: object, ctx: ToolRunContext) -> object:
        await trio.sleep(seconds)
        return name

    return ToolDefinition(
        name=name,
        description=name,
        parameters={},
        output=output(),
        execute=body,
        is_concurrency_safe=parallel,
    )


def calls(*specs: str, arguments: str | dict[str, Any] = "") -> tuple[ModelToolCall, ...]:
    """``calls("r:c1", "w:c2")`` → calls of tool ``r`` (id ``c1``) and ``w`` (id ``c2``)."""
    out = []
    for spec in specs:
        name, _, call_id = spec.partition(":")
        out.append(ModelToolCall(call_id=call_id or name, name=name, arguments=arguments))
    return tuple(out)


@attrs.define
class StepSink:
    """A sink logging ``call <id>``, ``result <id>``, ``context <text>`` into ``steps``."""

    steps: list[str]
    events: list[CallStarted | CallCommitted | ContextAccepted] = attrs.Factory(list)

    def on_call(self, event: CallStarted) -> None:
        self.events.append(event)
        self.steps.append(f"call {event.call.call_id}")

    def on_result(self, event: CallCommitted) -> None:
        self.events.append(event)
        self.steps.append(f"result {event.call.call_id}")

    def on_context(self, event: ContextAccepted) -> None:
        self.events.append(event)
        self.steps.append(f"context {text_of_message(event.message)}")


def text_of_message(message: UserMessage) -> str:
    return "".join(block.text for block in message.content if isinstance(block, TextContent))


@attrs.define
class BatchRun:
    """The background run of a batch: its outcome, or what it raised."""

    outcome: BatchOutcome | None = None
    error: BaseException | None = None
    done: bool = False


def start_batch(
    nursery: trio.Nursery, runtime: Any, batch: Sequence[ModelToolCall], **options: Any
) -> BatchRun:
    """Run ``run_tool_calls`` in ``nursery``; the returned :class:`BatchRun` fills in."""
    run = BatchRun()

    async def go() -> None:
        try:
            run.outcome = await run_tool_calls(runtime, batch, **options)
        except Exception as exc:
            run.error = exc
        finally:
            run.done = True

    nursery.start_soon(go)
    return run


def ids(items: Iterable[Any]) -> list[str]:
    """The call ids of events or committed calls."""
    return [item.call.call_id for item in items]


# -- the fixtures' own tests --------------------------------------------------------------


async def test_gates_block_until_released() -> None:
    gates = Gates()
    steps: list[str] = []

    async def waiter() -> None:
        await gates.wait("a")
        steps.append("released")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert steps == []
        gates.release("a")
    assert steps == ["released"]


def test_calls_parses_name_and_id() -> None:
    assert [(c.name, c.call_id) for c in calls("r:c1", "w")] == [("r", "c1"), ("w", "w")]

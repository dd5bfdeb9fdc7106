"""Fixtures shared by the provider adapter tests (integrations §5, group A).

``adapter_runtime()`` registers the conformance fixtures ``echo`` and ``img`` plus a few tools
whose results exercise every rendering rule; ``golden(provider)`` loads the golden provider
output of ``tests/data/providers``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh_sched import BatchOutcome, ModelToolCall, run_tool_calls
from dsh_tools import (
    Block,
    CallNext,
    ImageContent,
    JsonValue,
    Output,
    PostDecision,
    TextContent,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    UserMessage,
    define_tool,
)
from tests.helpers import make_echo, text_output

if TYPE_CHECKING:
    from dsh_sched.adapters import ToolTurn

__all__ = [
    "GOLDEN",
    "PNG",
    "adapter_runtime",
    "answer",
    "calls",
    "golden",
]

GOLDEN = Path(__file__).resolve().parent / "data" / "providers"
PNG = "iVBORw0KGgo="


def golden(provider: str) -> dict[str, Any]:
    """The golden provider output for ``provider`` (a fresh dict on every call)."""
    loaded: dict[str, Any] = json.loads((GOLDEN / f"{provider}.json").read_text("utf-8"))
    return loaded


def _rendered(*blocks: TextContent | ImageContent) -> Output:
    return Output(schema={"type": "string"}, render=lambda args, value: list(blocks))


async def _value(args: JsonValue, ctx: ToolRunContext) -> object:
    return "v"


async def _with_context(args: JsonValue, ctx: ToolRunContext) -> object:
    ctx.defer_context(UserMessage(content=[TextContent("remember this")]))
    return "noted"


async def _concluding(args: JsonValue, ctx: ToolRunContext) -> object:
    ctx.conclude_turn()
    return "done"


async def _block_empty(
    execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
) -> PostDecision:
    if execution.name == "blocked":
        return Block([])
    return await call_next()


def adapter_runtime() -> ToolRuntime:
    """A runtime with the adapter fixtures.

    ``echo`` (conformance), ``img`` (``[TextContent("chart"), ImageContent(PNG, "image/png")]``),
    ``two`` (two text blocks), ``empty`` (no block), ``bmp`` (an ``image/bmp`` image), ``ctx``
    (defers the context ``remember this``), ``finish`` (concludes the turn) and ``blocked``
    (a post-execute hook blocks it with no feedback).
    """
    runtime = ToolRuntime()
    runtime.register(make_echo())
    tools = {
        "img": _rendered(TextContent("chart"), ImageContent(PNG, "image/png")),
        "two": _rendered(TextContent("first"), TextContent("second")),
        "empty": _rendered(),
        "bmp": _rendered(ImageContent("Qk0=", "image/bmp")),
        "blocked": text_output(),
    }
    for name, output in tools.items():
        runtime.register(
            define_tool(
                name=name,
                description=f"the {name} fixture",
                parameters={"type": "object"},
                output=output,
                execute=_value,
            )
        )
    runtime.register(
        define_tool(
            name="ctx",
            description="Defer a context.",
            parameters={"type": "object"},
            output=text_output(),
            execute=_with_context,
        )
    )
    runtime.register(
        define_tool(
            name="finish",
            description="Conclude the turn.",
            parameters={"type": "object"},
            output=text_output(),
            execute=_concluding,
        )
    )
    runtime.on_post_execute(_block_empty)
    return runtime


def calls(*names: str, arguments: str = "{}") -> list[ModelToolCall]:
    """One call per name, ids ``c0``, ``c1``, ..."""
    return [
        ModelToolCall(call_id=f"c{i}", name=name, arguments=arguments)
        for i, name in enumerate(names)
    ]


async def answer(runtime: ToolRuntime, turn: ToolTurn) -> BatchOutcome:
    """Run the turn's calls as one batch."""
    return await run_tool_calls(runtime, turn.calls)

"""A complete trio agent loop over dsh-trio, for OpenAI (Chat or Responses) or Anthropic.

Run it as a user would, with the official SDK installed (``pip install openai`` or
``pip install anthropic``); the SDK reads the API key and base URL from the environment
(``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``, ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``)::

    python examples/agent_loop.py --provider openai_chat "What is 2 + 3? Then finish."
    python examples/agent_loop.py --provider openai_responses --model gpt-5-mini "..."
    python examples/agent_loop.py --provider anthropic_messages --turn-timeout 20 "..."

Each model turn: send the history with the exported tools, read the tool calls with the
provider's adapter, run them as one batch (parallel-safe calls together, bounded by a turn
timeout, Ctrl-C fires the batch's ``Abort``), append every result with the adapter, and stop
on a final answer or when a tool concludes the turn.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import sys
from typing import TYPE_CHECKING, Any, Final, Protocol

import trio

from dsh_sched import BatchOutcome, run_tool_calls
from dsh_sched.adapters import ToolTurn, anthropic_messages, openai_chat, openai_responses
from dsh_tools import (
    Abort,
    ImageContent,
    TextContent,
    ToolRunContext,
    ToolRuntime,
    UserMessage,
    tool,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import ModuleType

    from dsh_tools import ContentBlock

PROVIDERS: Final = ("openai_chat", "openai_responses", "anthropic_messages")
DEFAULT_MODELS: Final = {
    "openai_chat": "gpt-4.1-mini",
    "openai_responses": "gpt-4.1-mini",
    "anthropic_messages": "claude-sonnet-4-5",
}
# A 1x1 PNG: what a chart tool would return, small enough to read.
PIXEL_PNG: Final = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9aw"
    "AAAABJRU5ErkJggg=="
)


# -- the tools ----------------------------------------------------------------------------


@tool(is_concurrency_safe=True)
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _chart_blocks(args: object, value: str) -> Sequence[ContentBlock]:
    return [TextContent(value), ImageContent(PIXEL_PNG, "image/png")]


@tool(is_concurrency_safe=True, render=_chart_blocks)
async def chart(title: str) -> str:
    """Draw a chart and return it as an image."""
    return f"chart: {title}"


@tool
async def note(text: str, ctx: ToolRunContext) -> str:
    """Remember a note; it reaches the model as a user message after the results."""
    ctx.defer_context(UserMessage(content=[TextContent(f"Note to self: {text}")]))
    return "noted"


@tool
async def wait(seconds: float) -> str:
    """Wait for a number of seconds (cut short by the turn timeout)."""
    await trio.sleep(seconds)
    return f"waited {seconds:g} s"


@tool
async def finish(summary: str, ctx: ToolRunContext) -> str:
    """Finish the task with a summary; the agent stops without another model call."""
    ctx.conclude_turn()
    return summary


def build_runtime() -> ToolRuntime:
    """A runtime with the example tools registered."""
    runtime = ToolRuntime()
    for definition in (add, chart, note, wait, finish):
        runtime.register(definition)
    return runtime


# -- one model call per provider ------------------------------------------------------------


class Model(Protocol):
    """One provider: call the model on the history, append its own output, return the turn."""

    @property
    def codec(self) -> ModuleType:
        """The provider's adapter module."""
        ...

    async def call(self, history: list[Any], tools: list[dict[str, object]]) -> ToolTurn:
        """Call the model, append its output to ``history`` unchanged, read its calls."""
        ...

    def final_text(self) -> str:
        """The text of the model's last reply."""
        ...


class OpenAIChat:
    """Chat Completions through ``openai.AsyncOpenAI``."""

    codec = openai_chat

    def __init__(self, model: str) -> None:
        from openai import AsyncOpenAI

        self.client = AsyncOpenAI()  # OPENAI_API_KEY, OPENAI_BASE_URL
        self.model = model
        self.text = ""

    async def call(self, history: list[Any], tools: list[dict[str, object]]) -> ToolTurn:
        response = await self.client.chat.completions.create(
            model=self.model,
            messages=history,
            tools=tools,  # type: ignore[arg-type]
        )
        message = response.choices[0].message
        history.append(message)  # the model's own output, unchanged
        self.text = message.content or ""
        return self.codec.read_calls(message)

    def final_text(self) -> str:
        return self.text


class OpenAIResponses:
    """The Responses API through ``openai.AsyncOpenAI``; the full history is resent."""

    codec = openai_responses

    def __init__(self, model: str) -> None:
        from openai import AsyncOpenAI

        self.client = AsyncOpenAI()
        self.model = model
        self.text = ""

    async def call(self, history: list[Any], tools: list[dict[str, object]]) -> ToolTurn:
        response = await self.client.responses.create(
            model=self.model,
            input=history,
            tools=tools,  # type: ignore[arg-type]
        )
        history.extend(response.output)  # reasoning and calls, unchanged
        self.text = response.output_text
        return self.codec.read_calls(response)

    def final_text(self) -> str:
        return self.text


class AnthropicMessages:
    """The Messages API through ``anthropic.AsyncAnthropic``."""

    codec = anthropic_messages

    def __init__(self, model: str) -> None:
        from anthropic import AsyncAnthropic

        self.client = AsyncAnthropic()  # ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL
        self.model = model
        self.text = ""

    async def call(self, history: list[Any], tools: list[dict[str, object]]) -> ToolTurn:
        message = await self.client.messages.create(
            model=self.model,
            max_tokens=1024,
            messages=history,
            tools=tools,  # type: ignore[arg-type]
        )
        history.append({"role": "assistant", "content": message.content})  # unchanged
        self.text = "".join(getattr(b, "text", "") for b in message.content if b.type == "text")
        return self.codec.read_calls(message)

    def final_text(self) -> str:
        return self.text


MODELS: Final[dict[str, Callable[[str], Model]]] = {
    "openai_chat": OpenAIChat,
    "openai_responses": OpenAIResponses,
    "anthropic_messages": AnthropicMessages,
}


# -- the loop ---------------------------------------------------------------------------------


async def _abort_on_interrupt(
    abort: Abort, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    # Ctrl-C fires the batch's Abort instead of tearing the loop down: every call still
    # gets a result (the aborted ones say why), so the history stays answerable.
    with trio.open_signal_receiver(signal.SIGINT) as interrupts:
        task_status.started()
        async for _ in interrupts:
            abort.abort("interrupted by the user")
            return


async def run_batch(
    runtime: ToolRuntime,
    turn: ToolTurn,
    *,
    turn_timeout: float,
    show: Callable[[str], None] = print,
) -> BatchOutcome:
    """Run one turn's calls; the turn timeout or Ctrl-C fires the batch ``Abort``."""
    abort = Abort()
    async with trio.open_nursery() as nursery:
        # Ctrl-C is caught from here on, before any tool runs.
        await nursery.start(_abort_on_interrupt, abort)
        show(f"calling {', '.join(call.name for call in turn.calls)}")
        # timeout= fires the same Abort with the reason "batch timeout after <t> s".
        outcome = await run_tool_calls(runtime, turn.calls, abort=abort, timeout=turn_timeout)
        nursery.cancel_scope.cancel()  # the batch is over: stop watching for Ctrl-C
    return outcome


async def run_agent(
    model: Model,
    runtime: ToolRuntime,
    prompt: str,
    *,
    max_turns: int = 8,
    turn_timeout: float = 60.0,
    show: Callable[[str], None] = print,
) -> list[Any]:
    """Run the agent until a final answer, a concluding tool or ``max_turns``.

    Returns the history, which ends with the results of the last batch.
    """
    codec = model.codec
    tools = codec.tools(runtime.schemas())
    history: list[Any] = [{"role": "user", "content": prompt}]
    for _ in range(max_turns):
        turn = await model.call(history, tools)
        if not turn.calls:
            show(f"answer: {model.final_text()}")
            return history
        outcome = await run_batch(runtime, turn, turn_timeout=turn_timeout, show=show)
        if outcome.aborted:
            show(f"batch aborted: {outcome.abort_reason}")
        for committed in outcome.results:
            text = " ".join(b.text for b in committed.result.content if isinstance(b, TextContent))
            show(f"  {committed.call.name}: {text}")
        # Every call is answered, even when the turn ends here: the next user turn can go on.
        history.extend(codec.write_results(turn, outcome))
        if outcome.concludes_turn:
            show("turn concluded by a tool")
            return history
    show(f"stopped after {max_turns} model turns")
    return history


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: ``python examples/agent_loop.py --provider P PROMPT``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("prompt")
    parser.add_argument("--provider", choices=PROVIDERS, default="openai_chat")
    parser.add_argument("--model", default=os.environ.get("DSH_MODEL"))
    parser.add_argument("--turn-timeout", type=float, default=60.0)
    parser.add_argument("--max-turns", type=int, default=8)
    args = parser.parse_args(argv)
    model = MODELS[args.provider](args.model or DEFAULT_MODELS[args.provider])
    trio.run(
        lambda: run_agent(
            model,
            build_runtime(),
            args.prompt,
            max_turns=args.max_turns,
            turn_timeout=args.turn_timeout,
            show=functools.partial(print, flush=True),
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

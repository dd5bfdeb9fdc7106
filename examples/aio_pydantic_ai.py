"""dsh-trio as the tool executor of a pydantic-ai agent (asyncio), through ``dsh_sched.aio``.

``DshToolset`` is a pydantic-ai toolset whose tools are a ``ToolRuntime``'s tools (one scope's
view). pydantic-ai hands a toolset one call at a time, but it starts every call of one
parallel segment of a model response at once; the toolset gathers the calls that arrive in
the same event-loop step and runs them as one dsh-trio batch, so the batch scheduler's rules
apply to them (bounded pool, ``EXCLUSIVE`` calls as barriers, one result per call in model
order, cancellation drained). Each call's answer is its result's text (errors read
``Error: ...``), which is what the model sees.

Run it with ``python examples/aio_pydantic_ai.py`` (needs ``pydantic-ai-slim``); the model is
pydantic-ai's own ``FunctionModel``, so nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
from typing import Any

import trio
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from dsh_sched import BatchOutcome, ModelToolCall, Sink, aio
from dsh_tools import (
    Output,
    Scope,
    TextContent,
    ToolResult,
    ToolRuntime,
    define_tool,
    thaw_json,
    tool,
)

__all__ = ["DshToolset", "main", "text_of"]

# dsh-trio validates arguments itself (INVALID_ARGS results the model can correct), so
# pydantic-ai is told to accept any arguments and pass them on unchanged.
_ANY_ARGUMENTS = SchemaValidator(schema=core_schema.any_schema())


def text_of(result: ToolResult) -> str:
    """What the model is told: the result's text blocks, one per line."""
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


class _StepBatch:
    """The calls that arrived in one event-loop step, run as one dsh-trio batch."""

    def __init__(self, toolset: DshToolset, loop: asyncio.AbstractEventLoop) -> None:
        self.calls: list[tuple[int, ModelToolCall]] = []
        self.task: asyncio.Task[BatchOutcome] | None = None
        self.started: asyncio.Future[None] = loop.create_future()
        self._toolset = toolset
        # Runs after every call_tool already scheduled for this step has joined.
        loop.call_soon(self._start)

    def _start(self) -> None:
        self._toolset._gathering = None
        calls = [call for _, call in sorted(self.calls, key=lambda item: item[0])]
        self.task = asyncio.get_running_loop().create_task(
            aio.run_tool_calls(self._toolset.runtime, calls, **self._toolset.options)
        )
        self.started.set_result(None)


class DshToolset(AbstractToolset[Any]):
    """A pydantic-ai toolset executing its calls with dsh-trio.

    Args:
        runtime: The runtime whose tools the agent gets.
        scope: The scope whose view is exported and in which calls run.
        **options: Passed to every ``dsh_sched.aio.run_tool_calls`` (``max_parallel``,
            ``sink``, ``abort``, ...).
    """

    def __init__(self, runtime: ToolRuntime, *, scope: Scope | None = None, **options: Any):
        self.runtime = runtime
        self.options: dict[str, Any] = {"scope": scope, **options}
        self._scope = scope
        self._gathering: _StepBatch | None = None

    @property
    def id(self) -> str | None:
        return "dsh-trio"

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        return {
            schema.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=schema.name,
                    description=schema.description or None,
                    parameters_json_schema=thaw_json(schema.parameters),
                ),
                max_retries=0,
                args_validator=_ANY_ARGUMENTS,
            )
            for schema in self.runtime.schemas(self._scope)
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        call_id = ctx.tool_call_id or name
        call = ModelToolCall(call_id=call_id, name=name, arguments=tool_args)
        batch = self._gathering
        if batch is None:
            batch = self._gathering = _StepBatch(self, asyncio.get_running_loop())
        batch.calls.append((_position(ctx, call_id), call))
        await batch.started
        assert batch.task is not None
        try:
            # Shielded: the batch belongs to every call in it, not to this one waiter.
            outcome = await asyncio.shield(batch.task)
        except asyncio.CancelledError:
            # This call was cancelled (pydantic-ai cancels a step's calls together): the
            # batch is cancelled and drained before the cancellation goes on.
            batch.task.cancel()
            await asyncio.wait((batch.task,))
            raise
        (committed,) = [c for c in outcome.results if c.call is call]
        return text_of(committed.result)


def _position(ctx: RunContext[Any], call_id: str) -> int:
    """The call's index in the model response that made it (model order)."""
    for message in reversed(ctx.messages):
        if isinstance(message, ModelResponse):
            ids = [p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart)]
            if call_id in ids:
                return ids.index(call_id)
    return 0


# -- the demo ---------------------------------------------------------------------------------


@tool(is_concurrency_safe=True)
async def lookup(city: str) -> str:
    """Look up the weather of a city (parallel-safe)."""
    await trio.sleep(0.05)
    return f"{city}: sunny"


async def _save(args: Any, ctx: Any) -> str:
    await trio.sleep(0.01)
    return f"saved {args['note']}"


SAVE = define_tool(
    name="save_note",
    description="Save a note (changes state: runs alone).",
    parameters={"type": "object", "properties": {"note": {"type": "string"}}},
    output=Output(schema={"type": "string"}, render=lambda args, value: [TextContent(value)]),
    execute=_save,
)


def _model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    if len(messages) == 1:
        return ModelResponse(
            parts=[
                ToolCallPart(tool_name="lookup", args={"city": "Oslo"}, tool_call_id="c1"),
                ToolCallPart(tool_name="lookup", args={"city": "Lima"}, tool_call_id="c2"),
                ToolCallPart(tool_name="save_note", args={"note": "pack"}, tool_call_id="c3"),
            ]
        )
    answers = [p.content for p in messages[-1].parts if isinstance(p, ToolReturnPart)]
    return ModelResponse(parts=[TextPart(" / ".join(str(a) for a in answers))])


async def main(sink: Sink | None = None) -> str:
    """Run the demo agent once; return its final text."""
    runtime = ToolRuntime()
    runtime.register(lookup)
    runtime.register(SAVE)
    agent = Agent(FunctionModel(_model), toolsets=[DshToolset(runtime, sink=sink)])
    result = await agent.run("What is the weather, and remember to pack.")
    return result.output


if __name__ == "__main__":
    print(asyncio.run(main()))

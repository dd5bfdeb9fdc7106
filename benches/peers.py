"""The peer frameworks, each running the same batch of ``n`` no-op calls on asyncio.

Installed with the ``peers`` extra (``pip install -e '.[peers]'``). No model API is called:
the agent frameworks get a fake model that answers the first request with the batch of
``n`` tool calls and the second with a final text, so their figures include one agent run
of two model turns amortized over the batch.

Every peer's tool is ``noop(a: int, b: str) -> str`` with its arguments validated by the
framework (pydantic), the counterpart of dsh-trio's ``@tool`` configuration (c). Each peer
gets the calls in the form its framework receives them from a model: LangGraph and
langchain-core a parsed ``args`` dict, pydantic-ai and openai-agents the raw JSON text.

Systems:

- ``langgraph``: a compiled ``StateGraph`` (``START → ToolNode → END``) invoked with one
  ``AIMessage`` carrying the ``n`` tool calls.
- ``langchain``: ``StructuredTool.ainvoke`` per tool call, gathered with ``asyncio.gather``.
- ``pydantic-ai``: ``Agent.run`` with a ``FunctionModel``.
- ``openai-agents``: ``Runner.run`` with a fake ``Model`` and tracing disabled.

The imports of the frameworks are lazy: a process that measures one system imports only
that system's framework.
"""

from __future__ import annotations

import asyncio
import importlib.util
from typing import TYPE_CHECKING, Any, Final

from ._dsh import ARGUMENTS_JSON
from ._harness import Batch, System

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["PEER_KEYS", "PEER_MODULES", "available_systems", "noop"]

_ARGS: Final = {"a": 1, "b": "x"}

#: Peer key → the top-level package whose presence means the framework is installed
#: (looked up with ``find_spec``, which imports nothing for a top-level name).
PEER_MODULES: Final = {
    "langgraph": "langgraph",
    "langchain": "langchain_core",
    "pydantic-ai": "pydantic_ai",
    "openai-agents": "agents",
}
PEER_KEYS: Final = tuple(PEER_MODULES)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def available_systems() -> list[System]:
    """The peer systems whose framework is installed (nothing is imported here)."""
    systems = [
        System("langgraph", "LangGraph ToolNode in a compiled graph", "asyncio", _langgraph),
        System(
            "langchain", "langchain-core StructuredTool.ainvoke + gather", "asyncio", _langchain
        ),
        System("pydantic-ai", "pydantic-ai Agent.run, FunctionModel", "asyncio", _pydantic_ai),
        System("openai-agents", "openai-agents Runner.run, fake Model", "asyncio", _openai_agents),
    ]
    return [s for s in systems if _installed(PEER_MODULES[s.key])]


def _expect(n: int, count: Callable[[Any], int]) -> Callable[[object], None]:
    def check(value: object) -> None:
        got = count(value)
        if got != n:
            raise AssertionError(f"expected {n} tool results, got {got}")

    return check


# -- LangGraph / langchain-core -----------------------------------------------------------


async def noop(a: int, b: str) -> str:
    """Do nothing with two validated arguments (every peer's tool; its name is the tool's)."""
    return "ok"


def _lc_tool() -> Any:
    from langchain_core.tools import StructuredTool  # type: ignore[import-not-found, unused-ignore]

    return StructuredTool.from_function(coroutine=noop, name="noop", description="No-op.")


def _lc_calls(n: int) -> list[dict[str, Any]]:
    return [
        {"type": "tool_call", "name": "noop", "args": dict(_ARGS), "id": f"c{i}"} for i in range(n)
    ]


def _count_ok_messages(value: Any) -> int:
    return sum(1 for message in value if getattr(message, "content", None) == "ok")


def _langgraph(n: int) -> Batch:
    from langchain_core.messages import AIMessage  # type: ignore[import-not-found, unused-ignore]
    from langgraph.graph import (  # type: ignore[import-not-found, unused-ignore]
        END,
        START,
        MessagesState,
        StateGraph,
    )
    from langgraph.prebuilt import ToolNode  # type: ignore[import-not-found, unused-ignore]

    graph = StateGraph(MessagesState)
    graph.add_node("tools", ToolNode([_lc_tool()]))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    app = graph.compile()
    message = AIMessage(content="", tool_calls=_lc_calls(n))

    async def run() -> object:
        state = await app.ainvoke({"messages": [message]})
        return state["messages"][1:]

    return Batch(run, _expect(n, _count_ok_messages))


def _langchain(n: int) -> Batch:
    noop = _lc_tool()
    calls = _lc_calls(n)

    async def run() -> object:
        return await asyncio.gather(*(noop.ainvoke(call) for call in calls))

    return Batch(run, _expect(n, _count_ok_messages))


# -- pydantic-ai ----------------------------------------------------------------------------


def _pydantic_ai(n: int) -> Batch:
    from pydantic_ai import Agent  # type: ignore[import-not-found, unused-ignore]
    from pydantic_ai.messages import (  # type: ignore[import-not-found, unused-ignore]
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import (  # type: ignore[import-not-found, unused-ignore]
        FunctionModel,
    )

    batch_response = ModelResponse(
        parts=[
            ToolCallPart(tool_name="noop", args=ARGUMENTS_JSON, tool_call_id=f"c{i}")
            for i in range(n)
        ]
    )
    final_response = ModelResponse(parts=[TextPart("done")])

    def model(messages: list[Any], info: Any) -> Any:
        # First request: the batch; once the tool results are in: the final answer.
        return batch_response if len(messages) == 1 else final_response

    agent = Agent(FunctionModel(model))
    agent.tool_plain(noop)

    async def run() -> object:
        return await agent.run("go")

    def count(value: Any) -> int:
        return sum(
            1
            for message in value.all_messages()
            for part in message.parts
            if isinstance(part, ToolReturnPart) and part.content == "ok"
        )

    return Batch(run, _expect(n, count))


# -- openai-agents --------------------------------------------------------------------------


def _openai_agents(n: int) -> Batch:
    from agents import (  # type: ignore[import-not-found, unused-ignore]
        Agent,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from agents.items import ModelResponse  # type: ignore[import-not-found, unused-ignore]
    from agents.models.interface import Model  # type: ignore[import-not-found, unused-ignore]
    from agents.usage import Usage  # type: ignore[import-not-found, unused-ignore]
    from openai.types.responses import (  # type: ignore[import-not-found, unused-ignore]
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    set_tracing_disabled(True)
    batch_output = [
        ResponseFunctionToolCall(
            id=f"c{i}", call_id=f"c{i}", type="function_call", name="noop", arguments=ARGUMENTS_JSON
        )
        for i in range(n)
    ]
    final_output = [
        ResponseOutputMessage(
            id="final",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text="done", annotations=[])],
        )
    ]

    class FakeModel(Model):  # type: ignore[misc, unused-ignore]
        """Answers the first request with the batch, the next with a final text."""

        async def get_response(
            self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
        ) -> Any:
            first = isinstance(input, str) or not any(
                isinstance(item, dict) and item.get("type") == "function_call_output"
                for item in input
            )
            output = batch_output if first else final_output
            return ModelResponse(output=list(output), usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the benches never stream")

    agent = Agent(name="bench", model=FakeModel(), tools=[function_tool(noop)])

    async def run() -> object:
        return await Runner.run(agent, "go")

    def count(value: Any) -> int:
        return sum(
            1
            for item in value.new_items
            if item.type == "tool_call_output_item" and item.output == "ok"
        )

    return Batch(run, _expect(n, count))

"""Local tools and an MCP server's tools in one scope, with a restriction and approval.

Run it with ``python examples/mcp_source.py`` (needs ``pip install 'dsh-trio[mcp]'``). It
starts ``examples/mcp_notes_server.py`` over stdio, registers its tools next to two local
``@tool`` tools, hides one of them from a sub-agent, and runs one model batch through
``dsh_sched.run_tool_calls``: the read-only MCP calls run in parallel with the local ones,
the call that changes something is approved first, and the hidden one is unknown.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio
from mcp import StdioServerParameters

from dsh_sched import ModelToolCall, run_tool_calls
from dsh_tools import ApprovalOutcome, ApprovalRequest, ToolRuntime, tool
from dsh_tools.mcp import open_mcp_source

SERVER = Path(__file__).resolve().parent / "mcp_notes_server.py"


@tool(is_concurrency_safe=True)
async def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


@tool(is_concurrency_safe=True)
async def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


class ConsoleApproval:
    """An approval service that prints each request and allows it once."""

    async def request(self, request: ApprovalRequest) -> ApprovalOutcome:
        print(f"  approval asked for {request.tool_name}: {request.reason}")
        return ApprovalOutcome.ALLOWED_ONCE


async def main() -> None:
    runtime = ToolRuntime(approval=ConsoleApproval())
    agent = runtime.open_scope(name="agent")
    agent.register(word_count)
    agent.register(shout)
    server = StdioServerParameters(command=sys.executable, args=[str(SERVER)])
    # The notes server is ours: believe its hints (read-only tools may run in parallel).
    async with open_mcp_source(runtime, server, scope=agent, prefix="notes__", trusted=True):
        worker = runtime.open_scope(parent=agent, name="worker")
        worker.restrict(deny=["notes__delete_all"])  # the worker may not wipe the notes
        print("the worker sees:", ", ".join(s.name for s in runtime.schemas(worker)))
        calls = [
            ModelToolCall(call_id="1", name="word_count", arguments={"text": "one two three"}),
            ModelToolCall(call_id="2", name="notes__lookup", arguments={"title": "ideas"}),
            ModelToolCall(call_id="3", name="notes__lookup", arguments={"title": "groceries"}),
            ModelToolCall(call_id="4", name="shout", arguments={"text": "done reading"}),
            ModelToolCall(
                call_id="5", name="notes__save_note", arguments={"title": "todo", "text": "ship"}
            ),
            ModelToolCall(call_id="6", name="notes__delete_all", arguments={}),
        ]
        outcome = await run_tool_calls(runtime, calls, scope=worker)
        for committed in outcome.results:
            mode = committed.mode.name if committed.mode else "-"
            text = " ".join(getattr(block, "text", "") for block in committed.result.content)
            print(f"{committed.call.name:<20} {mode:<10} {text}")


if __name__ == "__main__":
    trio.run(main)

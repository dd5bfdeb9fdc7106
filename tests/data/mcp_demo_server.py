"""The MCP test server of the conformance fixtures (group X): ``MCPServer("demo")``.

Run as a script it serves over stdio; ``--http PORT`` serves streamable HTTP on 127.0.0.1.
``--port-file PATH`` (with ``--http 0``) writes the bound port there once listening.
When the environment variable ``DEMO_EVENTS`` names a file, every tool call appends one
line to it (``call <name>``, ``cancelled <name>``), so a test can see what the server saw.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

server: MCPServer[Any] = MCPServer("demo", log_level="CRITICAL")


def _event(line: str) -> None:
    path = os.environ.get("DEMO_EVENTS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


class Point(BaseModel):
    x: int
    y: int


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    _event("call add")
    return a + b


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def write_note(text: str) -> str:
    """Write a note (pretends to change the environment)."""
    _event("call write_note")
    return f"noted: {text}"


async def slow(seconds: float) -> str:
    """Sleep for a while, then answer."""
    _event("call slow")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _event("cancelled slow")
        raise
    return f"slept {seconds}"


server.add_tool(slow, annotations=ToolAnnotations(read_only_hint=True))


@server.tool()
def boom() -> str:
    """Always fails."""
    _event("call boom")
    raise RuntimeError("boom inside")


@server.tool()
def img() -> Image:
    """Return a tiny image."""
    return Image(data=b"\x89PNG\r\n\x1a\n", format="png")


@server.tool()
def point(x: int, y: int) -> Point:
    """Return a structured point."""
    return Point(x=x, y=y)


@server.tool()
def crash() -> str:
    """Exit the server process at once, mid-call."""
    _event("call crash")
    sys.stdout.flush()
    os._exit(3)


def extra() -> str:
    """A tool that mutate() adds."""
    return "extra!"


@server.tool()
async def mutate(action: str, ctx: Context) -> str:
    """Change the tool list (add_extra, remove_slow, describe_add), then signal the change."""
    if action == "add_extra":
        server.add_tool(extra)
    elif action == "remove_slow":
        server.remove_tool("slow")
    elif action == "describe_add":
        tool = server._tool_manager.get_tool("add")
        assert tool is not None
        tool.description = "Add two integers, described anew."
    # Both protocol eras: the subscription stream (2026-07-28) and the notification.
    await ctx.notify_tools_changed()
    try:
        await ctx.session.send_tool_list_changed()
    except Exception:  # not available on this connection's era
        pass
    return action


@server.tool()
def weird(value: Annotated[int | None, Field(ge=0)] = None) -> str:
    """Take an optional non-negative integer (an anyOf schema, outside the subset)."""
    return f"weird {value}"


def main() -> None:
    if len(sys.argv) >= 3 and sys.argv[1] == "--http":
        import uvicorn

        app = server.streamable_http_app(host="127.0.0.1")
        config = uvicorn.Config(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="error")
        uvicorn.Server(config).run()
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()

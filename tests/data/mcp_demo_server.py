"""The MCP test server of the conformance fixtures (group X): an ``MCPServer("demo")``.

Run as a script it serves over stdio; ``--http PORT-FILE`` serves streamable HTTP on
127.0.0.1 on an ephemeral port and writes that port to PORT-FILE once listening. Tests that
want it in-process call :func:`build_server`.

Environment: ``DEMO_EVENTS`` names a file to which the server appends one line per thing a
test wants to see (``call <tool>``, ``done slow``, ``cancelled slow``, ``list``);
``DEMO_LIST_DELAY`` makes every ``tools/list`` take that many seconds;
``DEMO_LIST_FAIL_AFTER=N`` makes every ``tools/list`` after the first N fail with a JSON-RPC
error; ``DEMO_EXTRA_TOOLS=N`` adds N filler tools; ``DEMO_EXIT_AT_START`` makes the
process exit before it serves anything. At start the server appends
``pid <its process id>`` to the events file.
"""

from __future__ import annotations

import contextlib
import os
import sys

if __name__ == "__main__" and os.environ.get("DEMO_EXIT_AT_START"):
    sys.exit(7)  # before the slow imports: a server that dies at once
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field


def _event(line: str) -> None:
    path = os.environ.get("DEMO_EVENTS")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


class Point(BaseModel):
    x: int
    y: int


class _DemoServer(MCPServer[Any]):
    listings = 0

    async def list_tools(self) -> Any:
        _event("list")
        self.listings += 1
        if self.listings > int(os.environ.get("DEMO_LIST_FAIL_AFTER", "1000000")):
            raise MCPError(-32603, "listing is broken")
        delay = float(os.environ.get("DEMO_LIST_DELAY", "0"))
        if delay:
            await anyio.sleep(delay)
        return await super().list_tools()


async def _signal_change(ctx: Context[Any]) -> None:
    # Both protocol eras: the subscription stream (2026-07-28) and the notification (earlier).
    await ctx.notify_tools_changed()
    with contextlib.suppress(Exception):  # not available on a connection of the other era
        await ctx.session.send_tool_list_changed()


def build_server() -> MCPServer[Any]:
    """A fresh demo server (each in-process test gets its own tool list)."""
    server = _DemoServer("demo", log_level="CRITICAL")

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
        _event("done slow")
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
        os._exit(3)

    def extra() -> str:
        """A tool that mutate() adds."""
        return "extra!"

    @server.tool()
    async def mutate(action: str, ctx: Context[Any]) -> str:
        """Change the tool list (add_extra, remove_slow, describe_add), then signal it."""
        if action == "add_extra":
            server.add_tool(extra)
        elif action == "remove_slow":
            server.remove_tool("slow")
        elif action == "describe_add":
            tool = server._tool_manager.get_tool("add")
            assert tool is not None
            tool.description = "Add two integers, described anew."
        await _signal_change(ctx)
        return action

    @server.tool()
    async def signal(times: int, ctx: Context[Any]) -> str:
        """Signal a tool list change ``times`` times without changing anything."""
        # A notification that is not about the tool list (earlier protocol versions only).
        with contextlib.suppress(Exception):
            await ctx.session.send_prompt_list_changed()
        for _ in range(times):
            await _signal_change(ctx)
        return "signalled"

    @server.tool()
    def weird(value: Annotated[int | None, Field(ge=0)] = None) -> str:
        """Take an optional non-negative integer (an anyOf schema, outside the subset)."""
        return f"weird {value}"

    for i in range(int(os.environ.get("DEMO_EXTRA_TOOLS", "0"))):
        server.add_tool(
            _filler, name=f"filler_{i}", annotations=ToolAnnotations(read_only_hint=True)
        )
    return server


def _filler(text: str) -> str:
    """A filler tool, so that a listing can be long (benches)."""
    return text


_HTTP_LIFETIME = 600.0  # seconds


def _serve_http(port_file: str) -> None:
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections queue from now on, before uvicorn accepts them
    app = build_server().streamable_http_app(host="127.0.0.1")
    # Bounded, in case the test that started it never stops it: requests and lifetime.
    config = uvicorn.Config(app, log_level="error", limit_max_requests=5000)
    server = uvicorn.Server(config)

    # Written whole, then renamed, so that a reader never sees a partial port number.
    with open(port_file + ".tmp", "w", encoding="utf-8") as f:
        f.write(str(sock.getsockname()[1]))
    os.replace(port_file + ".tmp", port_file)

    async def serve() -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(server.serve(sockets=[sock]), timeout=_HTTP_LIFETIME)

    import asyncio

    asyncio.run(serve())


def main() -> None:
    _event(f"pid {os.getpid()}")
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        _serve_http(sys.argv[2])
    else:
        build_server().run("stdio")


if __name__ == "__main__":
    main()

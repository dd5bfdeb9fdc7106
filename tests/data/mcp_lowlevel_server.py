"""A low-level MCP test server (``mcp.server.lowlevel.Server``), served over stdio.

It does what ``MCPServer`` will not: lists its tools over three pages, lists a tool whose
``inputSchema`` is not lossless JSON (``-0.0``), names tools that collide once made provider-safe,
returns every kind of content block, answers a call with a JSON-RPC error, and reports
errors without text. Each ``tools/call`` answer names the tool it received. With
``LOWLEVEL_ENDLESS`` set, its listing never ends (one tool per page).
"""

from __future__ import annotations

import os
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

_OBJECT = {"type": "object", "properties": {}}


def _tool(name: str, schema: dict[str, Any] | None = None) -> types.Tool:
    return types.Tool(name=name, description=f"The {name} tool.", input_schema=schema or _OBJECT)


PAGES: list[list[types.Tool]] = [
    [
        _tool("add", {"type": "object", "properties": {"a": {"type": "integer"}}}),
        _tool("get.weather", {"type": "object", "properties": {"city": {"type": "string"}}}),
        _tool("a.b"),
        _tool("a_b"),
    ],
    [
        _tool("run_code"),
        _tool("x" * 70),
        _tool(
            "negzero", {"type": "object", "properties": {"a": {"type": "number", "minimum": -0.0}}}
        ),
        _tool("rich"),
    ],
    [
        _tool("only_structured"),
        _tool("internal"),
        _tool("silent_error"),
        _tool("image_error"),
    ],
]


async def _list_tools(
    ctx: Any, params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    index = int(params.cursor) if params is not None and params.cursor else 0
    if os.environ.get("LOWLEVEL_ENDLESS"):  # a paginator that never ends
        return types.ListToolsResult(tools=[_tool(f"t{index}")], next_cursor=str(index + 1))
    more = str(index + 1) if index + 1 < len(PAGES) else None
    return types.ListToolsResult(tools=PAGES[index], next_cursor=more)


async def _call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    name = params.name
    if name == "rich":
        return types.CallToolResult(
            content=[
                types.AudioContent(type="audio", data="AAAA", mime_type="audio/wav"),
                types.ResourceLink(type="resource_link", uri="file:///a.txt", name="a"),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.TextResourceContents(uri="file:///b.txt", text="embedded text"),
                ),
                types.EmbeddedResource(
                    type="resource",
                    resource=types.BlobResourceContents(uri="file:///c.bin", blob="AAAA"),
                ),
            ]
        )
    if name == "only_structured":
        return types.CallToolResult(content=[], structured_content={"b": [1, 2], "é": "ü"})
    if name == "internal":
        raise MCPError(-32603, "internal")
    if name == "silent_error":
        return types.CallToolResult(content=[], is_error=True)
    if name == "image_error":
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text="bad image"),
                types.ImageContent(type="image", data="AAAA", mime_type="image/png"),
            ],
            is_error=True,
        )
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"called {name}")])


server: Server[Any] = Server("lowlevel", on_list_tools=_list_tools, on_call_tool=_call_tool)


async def _main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(_main)

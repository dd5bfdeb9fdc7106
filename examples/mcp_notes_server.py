"""A tiny MCP server for ``examples/mcp_source.py``: notes kept in memory, over stdio.

Written with the official ``mcp`` SDK; its annotations say which tools only read.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server: MCPServer[Any] = MCPServer("notes", log_level="ERROR")
NOTES: dict[str, str] = {"groceries": "milk, eggs", "ideas": "an MCP source for trio"}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(title: str) -> str:
    """Read the note with this title."""
    return NOTES.get(title, f"no note called {title!r}")


@server.tool()  # no hints: it may change its environment (the default)
def save_note(title: str, text: str) -> str:
    """Save a note (overwrites one with the same title)."""
    NOTES[title] = text
    return f"saved {title!r}"


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def delete_all() -> str:
    """Delete every note."""
    NOTES.clear()
    return "deleted everything"


if __name__ == "__main__":
    server.run("stdio")

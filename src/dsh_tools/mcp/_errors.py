"""The three errors an MCP tool call can fail with, and their codes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from dsh_tools import ContentBlock, HarnessError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "MCP_CONNECTION_LOST",
    "MCP_PROTOCOL_ERROR",
    "MCP_TOOL_ERROR",
    "McpConnectionError",
    "McpProtocolError",
    "McpToolError",
]

#: The code of :class:`McpToolError`: the server ran the tool and it reported an error.
MCP_TOOL_ERROR: Final = "MCP_TOOL_ERROR"
#: The code of :class:`McpProtocolError`: the server answered ``tools/call`` with a JSON-RPC error.
MCP_PROTOCOL_ERROR: Final = "MCP_PROTOCOL_ERROR"
#: The code of :class:`McpConnectionError`: the session is gone (lost or closed).
MCP_CONNECTION_LOST: Final = "MCP_CONNECTION_LOST"


class McpToolError(HarnessError):
    """Raised by an MCP tool's body when the server's result has ``isError`` set.

    The result the model sees is the standard failure (``Error: <message>``) with code
    ``MCP_TOOL_ERROR``.

    Args:
        message: The text of the server's error content.
        content: The server's error content, mapped to content blocks.
    """

    content: tuple[ContentBlock, ...]

    def __init__(self, message: str, content: Sequence[ContentBlock] = ()) -> None:
        self.content = tuple(content)
        # args are the constructor's own arguments, so pickle and copy rebuild an equal error.
        Exception.__init__(self, message, self.content)
        self.code = MCP_TOOL_ERROR


class McpProtocolError(HarnessError):
    """Raised by an MCP tool's body when the server answers ``tools/call`` with a JSON-RPC error.

    ``str(exc)`` is ``MCP error <mcp_code>: <message>``; the code is ``MCP_PROTOCOL_ERROR``.

    Args:
        mcp_code: The JSON-RPC error code (for example ``-32603``).
        message: The JSON-RPC error message.
    """

    mcp_code: int

    def __init__(self, mcp_code: int, message: str) -> None:
        self.mcp_code = mcp_code
        self.mcp_message = message
        Exception.__init__(self, mcp_code, message)
        self.code = MCP_PROTOCOL_ERROR

    def __str__(self) -> str:
        return f"MCP error {self.mcp_code}: {self.mcp_message}"


class McpConnectionError(HarnessError):
    """Raised by an MCP tool's body when its source is closed or its connection was lost.

    No request is sent once this has happened; the code is ``MCP_CONNECTION_LOST``.

    Args:
        message: ``MCP server "<label>" connection lost`` or ``... source is closed``.
    """

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        self.code = MCP_CONNECTION_LOST

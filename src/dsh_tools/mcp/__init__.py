"""MCP servers as tool sources: ``open_mcp_source`` registers a server's tools in a scope.

An MCP tool is an ordinary :class:`~dsh_tools.ToolDefinition`: restrictions, hooks,
approval, the timeout policy and the scheduler treat it like any other tool. Needs the
``mcp`` package (``pip install 'dsh-trio[mcp]'``).

Example:
    >>> from mcp import StdioServerParameters
    >>> async with open_mcp_source(runtime, StdioServerParameters(command="my-server"),
    ...                            scope=agent, prefix="fs__") as source:  # doctest: +SKIP
    ...     print(list(source.tools))
"""

try:
    import mcp as _mcp  # noqa: F401  (imported first, to say what is missing)
except ImportError:
    raise ImportError(
        "dsh_tools.mcp requires the mcp package (mcp>=2,<3): pip install 'dsh-trio[mcp]'"
    ) from None

from ._errors import (
    MCP_CONNECTION_LOST,
    MCP_PROTOCOL_ERROR,
    MCP_TOOL_ERROR,
    McpConnectionError,
    McpProtocolError,
    McpToolError,
)
from ._open import open_mcp_source
from ._source import McpToolSource
from ._tool import McpTool

__all__ = [
    "MCP_CONNECTION_LOST",
    "MCP_PROTOCOL_ERROR",
    "MCP_TOOL_ERROR",
    "McpConnectionError",
    "McpProtocolError",
    "McpTool",
    "McpToolError",
    "McpToolSource",
    "open_mcp_source",
]

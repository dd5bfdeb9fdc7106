"""``McpTool``: what the source records about one registered tool."""

from __future__ import annotations

from typing import final

import attrs

from dsh_tools import FrozenDict, ToolDefinition

__all__ = ["McpTool"]


@final
@attrs.frozen(kw_only=True)
class McpTool:
    """One registered tool of an MCP source.

    Attributes:
        name: The registered name (the prefix plus the MCP name made provider-safe).
        mcp_name: The server's name for the tool, used for calls.
        definition: The registered :class:`~dsh_tools.ToolDefinition`.
        validated: Whether arguments are checked before sending (the schema is in the
            supported subset).
        destructive: Whether the tool may change its environment (it then asks for approval).
        annotations: The server's annotations as wire JSON (``{"readOnlyHint": true}``), or
            ``None``.
    """

    name: str
    mcp_name: str
    definition: ToolDefinition
    validated: bool
    destructive: bool
    annotations: FrozenDict | None

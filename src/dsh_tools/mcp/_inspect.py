"""``python -m dsh_tools inspect mcp``: an MCP server's tools as dsh-trio would register them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh_tools import ToolCall, ToolRuntime

from ._open import open_mcp_source

if TYPE_CHECKING:
    from mcp import StdioServerParameters

__all__ = ["report"]


async def report(
    server: str | StdioServerParameters, *, trusted: bool = False, prefix: str = ""
) -> str:
    """Connect to ``server``, register its tools into a fresh runtime, and describe them.

    One line per registered tool: its name (and the server's, when they differ), its
    execution mode, whether a call asks for approval (with the default ``approval=None``,
    when the application has an approval service), and whether its schema is in the
    supported subset (then arguments are checked before sending). Then the skipped tools.
    """
    runtime = ToolRuntime()
    async with open_mcp_source(runtime, server, trusted=trusted, prefix=prefix) as source:
        trust = "trusted" if trusted else "untrusted: every tool runs alone and asks"
        lines = [f"## mcp {source.label} (protocol {source.protocol_version}, {trust})"]
        for name, tool in source.tools.items():
            mode = runtime.execution_mode(ToolCall(call_id="inspect", name=name)).name
            renamed = f' (MCP "{tool.mcp_name}")' if tool.mcp_name != name else ""
            approval = "asks (destructive)" if tool.destructive else "none"
            schema = "supported" if tool.validated else "outside the subset (the server checks)"
            lines.append(f"- {name}{renamed} [{mode}] approval: {approval}, schema: {schema}")
        if not source.tools:
            lines.append("(no tools registered)")
        if source.skipped:
            lines.append("skipped:")
            lines.extend(f'- "{name}": {why}' for name, why in source.skipped.items())
    return "\n".join(lines) + "\n"

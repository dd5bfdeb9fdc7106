"""``open_mcp_source``: check the options, build the client, hand back the source."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from mcp import Client, StdioServerParameters

from dsh_tools import Scope, ToolRuntime

from ._source import McpToolSource

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

__all__ = ["open_mcp_source"]

_PREFIX = re.compile(r"[A-Za-z0-9_-]*")


def _check_options(
    runtime: object,
    server: object,
    scope: object,
    prefix: object,
    trusted: object,
    approval: object,
    timeout: object,
    name: object,
) -> None:
    """The option checks of integrations §4.1, in their order."""
    if not isinstance(runtime, ToolRuntime):
        raise TypeError(f"runtime must be a ToolRuntime, got {type(runtime).__name__}")
    if not isinstance(server, str | StdioServerParameters | Client):
        raise TypeError(
            "server must be a URL str, an mcp.StdioServerParameters or an mcp.Client, "
            f"got {type(server).__name__}"
        )
    if isinstance(server, str) and not server.startswith(("http://", "https://")):
        raise ValueError("server URL must start with http:// or https://")
    if scope is not None:
        if not isinstance(scope, Scope):
            raise TypeError("scope must be a Scope or None")
        if scope.runtime is not runtime:
            raise ValueError("scope belongs to a different runtime")
        if scope.closed:
            raise RuntimeError("scope is closed")
    if not isinstance(prefix, str):
        raise TypeError("prefix must be a str")
    if _PREFIX.fullmatch(prefix) is None:
        raise ValueError('prefix may contain only A-Z, a-z, 0-9, "_" and "-"')
    if type(trusted) is not bool:
        raise TypeError("trusted must be a bool")
    if approval is not None and type(approval) is not bool:
        raise TypeError("approval must be True, False or None")
    if timeout is not None:
        if type(timeout) is not int and type(timeout) is not float:
            raise TypeError("timeout must be a positive finite number")
        if not (math.isfinite(timeout) and timeout > 0):
            raise ValueError("timeout must be a positive finite number")
    if name is not None and not isinstance(name, str):
        raise TypeError("name must be a str or None")


def open_mcp_source(
    runtime: ToolRuntime,
    server: str | StdioServerParameters | Client,
    *,
    scope: Scope | None = None,
    prefix: str = "",
    trusted: bool = False,
    approval: bool | None = None,
    timeout: float | None = None,
    name: str | None = None,
) -> AbstractAsyncContextManager[McpToolSource]:
    """Register an MCP server's tools for the duration of an ``async with`` block.

    Entering connects, lists the tools and registers them into ``scope`` (or the global
    layer); leaving disposes them and closes the connection. Inside the block the
    registrations follow the server's tool list.

    Args:
        runtime: The runtime to register into.
        server: An ``http://``/``https://`` URL (streamable HTTP), an
            ``mcp.StdioServerParameters`` (a subprocess), or an ``mcp.Client`` not yet
            entered.
        scope: The scope to register into; ``None`` for the global layer.
        prefix: Put before every registered name (``"fs__"``); only ``[A-Za-z0-9_-]``.
        trusted: Believe the server's annotations: read-only tools run in parallel and are
            not destructive. Untrusted (the default): every tool runs alone and is destructive.
        approval: ``None`` (the default): ask before a destructive tool when the runtime has
            an approval service; ``True``: always ask (denied without a service);
            ``False``: never ask.
        timeout: Each tool's ``timeout`` (enforced by ``install_timeout_policy``).
        name: The server's label in messages; default the server's own name, else ``"mcp"``.

    Returns:
        An async context manager that gives the :class:`McpToolSource`.

    Raises:
        TypeError: an option of the wrong type.
        ValueError: a URL that is not HTTP, a bad prefix or timeout, a foreign scope.
        RuntimeError: the scope is closed.

    Example:
        >>> async with open_mcp_source(runtime, "http://127.0.0.1:8000/mcp",
        ...                            scope=agent, prefix="fs__") as source:  # doctest: +SKIP
        ...     outcome = await run_tool_calls(runtime, calls, scope=agent)
    """
    _check_options(runtime, server, scope, prefix, trusted, approval, timeout, name)
    client = server if isinstance(server, Client) else Client(server)
    return McpToolSource._make(
        runtime,
        client,
        scope=scope,
        prefix=prefix,
        trusted=trusted,
        approval=approval,
        timeout=None if timeout is None else float(timeout),
        name=name,
    )

"""``McpToolSource``: an MCP server's tools as ordinary tool definitions in a scope.

The source connects an ``mcp.Client``, lists the server's tools, registers each one (or
records why not), asks for approval before destructive ones, and keeps the registrations in
step with the server's list until the ``async with`` block ends (integrations §4).
"""

from __future__ import annotations

import logging
import types
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, final

import anyio
import trio
from mcp import Client, MCPError
from mcp_types import CONNECTION_CLOSED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from dsh_tools import (
    Allow,
    Ask,
    Disposer,
    JsonValue,
    PreDecision,
    Scope,
    ToolArgsError,
    ToolDefinition,
    ToolExecution,
    ToolRunContext,
    ToolRuntime,
    freeze_json,
    thaw_json,
    validate_args,
)

from ._blocks import error_message, map_blocks, output, success_value
from ._errors import McpConnectionError, McpProtocolError, McpToolError
from ._listing import Listed, diff, listed, plan
from ._tool import McpTool

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from mcp.client.session import MessageHandlerFnT

    from dsh_tools import CallNext

__all__ = ["McpToolSource"]

logger = logging.getLogger("dsh_tools.mcp")

_MAX_PAGES: Final = 100
_LOSS_ERRORS: Final = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)


def _message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _is_loss(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what caused it) says that the connection is gone."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, _LOSS_ERRORS) or (
            isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED
        ):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


@final
class McpToolSource:
    """The live link between one MCP server and a runtime; made by :func:`open_mcp_source`.

    Attributes:
        label: ``name=``, else the server's name, else ``"mcp"`` (set when entered).
        client: The ``mcp.Client`` (entered inside the block: resources, prompts, ...).
    """

    label: str
    client: Client

    def __init__(self) -> None:
        raise TypeError("McpToolSource is made by open_mcp_source(); it has no public constructor")

    @classmethod
    def _make(
        cls,
        runtime: ToolRuntime,
        client: Client,
        *,
        scope: Scope | None,
        prefix: str,
        trusted: bool,
        approval: bool | None,
        timeout: float | None,
        name: str | None,
    ) -> McpToolSource:
        self = object.__new__(cls)
        self._setup(
            runtime,
            client,
            scope=scope,
            prefix=prefix,
            trusted=trusted,
            approval=approval,
            timeout=timeout,
            name=name,
        )
        return self

    def _setup(
        self,
        runtime: ToolRuntime,
        client: Client,
        *,
        scope: Scope | None,
        prefix: str,
        trusted: bool,
        approval: bool | None,
        timeout: float | None,
        name: str | None,
    ) -> None:
        self.label = name if name is not None else "mcp"
        self.client = client
        self._runtime = runtime
        self._owner: ToolRuntime | Scope = runtime if scope is None else scope
        self._prefix = prefix
        self._trusted = trusted
        self._approval = approval
        self._timeout = timeout
        self._name = name
        self._output = output()
        self._entered = False
        self._connected = False
        self._closed = False
        # MCP name -> what its registration was made from, and the registration itself.
        self._listed: dict[str, Listed] = {}
        self._entries: dict[str, tuple[McpTool, Disposer]] = {}
        self._tools: dict[str, McpTool] = {}
        self._skipped: dict[str, str] = {}
        self._destructive: dict[ToolDefinition, McpTool] = {}
        # Every disposer the source owns, in registration order (closing disposes LIFO).
        self._stack: dict[Disposer, None] = {}
        self._nursery_manager: AbstractAsyncContextManager[trio.Nursery] | None = None
        self._nursery: trio.Nursery | None = None
        self._due: trio.Event | None = None
        self._lock: trio.Lock | None = None

    # -- what users read ---------------------------------------------------------------

    @property
    def protocol_version(self) -> str:
        """The protocol version negotiated with the server."""
        return self.client.protocol_version

    @property
    def tools(self) -> Mapping[str, McpTool]:
        """Registered name → tool, in registration order (read-only, live)."""
        return types.MappingProxyType(self._tools)

    @property
    def skipped(self) -> Mapping[str, str]:
        """MCP name → why the tool is not registered, from the latest listing (read-only)."""
        return types.MappingProxyType(self._skipped)

    @property
    def connected(self) -> bool:
        """Whether the session is usable: entered, not closed and the connection not lost."""
        return self._connected and not self._closed

    @property
    def closed(self) -> bool:
        """Whether the ``async with`` block has ended."""
        return self._closed

    def __repr__(self) -> str:
        state = "closed" if self._closed else "connected" if self._connected else "not connected"
        return f"<McpToolSource {self.label!r} {state}, {len(self._tools)} tools>"

    # -- opening and closing -----------------------------------------------------------

    async def __aenter__(self) -> McpToolSource:
        if self._entered:
            raise RuntimeError("an MCP source can be entered only once")
        self._entered = True
        self._due = trio.Event()
        self._lock = trio.Lock()
        # The source hears notifications first; the client's own handler still gets them all.
        self.client.message_handler = self._chain(self.client.message_handler)
        try:
            await self.client.__aenter__()
        except BaseException:
            self._closed = True  # nothing to undo: the client cleaned up after itself
            raise
        try:
            info = self.client.server_info
            if self._name is None and info is not None and info.name:
                self.label = info.name
            self._connected = True
            self._nursery_manager = trio.open_nursery()
            self._nursery = await self._nursery_manager.__aenter__()
            try:
                await self._start_tasks(self._nursery)
            except BaseException:
                self._nursery.cancel_scope.cancel()
                await self._nursery_manager.__aexit__(None, None, None)
                raise
        except BaseException:
            self._closed = True
            self._dispose_all()
            await self._close_client()
            raise
        return self

    async def _start_tasks(self, nursery: trio.Nursery) -> None:
        capabilities = self.client.server_capabilities.tools
        if (
            self.protocol_version in MODERN_PROTOCOL_VERSIONS
            and capabilities is not None
            and capabilities.list_changed
        ):
            # Subscribed before the first listing, so that no change can fall in between:
            # a signal during the listing makes the refresher list once more.
            await nursery.start(self._listener)
        self._apply(await self._list())
        if self._approval is not False:
            self._stack[self._owner.on_pre_execute(self._approve)] = None
        nursery.start_soon(self._refresher)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        self._closed = True
        self._dispose_all()
        try:
            assert self._nursery is not None
            assert self._nursery_manager is not None
            self._nursery.cancel_scope.cancel()
            await self._nursery_manager.__aexit__(None, None, None)
        finally:
            await self._close_client()

    def _dispose_all(self) -> None:
        stack = list(self._stack)
        self._stack.clear()
        self._tools.clear()
        self._entries.clear()
        self._listed.clear()
        self._destructive.clear()
        for disposer in reversed(stack):
            disposer()

    async def _close_client(self) -> None:
        # Not wrapped in a cancel scope of ours: the client's own task group was entered
        # before any scope we could open here, so it must be exited outside of one.
        try:
            await self.client.__aexit__(None, None, None)
        except Exception as exc:
            logger.warning('MCP server "%s": closing failed: %s', self.label, _message(exc))

    # -- listing and registering -------------------------------------------------------

    async def _list(self) -> list[Listed]:
        tools: list[Listed] = []
        cursor: str | None = None
        for _ in range(_MAX_PAGES):
            try:
                page = await self.client.list_tools(cursor=cursor, cache_mode="refresh")
            except Exception as exc:
                if _is_loss(exc):
                    self._connected = False
                raise
            tools.extend(listed(tool) for tool in page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return tools
        logger.warning(
            'MCP server "%s": tools/list has more than %d pages; the rest is ignored',
            self.label,
            _MAX_PAGES,
        )
        return tools

    def _apply(self, listing: list[Listed]) -> None:
        """Bring the registrations in line with ``listing`` (integrations §4.5 order)."""
        removed, changed, added = diff(self._listed, listing)
        for mcp_name in removed:
            self._unregister(mcp_name)
        for tool in changed:
            self._unregister(tool.mcp_name)
        previous = self._skipped
        self._skipped = {}
        taken = {name: tool.mcp_name for name, tool in self._tools.items()}
        for tool in [*changed, *added]:
            reason = self._register(tool, taken)
            if reason is None:
                continue
            self._skipped[tool.mcp_name] = reason
            # A tool that stays skipped for the same reason is reported once, not per refresh.
            if previous.get(tool.mcp_name) != reason:
                logger.warning(
                    'MCP server "%s": tool "%s" skipped: %s', self.label, tool.mcp_name, reason
                )

    def _register(self, tool: Listed, taken: dict[str, str]) -> str | None:
        """Register one listed tool; return why not, or ``None``."""
        p = plan(tool, prefix=self._prefix, trusted=self._trusted, taken=taken)
        if p.skip is not None:
            return p.skip
        definition = ToolDefinition(
            name=p.name,
            description=tool.description,
            parameters=tool.input_schema,
            output=self._output,
            # A frozen copy for the checks: a frozen schema is compiled once, not per call.
            execute=self._body(
                tool.mcp_name, freeze_json(tool.input_schema) if p.validated else None
            ),
            timeout=self._timeout,
            is_concurrency_safe=p.parallel,
        )
        try:
            disposer = self._owner.register(definition)
        except Exception as exc:  # a taken or reserved name, a failing change observer
            return _message(exc)
        registered = McpTool(
            name=p.name,
            mcp_name=tool.mcp_name,
            definition=definition,
            validated=p.validated,
            destructive=p.destructive,
            annotations=tool.annotations,
        )
        taken[p.name] = tool.mcp_name
        self._listed[tool.mcp_name] = tool
        self._entries[tool.mcp_name] = (registered, disposer)
        self._tools[p.name] = registered
        self._stack[disposer] = None
        if p.destructive:
            self._destructive[definition] = registered
        return None

    def _unregister(self, mcp_name: str) -> None:
        registered, disposer = self._entries.pop(mcp_name)
        del self._listed[mcp_name]
        del self._tools[registered.name]
        self._destructive.pop(registered.definition, None)
        self._stack.pop(disposer, None)
        disposer()

    # -- approval ------------------------------------------------------------------------

    async def _approve(
        self, execution: ToolExecution, call_next: CallNext[PreDecision]
    ) -> PreDecision:
        definition = self._runtime.get(execution.name, execution.scope)
        tool = None if definition is None else self._destructive.get(definition)
        if tool is None:
            return await call_next()
        decision = await call_next()  # later hooks run first; their Deny or Ask stands
        if isinstance(decision, Allow) and (
            self._approval is True or self._runtime.approval is not None
        ):
            return Ask(
                f'MCP tool "{tool.mcp_name}" of server "{self.label}" may change its environment'
            )
        return decision

    # -- calls ---------------------------------------------------------------------------

    def _body(
        self, mcp_name: str, parameters: object | None
    ) -> Callable[[JsonValue, ToolRunContext], Awaitable[object]]:
        async def execute(args: JsonValue, ctx: ToolRunContext) -> object:
            return await self._call(mcp_name, parameters, args)

        return execute

    def _gone(self) -> McpConnectionError:
        if self._closed:
            return McpConnectionError(f'MCP server "{self.label}" source is closed')
        return McpConnectionError(f'MCP server "{self.label}" connection lost')

    async def _call(self, mcp_name: str, parameters: object | None, args: JsonValue) -> object:
        if not self.connected:
            raise self._gone()
        if not isinstance(args, Mapping):
            raise ToolArgsError(['"arguments" must be an object'])
        if parameters is not None:
            violations = validate_args(parameters, args)
            if violations:
                raise ToolArgsError(violations)
        try:
            result = await self.client.call_tool(mcp_name, thaw_json(args))
        except (MCPError, *_LOSS_ERRORS) as exc:
            if isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED:
                raise McpProtocolError(exc.code, exc.message) from None
            self._connected = False
            raise self._gone() from None
        blocks = map_blocks(result.content)
        if result.is_error:
            raise McpToolError(error_message(blocks, mcp_name), blocks)
        return success_value(blocks, result.structured_content)

    # -- following the server's list -----------------------------------------------------

    def _chain(self, inner: MessageHandlerFnT | None) -> MessageHandlerFnT:
        async def handler(message: Any) -> None:
            if getattr(message, "method", None) == "notifications/tools/list_changed":
                self._signal()
            if inner is not None:
                await inner(message)
            else:
                await trio.lowlevel.checkpoint()

        return handler

    def _signal(self) -> None:
        """Mark a refresh as due; the refresher task runs it (never the notifier's task)."""
        assert self._due is not None
        self._due.set()

    async def refresh(self) -> None:
        """List the server's tools now and apply the changes.

        Returns after a listing that started after the call. Refreshes run one at a time.

        Raises:
            RuntimeError: ``MCP source is closed`` (or not entered yet).
            Exception: whatever listing raised (the registrations are then unchanged).
        """
        if self._closed or self._lock is None:
            raise RuntimeError("MCP source is closed" if self._closed else "MCP source is not open")
        async with self._lock:
            listing = await self._list()
            if self._closed:
                raise RuntimeError("MCP source is closed")
            self._apply(listing)

    async def _refresher(self) -> None:
        while True:
            assert self._due is not None
            await self._due.wait()
            # Signals from now on ask for one more refresh; earlier ones are served by this one.
            self._due = trio.Event()
            try:
                await self.refresh()
            except Exception as exc:
                logger.warning('MCP server "%s": tools/list failed: %s', self.label, _message(exc))

    async def _listener(
        self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        started = False
        try:
            async with self.client.listen(tools_list_changed=True) as subscription:
                task_status.started()
                started = True
                async for _event in subscription:
                    self._signal()
        except Exception as exc:
            if _is_loss(exc):
                self._connected = False
        if not started:
            task_status.started()
        if self.connected:
            logger.warning(
                'MCP server "%s": the tool change stream ended; call refresh() to update the tools',
                self.label,
            )

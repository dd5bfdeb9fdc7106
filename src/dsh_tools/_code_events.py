"""Code Mode's three events: a sub-call started, a sub-call settled, and the log waterfall.

The records are log-only (nothing derived from them becomes a context or a model message).
Their hooks live in the registry's hook tables like every other hook, so registration order,
scoping by the sub-call's scope (the ``run_code`` call's scope), snapshots and disposal
follow the same rules (code-mode §6).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, final

import attrs

from ._calls import ToolExecution
from ._content import ContentBlock
from ._definition import close_awaitable
from ._errors import normalize_message
from ._json import JsonValue, thaw_json
from ._results import ToolResult
from ._stage_finish import observer_failure
from ._success import as_blocks

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ._hooks import CallNext
    from ._registry import Registry
    from ._scope import Scope

__all__ = [
    "CODE_DISPATCH",
    "CODE_DISPATCH_LOG",
    "CODE_DISPATCH_START",
    "CodeDispatch",
    "CodeDispatchLogHook",
    "CodeDispatchObserver",
    "CodeDispatchStart",
    "CodeDispatchStartObserver",
    "code_hooks",
    "emit_code_dispatch",
    "emit_code_dispatch_start",
    "logged_content",
]

logger = logging.getLogger("dsh_tools")

#: The registry's hook-table keys of the three events.
CODE_DISPATCH_START = "code_dispatch_start"
CODE_DISPATCH = "code_dispatch"
CODE_DISPATCH_LOG = "code_dispatch_log"


@final
@attrs.frozen(kw_only=True)
class CodeDispatchStart:
    """A Code Mode sub-call was started (event ``tools/code-dispatch-start``).

    Attributes:
        root_call_id: The ``run_code`` call's ``root_call_id``.
        parent_call_id: The ``run_code`` call's ``call_id``.
        sub_call_id: ``"<parent_call_id>:code:<n>"``, ``n`` counting accepted calls from 1.
        name: The tool the program called.
        arguments: The frozen arguments the sub-call was created with.
        execution: The sub-call's execution (its ``parent`` is the ``run_code`` token).
    """

    root_call_id: str
    parent_call_id: str
    sub_call_id: str
    name: str
    arguments: JsonValue
    execution: ToolExecution = attrs.field(repr=False, eq=False)

    def to_json(self) -> dict[str, object]:
        """The lossless JSON form: the ids, ``name`` and ``arguments`` (never ``execution``).

        Example:
            >>> event.to_json()["sub_call_id"]  # doctest: +SKIP
            'c1:code:1'
        """
        return _ids_json(self)


@final
@attrs.frozen(kw_only=True)
class CodeDispatch:
    """A Code Mode sub-call settled (event ``tools/code-dispatch``).

    The fields of :class:`CodeDispatchStart`, plus:

    Attributes:
        root_call_id: The ``run_code`` call's ``root_call_id``.
        parent_call_id: The ``run_code`` call's ``call_id``.
        sub_call_id: ``"<parent_call_id>:code:<n>"``.
        name: The tool the program called.
        arguments: The frozen arguments the sub-call was created with.
        execution: The sub-call's execution.
        is_error: Whether the sub-call failed.
        content: The content as logged (after the ``tools/code-dispatch-log`` waterfall).
        result: The sub-call's final result, the object its result observers received.
    """

    root_call_id: str
    parent_call_id: str
    sub_call_id: str
    name: str
    arguments: JsonValue
    execution: ToolExecution = attrs.field(repr=False, eq=False)
    is_error: bool
    content: tuple[ContentBlock, ...]
    result: ToolResult = attrs.field(repr=False)

    def to_json(self) -> dict[str, object]:
        """The lossless JSON form: :meth:`CodeDispatchStart.to_json`'s keys plus ``is_error``
        and ``content`` (as block JSON); never ``execution`` or ``result``."""
        out = _ids_json(self)
        out["is_error"] = self.is_error
        out["content"] = [block.to_json() for block in self.content]
        return out


def _ids_json(event: CodeDispatchStart | CodeDispatch) -> dict[str, object]:
    return {
        "root_call_id": event.root_call_id,
        "parent_call_id": event.parent_call_id,
        "sub_call_id": event.sub_call_id,
        "name": event.name,
        "arguments": thaw_json(event.arguments),
    }


class CodeDispatchStartObserver(Protocol):
    """A Code Mode sub-call started.

    Event ``tools/code-dispatch-start`` (emit). Called synchronously right after the
    sub-call's execution was created, before its pre-execute hooks. A failure is logged at
    WARNING and changes nothing.
    """

    def __call__(self, event: CodeDispatchStart) -> None: ...


class CodeDispatchObserver(Protocol):
    """A Code Mode sub-call settled.

    Event ``tools/code-dispatch`` (emit). Called synchronously once per started sub-call,
    in the order the program's calls were accepted, with its final result and the content
    as logged. A failure is logged at WARNING and changes nothing.
    """

    def __call__(self, event: CodeDispatch) -> None: ...


class CodeDispatchLogHook(Protocol):
    """Rewrite the content logged for a settled sub-call.

    Event ``tools/code-dispatch-log`` (waterfall). Return ``await call_next()`` to delegate
    (the default is the sub-call's own content) or a sequence of content blocks to log
    instead (redaction, truncation). It changes only what the ``tools/code-dispatch`` event
    carries, never the sub-call's result or what the program receives. A hook that raises
    or returns something else is logged at WARNING and the original content is logged.
    """

    async def __call__(
        self, event: CodeDispatch, call_next: CallNext[tuple[ContentBlock, ...]]
    ) -> Sequence[ContentBlock]: ...


# -- emission ------------------------------------------------------------------------------


def _emit(observers: tuple[Callable[..., Any], ...], label: str, event: object) -> None:
    for observer in observers:
        message = observer_failure(observer, event)
        if message is not None:
            logger.warning("%s observer failed: %s", label, message)


def code_hooks(registry: Registry, scope: Scope | None, key: str) -> tuple[Callable[..., Any], ...]:
    """The hooks of one of the three events that apply to ``scope``, in registration order.

    A snapshot: a hook registered or disposed meanwhile changes nothing. Empty when none
    applies, so that an event nobody listens to costs no record.
    """
    return registry.hooks(key, scope)


def emit_code_dispatch_start(
    observers: tuple[Callable[..., Any], ...], event: CodeDispatchStart
) -> None:
    """Tell ``tools/code-dispatch-start`` observers (a snapshot from :func:`code_hooks`)."""
    _emit(observers, "tools/code-dispatch-start", event)


def emit_code_dispatch(observers: tuple[Callable[..., Any], ...], event: CodeDispatch) -> None:
    """Tell ``tools/code-dispatch`` observers (a snapshot from :func:`code_hooks`)."""
    _emit(observers, "tools/code-dispatch", event)


async def logged_content(
    hooks: tuple[Callable[..., Any], ...], event: CodeDispatch
) -> tuple[ContentBlock, ...]:
    """Run the contained ``tools/code-dispatch-log`` waterfall over ``event.content``.

    First registered is outermost. A hook that raises, or a chain whose value is not a
    list/tuple of content blocks, is logged at WARNING and the original content comes back.
    Cancellation and ``KeyboardInterrupt``-like exceptions propagate.
    """
    try:
        value = await _run_log(hooks, 0, event)
    except Exception as exc:
        logger.warning("tools/code-dispatch-log hook failed: %s", normalize_message(exc))
        return event.content
    blocks = as_blocks(value)
    if blocks is None:
        close_awaitable(value)
        logger.warning(
            "tools/code-dispatch-log hook returned %s; expected a sequence of content blocks",
            type(value).__name__,
        )
        return event.content
    return blocks


async def _run_log(hooks: tuple[Callable[..., Any], ...], i: int, event: CodeDispatch) -> Any:
    if i == len(hooks):
        return event.content
    return await hooks[i](event, partial(_run_log, hooks, i + 1, event))

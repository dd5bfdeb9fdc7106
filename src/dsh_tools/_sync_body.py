"""Synchronous tool bodies: a plain ``def`` given to ``@tool`` or ``define_tool``.

A body declared non-blocking (``blocking=False``) is called inline, in the trio thread: it
has no checkpoint, so nothing can interrupt it, and it must return quickly. Any other plain
``def`` runs in a worker thread with ``trio.to_thread.run_sync``; the call waits for the
thread to finish even when its cancel scope is cancelled (the thread is never abandoned),
so the abort and timeout rules see a body that ignored its cancellation: a success it
returns after the ``Abort`` fired becomes ``ABORTED`` (check E), and after the tool's own
deadline ``TOOL_TIMEOUT``. A success returned before either is kept.
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any, Final

import trio

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

__all__ = ["async_body"]


def _is_plain_def(fn: object) -> bool:
    """A ``def`` (function or bound method, possibly in a ``functools.partial``) that is not
    a coroutine, async generator or generator function."""
    inner = fn
    while isinstance(inner, functools.partial):
        inner = inner.func
    if not (inspect.isfunction(inner) or inspect.ismethod(inner)):
        return False
    return not (
        inspect.iscoroutinefunction(inner)
        or inspect.isasyncgenfunction(inner)
        or inspect.isgeneratorfunction(inner)
    )


#: Return types that are never awaitable: no need for ``inspect.isawaitable``'s ABC check.
_PLAIN: Final = frozenset({str, int, float, bool, type(None), dict, list, tuple})


def _returned(label: str, value: object) -> object:
    if type(value) in _PLAIN:
        return value
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()  # never awaited: no "coroutine was never awaited" warning
        raise TypeError(f"{label}: the plain def returned an awaitable; declare it async def")
    return value


def async_body(
    label: str, fn: Callable[..., Any], blocking: bool | None
) -> Callable[..., Awaitable[Any]] | None:
    """The body to await for ``fn``: ``fn`` itself for an ``async def``, an async wrapper
    for a plain ``def`` (inline if ``blocking`` is ``False``, else in a worker thread), and
    ``None`` for any other callable (the caller decides).

    Raises:
        TypeError: ``blocking`` is given for something that is not a plain ``def``.
    """
    if not _is_plain_def(fn):
        if blocking is not None:
            raise TypeError(f"{label}: blocking= applies to a plain def only")
        return fn if inspect.iscoroutinefunction(fn) else None
    if blocking is False:

        async def inline(*args: Any, **kwargs: Any) -> object:
            return _returned(label, fn(*args, **kwargs))

        return inline

    async def in_thread(*args: Any, **kwargs: Any) -> object:
        value = await trio.to_thread.run_sync(
            functools.partial(fn, *args, **kwargs), abandon_on_cancel=False
        )
        return _returned(label, value)

    return in_thread

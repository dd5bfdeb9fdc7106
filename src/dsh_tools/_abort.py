"""``Abort``: a one-shot, trio-aware cancellation request shared by a caller and the runtime."""

from __future__ import annotations

from typing import TYPE_CHECKING, final

import trio

if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from types import TracebackType

__all__ = ["Abort"]


@final
class Abort:
    """A one-shot request to abort tool calls.

    It may be created outside ``trio.run``. Firing it cancels every cancel scope opened
    with :meth:`move_on_abort` on it (which includes the per-call scope of every tool body
    running under it) and wakes :meth:`wait`. It cancels tool bodies only: it is not a trio
    cancellation of the caller. One ``Abort`` may serve many calls at once.

    Call :meth:`abort` from the trio thread; from another thread use
    ``trio.from_thread.run_sync(abort.abort)``.

    Example:
        >>> abort = Abort()
        >>> abort.abort("user pressed stop")
        >>> abort.aborted, abort.reason
        (True, 'user pressed stop')
    """

    __slots__ = ("_aborted", "_event", "_reason", "_scopes")

    def __init__(self) -> None:
        self._aborted = False
        self._reason: object = None
        # Open move_on_abort() scopes. A dict keeps insertion order and O(1) removal.
        self._scopes: dict[trio.CancelScope, None] = {}
        self._event: trio.Event | None = None

    def __repr__(self) -> str:
        state = f"aborted, reason={self._reason!r}" if self._aborted else "not aborted"
        return f"<Abort {state}>"

    @property
    def aborted(self) -> bool:
        """Whether :meth:`abort` has been called."""
        return self._aborted

    @property
    def reason(self) -> object:
        """The reason given to the first :meth:`abort`; ``None`` until then."""
        return self._reason

    @trio.lowlevel.enable_ki_protection
    def abort(self, reason: object = None) -> None:
        """Fire the abort (idempotent: the first reason is kept).

        Cancels the scope of every :meth:`move_on_abort` block open on this ``Abort`` and
        wakes every :meth:`wait`-er.
        """
        if self._aborted:
            return
        self._aborted = True
        self._reason = reason
        scopes, self._scopes = self._scopes, {}
        for scope in scopes:
            scope.cancel()
        if self._event is not None:
            self._event.set()

    async def wait(self) -> None:
        """Return once the abort has fired. A checkpoint, like ``trio.Event.wait``."""
        if self._event is None:
            self._event = trio.Event()
            if self._aborted:
                self._event.set()
        await self._event.wait()

    def move_on_abort(self) -> AbstractContextManager[trio.CancelScope]:
        """Open a ``with`` block whose cancel scope is cancelled when this ``Abort`` fires.

        Like ``trio.move_on_after``: the ``Cancelled`` it causes ends the block and is
        absorbed there (``cancelled_caught``). If the abort has already fired, the block is
        cancelled at its first checkpoint. Leaving the block unregisters the scope, so a
        long-lived ``Abort`` holds nothing for finished blocks.

        Returns:
            A context manager whose ``__enter__`` returns the ``trio.CancelScope``.

        Example:
            >>> async def slow_step(execution):  # doctest: +SKIP
            ...     with execution.abort.move_on_abort():
            ...         await trio.sleep(10)
        """
        return _AbortScope(self)


@final
class _AbortScope:
    """The context manager behind :meth:`Abort.move_on_abort` (a class: no generator cost)."""

    __slots__ = ("_abort", "_scope")

    def __init__(self, abort: Abort) -> None:
        self._abort = abort
        self._scope = trio.CancelScope()

    @trio.lowlevel.enable_ki_protection
    def __enter__(self) -> trio.CancelScope:
        scope = self._scope
        abort = self._abort
        if abort._aborted:
            scope.cancel()
        else:
            abort._scopes[scope] = None
        scope.__enter__()
        return scope

    @trio.lowlevel.enable_ki_protection
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        # Unregister first (a finally in spirit): a long-lived Abort must not keep finished
        # scopes alive, whatever the block raised.
        self._abort._scopes.pop(self._scope, None)
        return self._scope.__exit__(exc_type, exc, tb)

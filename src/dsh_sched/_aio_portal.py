"""The portal: one trio guest run living inside a running asyncio event loop.

asyncio code hands trio work to the portal (``Portal.run``); each piece of work runs as a
task of the portal's nursery, in a copy of the calling asyncio task's context. Cancelling
the awaiting asyncio task cancels that trio task, and the ``await`` ends only once the trio
task has ended (drained), so trio's guarantees hold from the asyncio side (integrations §3).

The portal of a thread is remembered per thread, because trio allows exactly one run per
thread and asyncio exactly one running loop per thread: the two records have the same shape.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from typing import TYPE_CHECKING, Any, Generic, TypeVar, TypeVarTuple, final

import outcome
import trio

from dsh_tools.lowlevel import is_cancellation

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from contextlib import AbstractAsyncContextManager
    from types import TracebackType

__all__ = [
    "E_CLOSED",
    "E_IN_TRIO",
    "E_NO_LOOP",
    "Portal",
    "check_host",
    "current_portal",
    "portal",
    "portal_for",
]

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")

_log = logging.getLogger("dsh_sched")

E_IN_TRIO = (
    "dsh_sched.aio cannot be used inside a trio run; "
    "await dsh_sched.run_tool_calls() from trio instead"
)
E_NO_LOOP = "dsh_sched.aio needs a running asyncio event loop"
E_CLOSED = "dsh_sched.aio portal is closed"
E_STOPPED = "dsh_sched.aio portal stopped unexpectedly"
E_STALE = (
    "dsh_sched.aio cannot start: this thread still runs the portal of an asyncio loop that "
    "is no longer running (end loops with asyncio.run(), or use async with "
    "dsh_sched.aio.portal())"
)
E_FOREIGN = (
    "dsh_sched.aio cannot start: this thread already runs a trio run that dsh_sched.aio "
    "did not start"
)
E_OTHER_LOOP = "dsh_sched.aio portal belongs to another event loop"

# The portal whose trio run this thread is running, if any (cleared when the run ends).
_threads = threading.local()


def current_portal() -> Portal | None:
    """The portal whose trio guest run is alive in this thread, or ``None``."""
    found: Portal | None = getattr(_threads, "portal", None)
    return found


def check_host() -> asyncio.AbstractEventLoop:
    """The first two checks of every asyncio-side entry point (integrations §3.2 item 1).

    Raises:
        RuntimeError: Called from a trio task, or with no running asyncio loop.
    """
    if trio.lowlevel.in_trio_task():
        raise RuntimeError(E_IN_TRIO)
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise RuntimeError(E_NO_LOOP) from None


def portal_for(loop: asyncio.AbstractEventLoop) -> tuple[Portal, bool]:
    """The running portal of ``loop``, started if there is none; and whether it was started.

    Raises:
        RuntimeError: The loop's portal is closing, or the thread holds another trio run.
    """
    found = current_portal()
    if found is not None:
        if found.loop is loop:
            if found.closed:
                raise RuntimeError(E_CLOSED)
            return found, False
        # Only one loop runs per thread, so the loop of that live run is not running.
        raise RuntimeError(E_STALE)
    if trio.lowlevel.in_trio_run():
        raise RuntimeError(E_FOREIGN)
    return Portal._start(loop), True


@final
class _Call(Generic[_T]):
    """One piece of trio work requested from asyncio, and what became of it."""

    __slots__ = ("error", "finished", "pending", "scope", "value", "waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop, pending: set[_Call[Any]]) -> None:
        self.scope = trio.CancelScope()
        # The asyncio side awaits this; a cancellation of that task cancels it, and the
        # asyncio side then waits on a fresh one (see Portal._submit).
        self.waiter: asyncio.Future[None] = loop.create_future()
        self.finished = False
        self.value: _T | None = None
        self.error: BaseException | None = None
        # The portal's unfinished calls, which a run that ends answers (Portal._run_ended).
        self.pending = pending
        pending.add(self)

    def finish(self) -> None:
        self.finished = True
        self.pending.discard(self)
        if not self.waiter.done():
            self.waiter.set_result(None)


@final
class Portal:
    """The trio guest run of one asyncio event loop (integrations §3.1).

    Obtained from :func:`dsh_sched.aio.portal`; :func:`dsh_sched.aio.run_tool_calls` uses
    the same one. Hand trio work to it with :meth:`run`.

    Attributes:
        loop: The asyncio event loop hosting the trio run.
        closed: Whether the portal refuses new work (its block was left, or its loop is
            shutting down, or the run ended).
    """

    __slots__ = (
        "_ended",
        "_keeper",
        "_nursery",
        "_pending",
        "_ready",
        "_stop",
        "_stopped_by_us",
        "_token",
        "closed",
        "loop",
    )

    loop: asyncio.AbstractEventLoop
    closed: bool
    _nursery: trio.Nursery | None
    _token: trio.lowlevel.TrioToken | None
    _stop: trio.Event
    _stopped_by_us: bool
    _pending: set[_Call[Any]]
    _ready: asyncio.Future[None]
    _ended: asyncio.Future[None]
    _keeper: asyncio.Task[None]

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError("Portal has no public constructor; use dsh_sched.aio.portal()")

    @classmethod
    def _start(cls, loop: asyncio.AbstractEventLoop) -> Portal:
        self = object.__new__(cls)
        self.loop = loop
        self.closed = False
        self._nursery = None
        self._token = None
        self._stop = trio.Event()
        self._stopped_by_us = False
        self._pending = set()
        self._ready = loop.create_future()
        self._ended = loop.create_future()
        # A fresh context: the run and the keeper must not keep the first caller's
        # context variables alive for the loop's lifetime.
        contextvars.Context().run(
            trio.lowlevel.start_guest_run,
            self._main,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            run_sync_soon_not_threadsafe=loop.call_soon,
            done_callback=self._run_ended,
            # SIGINT stays asyncio's: asyncio.run turns it into a cancellation.
            host_uses_signal_set_wakeup_fd=True,
            strict_exception_groups=True,
        )
        _threads.portal = self
        self._keeper = loop.create_task(
            self._keep(), name="dsh_sched.aio keeper", context=contextvars.Context()
        )
        return self

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<dsh_sched.aio.Portal {state} on {self.loop!r}>"

    # -- the trio side ---------------------------------------------------------------------

    async def _main(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._token = trio.lowlevel.current_trio_token()
            self._ready.set_result(None)
            # Leaving the nursery waits for the calls in flight; a stop that cancels
            # (asyncio shutdown) cancels the nursery first.
            await self._stop.wait()

    async def _serve(self, call: _Call[_T], fn: Callable[..., Awaitable[_T]], args: Any) -> None:
        with call.scope:
            try:
                call.value = await fn(*args)
            except BaseException as exc:
                # Everything is delivered to the caller, Exception or not, the same object,
                # and kept out of the nursery: one caller's failure must not end the portal.
                # A cancellation is not re-raised either: it is either this call's own scope
                # (absorbed right here anyway) or the nursery's, which is ending regardless.
                call.error = exc
        if call.error is not None and is_cancellation(call.error):
            if not call.scope.cancel_called:
                # The portal's nursery was cancelled (the keeper, or a failing run):
                # _run_ended answers the caller once the run is over.
                return
            # Only the caller cancels this scope, and it knows it did.
            call.error = None
        call.finish()

    def _run_ended(self, result: outcome.Outcome[None]) -> None:
        # Called by trio on the loop's thread once the guest run is over.
        _threads.portal = None  # only one run per thread: this one
        self.closed = True
        run_error = result.error if isinstance(result, outcome.Error) else None
        if run_error is not None:
            _log.error("dsh_sched.aio portal's trio run failed", exc_info=run_error)
        for call in list(self._pending):
            # Work cut short by the keeper (a caller whose own task was not cancelled), or
            # by a run that ended by itself.
            stopped = RuntimeError(E_CLOSED if self._stopped_by_us else E_STOPPED)
            stopped.__cause__ = run_error
            call.error = stopped
            call.finish()
        self._ended.set_result(None)

    # -- the asyncio side ------------------------------------------------------------------

    async def _keep(self) -> None:
        # asyncio.run cancels every task left at shutdown: that is the signal to end the
        # trio run, so that the thread can start another run afterwards (integrations §3.1).
        try:
            await asyncio.shield(self._ended)
        except asyncio.CancelledError:
            self._halt(cancel=True)
            await _drain(self._ended)
            raise

    def _halt(self, *, cancel: bool) -> None:
        self.closed = True
        self._stopped_by_us = True
        self._stop.set()
        if cancel and self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    async def _close(self) -> None:
        """Refuse new work, wait for the work in flight, end the run and the keeper."""
        self._halt(cancel=False)
        await _drain(self._ended)
        await _drain(self._keeper)

    async def _submit(self, fn: Callable[..., Awaitable[_T]], args: tuple[object, ...]) -> _T:
        """Run ``fn(*args)`` as a task of the portal and deliver its end to the caller."""
        if not self._ready.done():
            # The first call on a new portal: the run's main task opens the nursery soon.
            await asyncio.shield(self._ready)
        if self.closed:
            raise RuntimeError(E_CLOSED)
        nursery = self._nursery
        assert nursery is not None
        loop = self.loop
        call: _Call[_T] = _Call(loop, self._pending)
        # Spawned from here, the trio task runs in a copy of this asyncio task's context.
        nursery.start_soon(self._serve, call, fn, args, name=fn)
        cancelled: asyncio.CancelledError | None = None
        while True:
            try:
                await call.waiter
            except asyncio.CancelledError as exc:
                # Cancel the trio side and keep waiting: the caller hears of the
                # cancellation only once the trio task has drained.
                if cancelled is None:
                    cancelled = exc
                call.scope.cancel()
            if call.finished:
                break
            call.waiter = loop.create_future()
        error = call.error
        if error is not None:
            # An error of the trio side wins over the caller's cancellation (I§3.2 item 3).
            try:
                raise error
            finally:
                del error, call
        if cancelled is not None:
            # Also when the work had already finished: its value is discarded.
            raise cancelled
        return call.value  # type: ignore[return-value]

    async def run(self, fn: Callable[[*_Ts], Awaitable[_T]], *args: *_Ts) -> _T:
        """Await the trio function ``fn(*args)`` in this portal, from asyncio.

        The function runs as a task of the portal's trio run, in a copy of the calling
        asyncio task's context variables. If the awaiting task is cancelled, the trio task
        is cancelled and drained before ``CancelledError`` is raised.

        Args:
            fn: A trio async function.
            *args: Its positional arguments.

        Returns:
            What ``fn`` returned.

        Raises:
            RuntimeError: Called from trio code, with no running loop, from another loop,
                or after the portal was closed.
            BaseException: Whatever ``fn`` raised, the same object.
        """
        loop = check_host()
        if loop is not self.loop and not self.closed:
            raise RuntimeError(E_OTHER_LOOP)
        return await self._submit(fn, args)


async def _drain(future: asyncio.Future[Any]) -> None:
    """Wait for ``future`` to be done (its result is not looked at) however often the
    waiting task is cancelled meanwhile; then re-raise the first cancellation, if any."""
    cancelled: asyncio.CancelledError | None = None
    while not future.done():
        try:
            # asyncio.wait never cancels what it waits for.
            await asyncio.wait((future,))
        except asyncio.CancelledError as exc:
            if cancelled is None:
                cancelled = exc
    if cancelled is not None:
        raise cancelled


@final
class _PortalBlock:
    """``async with portal() as p``: the loop's portal, stopped on exit if this started it."""

    __slots__ = ("_owned", "_portal")

    def __init__(self) -> None:
        self._portal: Portal | None = None
        self._owned = False

    async def __aenter__(self) -> Portal:
        if self._portal is not None:
            raise RuntimeError("a dsh_sched.aio.portal() block can be entered only once")
        loop = check_host()
        self._portal, self._owned = portal_for(loop)
        return self._portal

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._portal is not None
        if self._owned:
            await self._portal._close()


def portal() -> AbstractAsyncContextManager[Portal]:
    """The running asyncio loop's portal, as an ``async with`` block.

    Starts the portal if the loop has none; a block that started it stops it on exit:
    new work is refused with ``RuntimeError("dsh_sched.aio portal is closed")``, work in
    flight is awaited (not cancelled), then the trio run ends. A block that found the
    portal running leaves it running. Loops driven by hand (``run_until_complete`` and
    ``close``) must use this form; under ``asyncio.run`` the portal also ends by itself
    when the loop shuts down.

    Returns:
        An async context manager yielding the :class:`Portal`.

    Raises:
        RuntimeError: On entry: called from trio code, with no running loop, or while this
            thread holds a trio run of another loop or of someone else (integrations §3.1).

    Example:
        >>> async def main():  # doctest: +SKIP
        ...     async with dsh_sched.aio.portal() as p:
        ...         await p.run(trio.sleep, 0.1)
    """
    return _PortalBlock()

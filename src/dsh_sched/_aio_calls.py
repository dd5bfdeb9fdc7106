"""Crossing the bridge: batches from asyncio (``run_tool_calls``), asyncio from trio
(``run_on_asyncio``, ``aio_tool``). integrations §3.2 and §3.3."""

from __future__ import annotations

import contextvars
import functools
import inspect
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, TypeVarTuple, cast

import trio

from ._aio_portal import check_host, current_portal, portal_for
from ._batch import open_batch
from ._batch import run_tool_calls as _trio_run_tool_calls

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Awaitable, Callable, Coroutine

    from ._batch import Batch
    from ._outcome import BatchOutcome

__all__ = ["aio_tool", "run_on_asyncio", "run_tool_calls"]

_P = ParamSpec("_P")
_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")
_F = TypeVar("_F", bound="Callable[..., Awaitable[Any]]")

E_RUN_ON_ASYNCIO = (
    "run_on_asyncio() must be called from trio code running in a dsh_sched.aio portal"
)
E_EXTERNAL_CANCEL = (
    "run_on_asyncio(): the asyncio task was cancelled by asyncio code, not by its trio caller"
)


def _same_arguments_as(
    template: Callable[_P, Awaitable[_T]],
) -> Callable[[Callable[..., Coroutine[Any, Any, _T]]], Callable[_P, Coroutine[Any, Any, _T]]]:
    """Give the decorated function ``template``'s parameters, for type checkers and
    ``inspect.signature``: the asyncio form takes every option the trio form takes, so an
    option added to ``dsh_sched.run_tool_calls`` is accepted here without a change."""

    def apply(fn: Callable[..., Coroutine[Any, Any, _T]]) -> Callable[_P, Coroutine[Any, Any, _T]]:
        fn.__signature__ = inspect.signature(template)  # type: ignore[attr-defined]
        return cast("Callable[_P, Coroutine[Any, Any, _T]]", fn)

    return apply


async def _run_batch(batch: Batch) -> BatchOutcome:
    # The trio side of a bridged batch: exactly dsh_sched.run_tool_calls after its checks.
    async with batch:
        pass
    outcome = batch.outcome
    assert outcome is not None  # every path without an outcome raises
    return outcome


@_same_arguments_as(_trio_run_tool_calls)
async def run_tool_calls(*args: Any, **options: Any) -> BatchOutcome:
    """Run a batch of the model's tool calls from asyncio; ``dsh_sched.run_tool_calls``
    with the same arguments, run in the loop's trio portal.

    Takes exactly the arguments of :func:`dsh_sched.run_tool_calls` (``runtime``,
    ``calls``, then the keyword options ``scope``, ``abort``, ``max_parallel``, ``sink``,
    ``parent``, ``root_call_id``, ``keep_results`` and any later one), checked with the
    same texts before anything starts. The first call on a loop starts its portal.

    Cancelling the awaiting task (``task.cancel()``, ``asyncio.timeout``, shutdown)
    cancels the batch natively: bodies and hooks drain, every call gets its result (sinks
    see them all), and only then is ``CancelledError`` raised. To get partial results
    back instead, fire the batch's ``Abort`` (``abort.abort()`` works from asyncio).

    Returns:
        The :class:`dsh_sched.BatchOutcome`.

    Raises:
        RuntimeError: Awaited from trio code (await ``dsh_sched.run_tool_calls`` there),
            with no running asyncio loop, or when the thread's trio run cannot be used
            (integrations §3.1).
        TypeError: Invalid arguments, as ``dsh_sched.run_tool_calls``.
        ValueError: Invalid arguments, as ``dsh_sched.run_tool_calls``.
        Exception: An internal failure of the batch (a sink raised), the same object.

    Example:
        >>> outcome = await dsh_sched.aio.run_tool_calls(runtime, calls)  # doctest: +SKIP
    """
    loop = check_host()
    batch = open_batch(*args, **options)  # the argument checks, in their order
    portal, _ = portal_for(loop)
    return await portal._submit(_run_batch, (batch,))


def _host_of_current_trio_task() -> asyncio.AbstractEventLoop:
    portal = current_portal()
    if (
        portal is None
        or not trio.lowlevel.in_trio_task()
        or trio.lowlevel.current_trio_token() is not portal._token
    ):
        raise RuntimeError(E_RUN_ON_ASYNCIO)
    return portal.loop


async def run_on_asyncio(fn: Callable[[*_Ts], Awaitable[_T]], *args: *_Ts) -> _T:
    """Await the asyncio function ``fn(*args)`` from trio code running in a portal.

    ``fn(*args)`` runs as an asyncio task on the portal's loop, in a copy of the calling
    trio task's context. Use it for objects bound to asyncio (an HTTP client made under
    asyncio, an ``asyncio.Lock``). If the trio caller is cancelled (an ``Abort``, a timeout
    policy deadline), the asyncio task is cancelled and awaited (drained): if it then ended
    cancelled, trio's ``Cancelled`` propagates; if it returned or raised, that is the result.

    Args:
        fn: An asyncio async function.
        *args: Its positional arguments.

    Returns:
        What ``fn`` returned.

    Raises:
        RuntimeError: Not called from trio code running in a ``dsh_sched.aio`` portal, or
            the asyncio task was cancelled by asyncio code rather than by its trio caller.
        BaseException: Whatever ``fn`` raised.
    """
    loop = _host_of_current_trio_task()
    ended = trio.Event()
    task = loop.create_task(
        cast("Coroutine[Any, Any, _T]", fn(*args)), context=contextvars.copy_context()
    )
    task.add_done_callback(lambda _: ended.set())
    try:
        await ended.wait()
    except trio.Cancelled:
        # Drain: the asyncio side gets its CancelledError and may run its cleanup.
        task.cancel()
        with trio.CancelScope(shield=True):
            await ended.wait()
        if task.cancelled():
            raise
    if task.cancelled():
        # Cancelled from the asyncio side (e.g. the loop shutting down): if trio is being
        # cancelled too, that wins; otherwise the caller is told plainly.
        await trio.lowlevel.checkpoint_if_cancelled()
        raise RuntimeError(E_EXTERNAL_CANCEL)
    return task.result()


def aio_tool(fn: _F) -> _F:
    """Make an asyncio ``async def`` usable as a trio tool body.

    The wrapper (made with ``functools.wraps``, so ``@tool`` derives the same schema from
    it) awaits ``run_on_asyncio(functools.partial(fn, *args, **kwargs))``. Put it under
    ``@tool`` or pass it as ``define_tool(..., execute=aio_tool(body))``.

    Args:
        fn: An ``async def`` written for asyncio.

    Returns:
        A trio ``async def`` with ``fn``'s signature.

    Raises:
        TypeError: ``fn`` is not an async function.

    Example:
        >>> @tool  # doctest: +SKIP
        ... @aio_tool
        ... async def fetch(url: str) -> str:
        ...     return (await client.get(url)).text
    """
    if not inspect.iscoroutinefunction(fn):
        raise TypeError("aio_tool() requires an async function")

    @functools.wraps(fn)
    async def on_asyncio(*args: Any, **kwargs: Any) -> Any:
        return await run_on_asyncio(functools.partial(fn, *args, **kwargs))

    return cast("_F", on_asyncio)

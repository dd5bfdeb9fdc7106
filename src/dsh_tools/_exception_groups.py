"""Exception groups: the exceptions inside one, and when one is native cancellation.

trio reports what several tasks raised together as a ``BaseExceptionGroup``; cattrs reports
the failures inside a structured value the same way. Both the pipeline and the ``@tool``
argument messages need to look through a group to its leaves.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, NoReturn

import trio

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["is_cancellation", "leaves", "raise_one_cancelled", "split_cancelled"]

_log = logging.getLogger("dsh_tools")


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc`` that are not groups, nested groups flattened, in order.

    Args:
        exc: An exception group, or any other exception (its only leaf is itself).

    Returns:
        The leaves, depth first in the order each group lists them.

    Example:
        >>> group = ExceptionGroup("g", [ValueError(1), ExceptionGroup("h", [KeyError(2)])])
        >>> leaves(group)
        [ValueError(1), KeyError(2)]
    """
    out: list[BaseException] = []
    pending = [exc]
    while pending:
        current = pending.pop()
        if isinstance(current, BaseExceptionGroup):
            pending.extend(reversed(current.exceptions))
        else:
            out.append(current)
    return out


def is_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is native cancellation: ``trio.Cancelled``, or a group holding one and no
    non-``Exception`` other than ``Cancelled`` (runtime.md §8.4).

    Such a group is a cancellation that reached a hook's or a body's own nursery: it is
    handled as the ``Cancelled`` it carries, not as the ordinary failures beside it.
    """
    if isinstance(exc, trio.Cancelled):
        return True
    # A group of Exceptions only is itself an Exception (ExceptionGroup): an ordinary failure.
    # Any other group holds at least one non-Exception, so "no non-Exception but Cancelled"
    # also means "at least one Cancelled".
    if isinstance(exc, Exception) or not isinstance(exc, BaseExceptionGroup):
        return False
    return all(isinstance(leaf, Exception | trio.Cancelled) for leaf in leaves(exc))


def split_cancelled(
    exc: BaseException, note_native: Callable[[BaseException], None]
) -> trio.Cancelled | None:
    """Sort what a driver's nursery raised on exit into the ``Cancelled`` to re-raise.

    A driver whose tasks let nothing but cancellation escape (a model batch, a Code Mode
    run) gets a ``Cancelled`` or a group of them; an ``Exception`` beside them was raised in
    a hook's or a body's own nursery while it was cancelled (that call got its cancelled
    result) and is dropped, logged at DEBUG; anything else (a ``KeyboardInterrupt`` trio
    delivered to the task waiting in the nursery's exit) goes to ``note_native``.

    Args:
        exc: What the nursery's exit raised.
        note_native: Called with each leaf that is neither ``Cancelled`` nor an
            ``Exception``.

    Returns:
        The first ``Cancelled`` leaf, or ``None`` if there is none.
    """
    cancelled: trio.Cancelled | None = None
    for leaf in leaves(exc):
        if isinstance(leaf, trio.Cancelled):
            if cancelled is None:
                cancelled = leaf
        elif isinstance(leaf, Exception):
            _log.debug("dropping %r raised alongside a cancellation", leaf)
        else:  # pragma: no cover - only trio's SIGINT delivery puts one here
            note_native(leaf)
    return cancelled


async def raise_one_cancelled(group: BaseExceptionGroup[BaseException]) -> NoReturn:
    """Re-raise what a private nursery raised when its caller was cancelled.

    A code runtime runs a program with a nursery of its own, a detail its callers must not
    see: a group of nothing but ``Cancelled`` becomes one plain ``Cancelled`` (the caller's
    scope is cancelled, so a checkpoint raises it); any other group propagates unchanged.
    """
    if group.split(trio.Cancelled)[1] is not None:
        raise group
    await trio.lowlevel.checkpoint()
    raise group  # pragma: no cover - the checkpoint above raises Cancelled

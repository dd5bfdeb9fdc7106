"""Exception groups: the exceptions inside one, and when one is native cancellation.

trio reports what several tasks raised together as a ``BaseExceptionGroup``; cattrs reports
the failures inside a structured value the same way. Both the pipeline and the ``@tool``
argument messages need to look through a group to its leaves.
"""

from __future__ import annotations

import trio

__all__ = ["is_cancellation", "leaves"]


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

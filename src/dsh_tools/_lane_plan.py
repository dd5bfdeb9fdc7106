"""The lane's decision logic as plain data: no trio, no I/O (scheduler.md §4, code-mode §5).

The lane (``_lane.py``) owns the awaits; this module owns the bookkeeping of what may start
next and what may commit next. :class:`QueuePlan` is the outer loop over groups, over a queue
that is either fixed up front (a model's batch) or grows while the lane runs (a Code Mode
program's sub-calls); :class:`GroupPlan` is one group: a rolling pool of dispatch stages with a
head-of-line commit cursor. Executions and stage results are opaque to it (type parameters),
so it is tested with plain objects and no event loop.

Positions inside a group are *group positions* ``gi`` (0 for the group's first call); the
batch index of ``gi`` is ``start + gi``.
"""

from __future__ import annotations

from typing import Generic, TypeVar, final

__all__ = ["GroupPlan", "QueuePlan"]

E = TypeVar("E")
S = TypeVar("S")


@final
class GroupPlan(Generic[E, S]):
    """One group: calls ``start .. start + size - 1`` run under one mode.

    Counters (all monotonic except ``running``):

    - ``to_start``: calls started so far (``gi < to_start`` are started);
    - ``to_commit``: calls committed so far, always a prefix (head of line);
    - ``running``: dispatch stages in flight, bounded by ``max_parallel``.

    Started, uncommitted calls keep their execution (and, once known, their stage result)
    in two dicts keyed by group position, so memory follows the uncommitted window, not the
    group size.
    """

    __slots__ = (
        "_executions",
        "_steps",
        "max_parallel",
        "observed_abort",
        "parallel",
        "running",
        "size",
        "start",
        "stopped",
        "to_commit",
        "to_start",
    )

    def __init__(self, start: int, size: int, *, parallel: bool, max_parallel: int) -> None:
        if size < 1:
            raise ValueError("a group has at least one call")
        if not parallel and size != 1:
            raise ValueError("an exclusive group has exactly one call")
        self.start = start
        self.size = size
        self.parallel = parallel
        self.max_parallel = max_parallel
        self.to_start = 0
        self.to_commit = 0
        self.running = 0
        self.stopped = False
        self.observed_abort = False
        self._executions: dict[int, E] = {}
        self._steps: dict[int, S] = {}

    # -- starting -------------------------------------------------------------------------

    def can_start(self) -> bool:
        """Whether the pool may start another call (before the abort/barrier checks)."""
        return not self.stopped and self.to_start < self.size and self.running < self.max_parallel

    def overlaps(self) -> bool:
        """Whether two of this group's dispatch stages may run at the same time."""
        return self.parallel and self.size > 1 and self.max_parallel > 1

    def needs_reclassification(self) -> bool:
        """Whether the next start must first reclassify its call (§4.2 fill step 2).

        The group's first call was classified by the outer loop with no checkpoint since,
        and an exclusive group has a single call, so only later calls of a parallel group
        are reclassified.
        """
        return self.parallel and self.to_start > 0

    def grow(self, count: int) -> None:
        """The queue grew by ``count`` calls right after this parallel group's last call:
        they join it (the pool keeps rolling; each is classified when it would start)."""
        if not self.parallel:
            raise ValueError("an exclusive group does not grow")
        self.size += count

    def stop(self, *, abort: bool = False) -> None:
        """Stop starting calls: the batch was aborted, or a barrier was found."""
        self.stopped = True
        if abort:
            self.observed_abort = True

    def started(self, execution: E) -> int:
        """Record that the call at ``to_start`` was created; return its group position."""
        gi = self.to_start
        self._executions[gi] = execution
        self.to_start = gi + 1
        return gi

    def next_index(self) -> int:
        """The batch index of the next call to start."""
        return self.start + self.to_start

    # -- dispatch -------------------------------------------------------------------------

    def dispatching(self) -> None:
        """A dispatch stage was started (it occupies a pool slot until it ends)."""
        self.running += 1

    def dispatched(self, gi: int, step: S | None) -> None:
        """A dispatch stage ended; ``step`` is its result, or ``None`` if it produced none."""
        self.running -= 1
        if step is not None:
            self._steps[gi] = step

    def store(self, gi: int, step: S) -> None:
        """Store a stage result that did not go through dispatch (prepare ended the call)."""
        self._steps[gi] = step

    # -- committing -----------------------------------------------------------------------

    def ready(self) -> S | None:
        """The head of the line's stage result, if the head is started and has one."""
        if self.to_commit < self.to_start:
            return self._steps.get(self.to_commit)
        return None

    def commit_index(self) -> int:
        """The batch index of the head of the line."""
        return self.start + self.to_commit

    def committed(self) -> None:
        """The head of the line was committed; advance the cursor and forget its state."""
        gi = self.to_commit
        if gi >= self.to_start:
            raise RuntimeError("nothing started is waiting to commit")
        self._executions.pop(gi, None)
        self._steps.pop(gi, None)
        self.to_commit = gi + 1

    def done(self) -> bool:
        """Whether nothing runs and everything started is committed."""
        return self.running == 0 and self.to_commit == self.to_start

    def uncommitted(self) -> list[tuple[int, E, S | None]]:
        """Every started, uncommitted call in model order: ``(index, execution, step)``.

        Used by the cancellation bookkeeping (§7), which finishes these calls itself.
        """
        return [
            (self.start + gi, self._executions[gi], self._steps.get(gi))
            for gi in range(self.to_commit, self.to_start)
        ]


@final
class QueuePlan:
    """The outer loop over groups (§4.1): ``next`` is the first call not yet handled.

    The queue holds ``n`` calls. A fixed queue (``closed=True``) never grows; an open one
    grows with :meth:`extend` until :meth:`close`.
    """

    __slots__ = ("closed", "n", "next")

    def __init__(self, n: int = 0, *, closed: bool = True) -> None:
        self.n = n
        self.next = 0
        self.closed = closed

    def extend(self, count: int) -> None:
        """Append ``count`` calls to an open queue."""
        if self.closed:
            raise ValueError("the queue is closed")
        if count < 0:
            raise ValueError(f"cannot extend the queue by {count}")
        self.n += count

    def close(self) -> None:
        """No call joins the queue any more (idempotent)."""
        self.closed = True

    def pending(self) -> bool:
        """Whether a call remains to be classified."""
        return self.next < self.n

    def group_size(self, *, exclusive: bool) -> int:
        """The size of a group opened at ``next``: one call for a barrier, else the rest."""
        return 1 if exclusive else self.n - self.next

    def advance(self, started: int) -> None:
        """A group started ``started`` calls (all committed); move past them."""
        if started < 0 or self.next + started > self.n:
            raise ValueError(f"cannot advance by {started} from {self.next} of {self.n}")
        self.next += started

    def take_unstarted(self) -> int | None:
        """Claim the next never-started call (for a synthetic pair or a refusal); ``None``
        when none is left."""
        if self.next >= self.n:
            return None
        index = self.next
        self.next = index + 1
        return index

"""Shared worker tasks for dispatch stages that never wait (decision 109).

Spawning a trio task costs more than a tool body that returns without awaiting anything
(a lookup, a computation, a plain ``def`` run inline): a task, a coroutine, a context and a
turn of the scheduler for a few microseconds of work. So the lane hands the dispatch stage
of a call whose tool is not known to wait to a :class:`Workers` pool instead: a worker task
runs such stages one after another, each in its own copy of the driver's context (taken
when the call was started, as a task of its own would have), and no task is spawned per
call.

A stage that turns out to wait is found at its first yield to trio, before anything has
waited: from then on the worker belongs to that stage alone, and if stages are still
queued a new worker is spawned to run them, so a waiting stage never holds up a queued
one. Its tool's name is remembered in the runtime (:attr:`Registry.waits`) and later
calls of it get a task of their own from the start, as before. The memory is only a
hint: a remembered name costs a task per call, an unremembered one that waits costs one
worker; nothing else depends on it.

The workers live in a nursery inside the lane's ``Abort`` scope, held by a host task that the
driver starts without waiting for it (:func:`start_host`): stages queued before the host
first runs wait for it, and the host runs them itself as the first worker (decision 114).

The tasks of a group's calls are started through :meth:`Workers.spawn`, which counts the
ones that have not taken their first step: once :data:`SPAWNS` of them have not, the driver
waits until they have before starting more, so bodies begin waiting while later calls are
still being prepared (decision 113).
"""

from __future__ import annotations

import math
import types
from collections import deque
from contextvars import copy_context
from typing import TYPE_CHECKING, Any, Final, final

import trio

from ._lane_client import _Waiter

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Generator
    from contextvars import Context

    from ._lane import Lane

__all__ = ["BURST", "SPAWNS", "Workers", "host_workers", "start_host"]

#: How many queued stages make the lane's driver pause its starts until the workers have
#: run them (decision 110).
BURST: Final = 64
#: How many dispatch tasks the driver starts before it lets them run to their first wait
#: (decision 113).
SPAWNS: Final = 16


@final
class Workers:
    """A queue of dispatch stages and the worker tasks that run it (module docstring).

    Args:
        nursery: Where the workers run (the lane's shared-scope nursery); ``None`` until
            its host opens it: stages queued before then wait for the host, which runs them
            as the first worker.
        waits: The runtime's set of tool names whose stages were seen waiting; a stage
            that waits adds its name.
        wake: Called when a stage waits (the driver, paused for a burst of queued stages,
            goes on starting calls).

    Invariant: while the queue is not empty, exactly one worker (the *drainer*) is
    runnable or running and not inside a stage that waits, so every queued stage runs.
    """

    __slots__ = ("closed", "drainer", "fresh", "jobs", "last", "nursery", "waits", "wake")

    def __init__(
        self, nursery: trio.Nursery | None, waits: set[str], wake: Callable[[], None]
    ) -> None:
        self.nursery = nursery
        self.waits = waits
        self.wake = wake
        self.jobs: deque[tuple[Context, Coroutine[Any, Any, None], str]] = deque()
        #: The number of the worker that drains the queue; 0 while there is none.
        self.drainer = 0
        self.last = 0
        #: Dispatch tasks the driver started that have not taken their first step yet.
        self.fresh = 0
        #: The lane let the host go (Lane.close_host), perhaps before the host first ran.
        self.closed = False

    def run(
        self,
        name: str,
        fn: Callable[..., Coroutine[Any, Any, None]],
        *args: object,
    ) -> None:
        """Run the dispatch stage ``fn(*args)`` of a call of tool ``name``: in a task of its
        own if the tool is known to wait, else in a worker; either way in a copy of the
        current context, taken now."""
        if name not in self.waits:
            self.submit(copy_context(), fn(*args), name)
        elif (nursery := self.nursery) is not None:
            self.spawn(nursery, fn, *args)
        else:
            # The host has not opened the nursery yet: its first worker gives this stage a
            # task of its own, which counts as one the driver started (decision 113).
            self.fresh += 1
            self.submit(copy_context(), self._first_step(fn, *args), name)

    def spawn(
        self, nursery: trio.Nursery, fn: Callable[..., Coroutine[Any, Any, None]], *args: object
    ) -> None:
        """Start the dispatch stage ``fn(*args)`` as a task of its own in ``nursery``; the
        driver pauses once :data:`SPAWNS` of these have not taken their first step, until
        they have (decision 113)."""
        nursery.start_soon(self._first_step, fn, *args, name="dsh_tools.dispatch")
        self.fresh += 1  # after: a nursery that refuses the task leaves nothing to wait for

    @trio.lowlevel.enable_ki_protection
    async def _first_step(
        self, fn: Callable[..., Coroutine[Any, Any, None]], *args: object
    ) -> None:
        self.fresh -= 1
        if not self.fresh:
            self.wake()  # the driver, if it paused for these tasks
        await fn(*args)

    def submit(self, context: Context, stage: Coroutine[Any, Any, None], name: str) -> None:
        """Queue ``stage`` (a dispatch task's coroutine for tool ``name``) to run in
        ``context``; spawn a worker if none is draining the queue."""
        self.jobs.append((context, stage, name))
        if not self.drainer:
            self._spawn()

    def _spawn(self) -> None:
        self.last = number = self.last + 1
        self.drainer = number
        nursery = self.nursery
        if nursery is not None:
            nursery.start_soon(self._work, number, name="dsh_tools.dispatch")
        # Otherwise the host has not opened the nursery yet: it runs this worker itself.

    @trio.lowlevel.enable_ki_protection
    async def _work(self, number: int) -> None:
        jobs = self.jobs
        while jobs and self.drainer == number:
            context, stage, name = jobs.popleft()
            if name in self.waits:
                # Its tool was seen waiting since it was queued (a call of the same tool
                # ahead of it), or was queued before the host ran: a task of its own,
                # rather than a worker and a hand-over.
                assert self.nursery is not None  # a worker runs in it (the host opened it)
                self.nursery.start_soon(_alone, context, stage, name="dsh_tools.dispatch")
                continue
            # What a stage raises ends this worker: only a cancellation gets out of the
            # lane's dispatch stage, and trio delivers one only at a cancel point that
            # yields, so the stage has already handed the queue to another worker.
            await _run(self, number, context, stage, name)
        if self.drainer == number:
            self.drainer = 0

    def waited(self, number: int, name: str) -> None:
        """The stage that worker ``number`` (the drainer) runs for tool ``name`` yields to
        trio: the worker is that stage's until it ends, so another one takes the queue."""
        if trio.current_effective_deadline() != -math.inf:
            # Not a cancellation being delivered (a cancelled cancel point yields too):
            # the tool itself waits.
            self.waits.add(name)
        self.drainer = 0
        if self.jobs:
            self._spawn()
        self.wake()


def start_host(lane: Lane, nursery: trio.Nursery) -> None:
    """Give ``lane`` its :class:`Workers` now, and start the task that hosts them in
    ``nursery`` (:func:`host_workers`): starting it is not a checkpoint, so the call the
    driver has just classified starts under that mode (§4.2)."""
    waiter = lane.host_waiter = _Waiter()
    workers = lane.workers = Workers(None, lane.runtime._registry.waits, lane.waiter.wake)
    nursery.start_soon(host_workers, lane, workers, waiter, name="dsh_tools.dispatch")


@trio.lowlevel.enable_ki_protection
async def host_workers(lane: Lane, workers: Workers, waiter: _Waiter) -> None:
    """Hold the lane's workers and a nursery open inside the lane's Abort's scope for its
    wrapper-free dispatch stages, until :meth:`Lane.close_host`.

    Firing the Abort cancels that one scope, and with it every body running in the
    nursery: no per-call cancel scope to create, enter, register and exit. The stages
    queued before the host first ran are drained by the host itself, as the first worker:
    one task fewer per batch.
    """
    with lane.abort.move_on_abort():
        async with trio.open_nursery() as inner:
            workers.nursery = inner
            try:
                if workers.drainer:
                    await workers._work(workers.drainer)
                if not workers.closed:
                    await waiter.wait()
            finally:
                lane.workers = None


@trio.lowlevel.enable_ki_protection
async def _alone(context: Context, stage: Coroutine[Any, Any, None]) -> None:
    await _run(None, 0, context, stage, "")


@types.coroutine
def _run(
    workers: Workers | None,
    number: int,
    context: Context,
    stage: Coroutine[Any, Any, None],
    name: str,
) -> Generator[Any, Any, None]:
    """Run ``stage`` to its end in ``context``, as trio runs a task's coroutine.

    The first step tells whether it waits: if it yields to trio, the worker is told before
    the yield is passed on (unless ``workers`` is ``None``: a task of its own), and every
    later step is passed through unchanged.
    """
    send = stage.send
    try:
        trap = context.run(send, None)
    except StopIteration:
        return
    if workers is not None:
        workers.waited(number, name)
    while True:
        try:
            value = yield trap
        except BaseException as exc:
            # Trio resumes tasks with send(); a throw() comes from closing the worker.
            try:
                trap = context.run(stage.throw, exc)
            except StopIteration:
                return
        else:
            try:
                trap = context.run(send, value)
            except StopIteration:
                return

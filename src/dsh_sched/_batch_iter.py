"""The single consumer's cursor over a batch's committed calls (scheduler.md §9)."""

from __future__ import annotations

from typing import TYPE_CHECKING, final

import trio

if TYPE_CHECKING:
    from ._batch import Batch
    from ._driver import Driver
    from ._outcome import CommittedCall

__all__ = ["BatchIterator"]


@final
class BatchIterator:
    """The single consumer's cursor over a batch's committed calls (scheduler.md §9).

    The driver never waits for it: it appends and wakes; the iterator reads at its pace.
    """

    __slots__ = ("__weakref__", "_batch", "_closed", "_cursor", "_driver")

    def __init__(self, driver: Driver, batch: Batch) -> None:
        self._driver = driver
        self._batch = batch
        self._cursor = 0
        self._closed = False

    def __aiter__(self) -> BatchIterator:
        return self

    def _take(self) -> CommittedCall | None:
        driver = self._driver
        if driver.keep:
            cursor = self._cursor
            if cursor < len(driver.results):
                self._cursor = cursor + 1
                return driver.results[cursor]
            return None
        held = driver.held
        if held:
            item = held.popleft()
            # The driver may be parked until the reader makes room (backpressure).
            driver.wake_driver()
            return item
        return None

    @trio.lowlevel.enable_ki_protection
    async def __anext__(self) -> CommittedCall:
        if self._closed:
            raise StopAsyncIteration
        await trio.lowlevel.checkpoint_if_cancelled()
        driver = self._driver
        while True:
            item = self._take()
            if item is not None:
                # Like a memory channel's receive: the item is taken, so this schedule
                # point must not lose it to a cancellation.
                await trio.lowlevel.cancel_shielded_checkpoint()
                return item
            if driver.ended:
                self.close()
                raise StopAsyncIteration
            driver.iter_parked = True
            await driver.iter_waiter.park()

    def close(self) -> None:
        """End this iteration; a new one may start."""
        if not self._closed:
            self._closed = True
            self._batch._release(self)

    async def aclose(self) -> None:
        """End this iteration (async form, for ``contextlib.aclosing``)."""
        self.close()
        await trio.lowlevel.checkpoint()

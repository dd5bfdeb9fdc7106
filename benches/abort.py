"""Abort latency: ``n`` in-flight calls, from the abort until every result is committed.

- dsh-trio: ``run_tool_calls(max_parallel=n)`` with ``n`` bodies parked in
  ``trio.sleep_forever``; once all are parked, ``batch.abort.abort()``. The clock stops when
  ``run_tool_calls`` returns, i.e. after every call's ``ABORTED`` result was committed and
  the batch's nursery has exited (an upper bound on "all committed").
- floor: a raw trio nursery of ``n`` tasks parked the same way; once all are parked,
  ``nursery.cancel_scope.cancel()``; the clock stops when the nursery has exited.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import attrs
import trio
import trio.testing

from dsh_sched import run_tool_calls
from dsh_tools import ABORTED, Abort

from ._dsh import model_calls, raw_tool, runtime_with
from ._harness import Stats, fmt_ratio, fmt_us, markdown_table, settle_heap

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

__all__ = ["AbortResult", "measure", "report"]


@attrs.define
class _Parked:
    count: int = 0


def _floor(n: int) -> Callable[[], Awaitable[float]]:
    async def run() -> float:
        parked = _Parked()

        async def task() -> None:
            parked.count += 1
            await trio.sleep_forever()

        async with trio.open_nursery() as nursery:
            for _ in range(n):
                nursery.start_soon(task)
            await trio.testing.wait_all_tasks_blocked()
            if parked.count != n:
                raise AssertionError(f"{parked.count} of {n} tasks parked")
            start = time.perf_counter()
            nursery.cancel_scope.cancel()
        return time.perf_counter() - start

    return run


def _dsh(n: int) -> Callable[[], Awaitable[float]]:
    parked = _Parked()

    async def body(args: object, ctx: object) -> str:
        parked.count += 1
        await trio.sleep_forever()

    runtime = runtime_with(raw_tool("park", body))
    calls = model_calls(n, "park")

    async def run() -> float:
        parked.count = 0
        abort = Abort()
        started: list[float] = []

        async def fire() -> None:
            await trio.testing.wait_all_tasks_blocked()
            if parked.count != n:
                raise AssertionError(f"{parked.count} of {n} calls parked")
            started.append(time.perf_counter())
            abort.abort("bench")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fire)
            outcome = await run_tool_calls(runtime, calls, abort=abort, max_parallel=n)
            elapsed = time.perf_counter() - started[0]
        codes = {
            c.result.error.info.code
            for c in outcome.results
            if c.result.error and c.result.error.info
        }
        if len(outcome.results) != n or codes != {ABORTED}:
            raise AssertionError(f"expected {n} ABORTED results, got codes {codes}")
        return elapsed

    return run


@attrs.define
class AbortResult:
    """Seconds from the abort to the last commit, per system and ``n``."""

    seconds: dict[tuple[str, int], list[float]] = attrs.Factory(dict)

    def stats(self, system: str, n: int) -> Stats | None:
        values = self.seconds.get((system, n))
        return Stats.of(values) if values else None


def measure(ns: Sequence[int], *, repeats: int, progress: Callable[[str], None]) -> AbortResult:
    """Measure the floor and dsh-trio, interleaved, ``repeats`` times per ``n``."""
    result = AbortResult()
    for n in ns:
        systems = {"floor": _floor(n), "dsh": _dsh(n)}
        for run in systems.values():
            trio.run(run)  # warm-up
        for r in range(repeats):
            order = list(systems.items())
            if r % 2:
                order.reverse()
            for name, run in order:
                settle_heap("freeze")
                result.seconds.setdefault((name, n), []).append(trio.run(run))
        progress(f"abort: n={n} done")
    return result


def report(result: AbortResult, ns: Sequence[int]) -> str:
    """The latency table (µs, median and spread) and the 2× target at N=1000."""

    def cell(stats: Stats | None) -> str:
        if stats is None:
            return "–"
        return f"{fmt_us(stats.median)} ({fmt_us(stats.low)}–{fmt_us(stats.high)})"

    rows = [
        ["raw trio: cancel the nursery", *(cell(result.stats("floor", n)) for n in ns)],
        ["dsh-trio: fire the batch Abort", *(cell(result.stats("dsh", n)) for n in ns)],
    ]
    ratios = []
    for n in ns:
        floor, dsh = result.stats("floor", n), result.stats("dsh", n)
        ratios.append("–" if floor is None or dsh is None else fmt_ratio(dsh.median / floor.median))
    rows.append(["dsh ÷ floor (medians)", *ratios])
    parts = [
        "Heap condition: **freeze** (gc.collect() + gc.freeze() before every sample).",
        "",
        "Latency from abort/cancel until every call has its result, µs: median (min–max).",
        "",
        markdown_table(["system", *(f"N={n}" for n in ns)], rows),
    ]
    floor, dsh = result.stats("floor", 1000), result.stats("dsh", 1000)
    if floor is not None and dsh is not None:
        relative = dsh.median / floor.median
        status = "met" if relative <= 2.0 else "**NOT MET**"
        parts += [
            "",
            f"Target: abort of 1000 in-flight calls within 2× trio's raw cancel: "
            f"{fmt_ratio(relative)} — {status}.",
        ]
    return "\n".join(parts)

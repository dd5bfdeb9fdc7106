"""Makespan against its lower bound: calls that each wait 10 ms.

- *Uniform*: ``n`` parallel-safe calls that each ``trio.sleep(0.010)``, with
  ``max_parallel = n``; ideal makespan 10 ms. The floor is a raw trio nursery of ``n``
  tasks that each sleep 10 ms.
- *Mixed*: groups of nine parallel-safe 10 ms calls followed by one exclusive 10 ms call
  (a barrier); the critical-path lower bound is 20 ms per group of ten. The floor runs the
  same structure by hand: a nursery per parallel run, then the barrier alone.

Figures are makespan ÷ lower bound (median and spread over interleaved repeats).
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Final

import attrs
import trio

from dsh_sched import ModelToolCall, run_tool_calls

from ._dsh import ARGUMENTS_JSON, raw_tool, runtime_with
from ._harness import Stats, fmt_ratio, markdown_table, settle_heap

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

__all__ = ["MakespanResult", "measure", "report"]

WAIT: Final = 0.010
GROUP: Final = 10  # nine parallel calls and one barrier


async def _wait_body(args: object, ctx: object) -> str:
    await trio.sleep(WAIT)
    return "ok"


async def _wait_task() -> None:
    await trio.sleep(WAIT)


def _uniform_floor(n: int) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(n):
                nursery.start_soon(_wait_task)

    return run


def _mixed_floor(n: int) -> Callable[[], Awaitable[None]]:
    async def run() -> None:
        for _ in range(n // GROUP):
            async with trio.open_nursery() as nursery:
                for _ in range(GROUP - 1):
                    nursery.start_soon(_wait_task)
            await _wait_task()

    return run


def _dsh(n: int, *, mixed: bool) -> Callable[[], Awaitable[None]]:
    runtime = runtime_with(
        raw_tool("par", _wait_body, parallel=True), raw_tool("excl", _wait_body, parallel=False)
    )
    calls = tuple(
        ModelToolCall(
            call_id=f"c{i}",
            name="excl" if mixed and i % GROUP == GROUP - 1 else "par",
            arguments=ARGUMENTS_JSON,
        )
        for i in range(n)
    )

    async def run() -> None:
        outcome = await run_tool_calls(runtime, calls, max_parallel=n)
        if len(outcome.results) != n or any(c.result.is_error for c in outcome.results):
            raise AssertionError("a makespan call failed")

    return run


def _makespan(run: Callable[[], Awaitable[None]]) -> float:
    async def timed() -> float:
        start = time.perf_counter()
        await run()
        return time.perf_counter() - start

    return trio.run(timed)


#: The moments of a uniform batch's timeline, in ms after the batch started.
TIMELINE_MARKS: Final = ("first sleep", "last sleep", "first wake", "last wake", "end")


def _timeline(n: int) -> dict[str, Callable[[], tuple[float, ...]]]:
    """Runs of ``n`` 10 ms calls that note when each body starts sleeping and wakes."""
    marks: list[tuple[bool, float]] = []  # (woke, perf_counter)

    async def sleeper() -> None:
        marks.append((False, time.perf_counter()))
        await trio.sleep(WAIT)
        marks.append((True, time.perf_counter()))

    async def body(args: object, ctx: object) -> str:
        await sleeper()
        return "ok"

    runtime = runtime_with(raw_tool("par", body, parallel=True))
    calls = tuple(
        ModelToolCall(call_id=f"c{i}", name="par", arguments=ARGUMENTS_JSON) for i in range(n)
    )

    async def floor() -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(n):
                nursery.start_soon(sleeper)

    async def dsh() -> None:
        await run_tool_calls(runtime, calls, max_parallel=n)

    def timed(run: Callable[[], Awaitable[None]]) -> tuple[float, ...]:
        async def main() -> tuple[float, float]:
            start = time.perf_counter()
            await run()
            return start, time.perf_counter()

        marks.clear()
        start, end = trio.run(main)
        sleeps = [t for woke, t in marks if not woke]
        wakes = [t for woke, t in marks if woke]
        moments = (min(sleeps), max(sleeps), min(wakes), max(wakes), end)
        return tuple((t - start) * 1000 for t in moments)

    return {"floor": lambda: timed(floor), "dsh": lambda: timed(dsh)}


@attrs.define
class MakespanResult:
    """Makespan ÷ lower bound per (shape, system, n), and one size's timelines."""

    ratios: dict[tuple[str, str, int], list[float]] = attrs.Factory(dict)
    timeline_n: int | None = None
    #: Per system, one tuple of TIMELINE_MARKS per repeat.
    timelines: dict[str, list[tuple[float, ...]]] = attrs.Factory(dict)

    def stats(self, shape: str, system: str, n: int) -> Stats | None:
        values = self.ratios.get((shape, system, n))
        return Stats.of(values) if values else None


def measure(
    uniform_ns: Sequence[int],
    mixed_ns: Sequence[int],
    *,
    repeats: int,
    progress: Callable[[str], None],
    timeline_n: int | None = None,
) -> MakespanResult:
    """Measure both shapes, floor and dsh-trio interleaved per repeat; with
    ``timeline_n``, also the timeline of a uniform batch of that size."""
    result = MakespanResult(timeline_n=timeline_n)
    if timeline_n is not None:
        timelines = _timeline(timeline_n)
        for take in timelines.values():
            take()  # warm-up
        for r in range(repeats):
            for name, take in list(timelines.items())[:: -1 if r % 2 else 1]:
                settle_heap("freeze")
                result.timelines.setdefault(name, []).append(take())
        progress(f"makespan: timeline n={timeline_n} done")
    plans: list[tuple[str, int, float, dict[str, Callable[[], Awaitable[None]]]]] = []
    for n in uniform_ns:
        plans.append(
            ("uniform", n, WAIT, {"floor": _uniform_floor(n), "dsh": _dsh(n, mixed=False)})
        )
    for n in mixed_ns:
        if n % GROUP:
            raise ValueError(f"a mixed batch needs a multiple of {GROUP} calls, got {n}")
        bound = (n // GROUP) * 2 * WAIT
        plans.append(("mixed", n, bound, {"floor": _mixed_floor(n), "dsh": _dsh(n, mixed=True)}))
    for shape, n, bound, systems in plans:
        for run in systems.values():
            _makespan(run)  # warm-up
        for r in range(repeats):
            order = list(systems.items())
            if r % 2:
                order.reverse()
            for name, run in order:
                settle_heap("freeze")
                result.ratios.setdefault((shape, name, n), []).append(_makespan(run) / bound)
        progress(f"makespan: {shape} n={n} done")
    return result


def report(result: MakespanResult, uniform_ns: Sequence[int], mixed_ns: Sequence[int]) -> str:
    """Tables of makespan ÷ lower bound, and the N=100 target."""

    def cell(stats: Stats | None) -> str:
        if stats is None:
            return "–"
        return f"{fmt_ratio(stats.median)} ({fmt_ratio(stats.low)}–{fmt_ratio(stats.high)})"

    def table(shape: str, ns: Sequence[int], bound: str) -> str:
        rows = []
        for system, label in (("floor", "raw trio floor"), ("dsh", "dsh-trio run_tool_calls")):
            rows.append([label, *(cell(result.stats(shape, system, n)) for n in ns)])
        rows.append(
            [
                "dsh ÷ floor (medians)",
                *(_relative(result, shape, n) for n in ns),
            ]
        )
        return f"{bound}\n\n" + markdown_table(["system", *(f"N={n}" for n in ns)], rows)

    parts = [
        "Heap condition: **freeze** (gc.collect() + gc.freeze() before every sample; "
        "floor and dsh-trio interleaved in one process).",
        "",
        table("uniform", uniform_ns, "Uniform: makespan ÷ 10 ms (`max_parallel = N`)."),
        "",
        table(
            "mixed",
            mixed_ns,
            "Mixed (9 parallel + 1 exclusive per 10 calls): makespan ÷ critical path "
            "(20 ms per 10 calls).",
        ),
        "",
    ]
    if result.timeline_n is not None and result.timelines:
        rows = []
        for system, label in (("floor", "raw trio floor"), ("dsh", "dsh-trio run_tool_calls")):
            runs = result.timelines.get(system, [])
            medians = [statistics.median(run[i] for run in runs) for i in range(5)]
            rows.append([label, *(f"{m:.2f}" for m in medians)])
        parts += [
            f"Timeline of the uniform batch at N={result.timeline_n}: ms after the batch "
            "started (medians), when the first and the last body began to sleep and woke, "
            "and when the batch returned.",
            "",
            markdown_table(["system", *TIMELINE_MARKS], rows),
            "",
        ]
    floor = result.stats("uniform", "floor", 100)
    dsh = result.stats("uniform", "dsh", 100)
    if floor is not None and dsh is not None:
        relative = dsh.median / floor.median
        status = "met" if relative <= 1.1 else "**NOT MET**"
        parts.append(
            f"Target: makespan/ideal for 100×10 ms within 1.1× of the floor's: "
            f"{fmt_ratio(dsh.median)} vs {fmt_ratio(floor.median)} = "
            f"{fmt_ratio(relative)} — {status}."
        )
    return "\n".join(parts)


def _relative(result: MakespanResult, shape: str, n: int) -> str:
    floor = result.stats(shape, "floor", n)
    dsh = result.stats(shape, "dsh", n)
    if floor is None or dsh is None:
        return "–"
    return fmt_ratio(dsh.median / floor.median)

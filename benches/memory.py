"""Memory per in-flight call, and what each call leaves for the cyclic garbage collector.

*In flight*: ``n`` calls whose bodies are all parked at once (``trio.sleep_forever``). The
bytes allocated between "nothing started" and "all parked" are measured with
``tracemalloc`` (exact Python-level bytes) and, without tracing, as the growth of the
resident set in a fresh child process per sample (``python -m benches.memory KEY N``;
rough: it counts whole pymalloc arenas and pages). The number of gc-tracked objects per
parked call is counted in the traced pass (collector disabled meanwhile). The floors are
raw trio tasks parked the same way, without and with one ``CancelScope`` each. dsh-trio
runs the calls with ``open_batch(max_parallel=n)`` and releases them with the batch
``Abort``.

*GC*: for each per-call system of ``benches.overhead`` (and the peers when installed), one
batch of ``n`` calls with the collector disabled. CPython triggers a generation-0
collection when the number of gc-tracked objects allocated minus those deallocated
exceeds the threshold, so the growth of ``gc.get_count()[0]`` over a batch is exactly the
allocation pressure that makes the collector run; ``gc.collect()`` afterwards returns the
objects only the cyclic collector could reclaim. A second batch with the collector enabled
counts the collections it triggered and the time they took (``gc.callbacks``).
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

import attrs
import trio
import trio.testing

from dsh_sched import open_batch

from ._dsh import model_calls, raw_tool, runtime_with
from ._harness import (
    HEAP_CONDITIONS,
    Stats,
    System,
    fmt_bytes,
    fmt_ratio,
    markdown_table,
    rss_bytes,
    run_child,
    run_in_loop,
    settle_heap,
)

__all__ = [
    "GcFigures",
    "InflightResult",
    "measure_gc",
    "measure_inflight",
    "report_gc",
    "report_inflight",
]


# -- in flight ----------------------------------------------------------------------------


@attrs.define
class _Parked:
    count: int = 0


async def _park(parked: _Parked) -> None:
    parked.count += 1
    await trio.sleep_forever()


async def _scoped_park(parked: _Parked) -> None:
    with trio.CancelScope():
        parked.count += 1
        await trio.sleep_forever()


# A holder: ``prepare(n)`` (untraced) returns ``hold(at_peak)``, which spawns the n calls,
# calls ``at_peak`` once they are all parked, and releases them.
Hold = Callable[[Callable[[], None]], Awaitable[None]]
Holder = Callable[[int], Hold]


def _task_holder(task: Callable[[_Parked], Awaitable[None]]) -> Holder:
    def prepare(n: int) -> Hold:
        async def hold(at_peak: Callable[[], None]) -> None:
            parked = _Parked()
            async with trio.open_nursery() as nursery:
                for _ in range(n):
                    nursery.start_soon(task, parked)
                await trio.testing.wait_all_tasks_blocked()
                if parked.count != n:
                    raise AssertionError(f"{parked.count} of {n} tasks parked")
                at_peak()
                nursery.cancel_scope.cancel()

        return hold

    return prepare


def _dsh_holder(n: int) -> Hold:
    parked = _Parked()

    async def body(args: object, ctx: object) -> str:
        parked.count += 1
        await trio.sleep_forever()

    runtime = runtime_with(raw_tool("park", body))
    calls = model_calls(n, "park")

    async def hold(at_peak: Callable[[], None]) -> None:
        parked.count = 0
        async with open_batch(runtime, calls, max_parallel=n, keep_results=False) as batch:
            await trio.testing.wait_all_tasks_blocked()
            if parked.count != n:
                raise AssertionError(f"{parked.count} of {n} calls parked")
            at_peak()
            batch.abort.abort("released")

    return hold


HOLDERS: Final[dict[str, tuple[str, Holder]]] = {
    "task": ("raw trio task (parked)", _task_holder(_park)),
    "task+scope": ("raw trio task + one CancelScope (parked)", _task_holder(_scoped_park)),
    "dsh": ("dsh-trio run_tool_calls call (parked body)", _dsh_holder),
}


def _traced(holder: Holder, n: int) -> tuple[float, float]:
    """Bytes and gc-tracked objects per parked call."""
    hold = holder(n)
    peak: list[int] = []
    objects: list[int] = []

    async def main() -> None:
        def at_peak() -> None:
            objects.append(gc.get_count()[0])
            gc.collect()
            peak.append(tracemalloc.get_traced_memory()[0])

        gc.collect()
        gc.disable()
        tracemalloc.start()
        try:
            base_objects = gc.get_count()[0]
            base = tracemalloc.get_traced_memory()[0]
            await hold(at_peak)
        finally:
            tracemalloc.stop()
            gc.enable()
        peak[0] -= base
        objects[0] -= base_objects

    trio.run(main)
    return peak[0] / n, objects[0] / n


def _rss_bytes(holder: Holder, n: int) -> float:
    hold = holder(n)
    peak: list[int] = []

    async def main() -> None:
        def at_peak() -> None:
            gc.collect()
            peak.append(rss_bytes())

        gc.collect()
        base = rss_bytes()
        await hold(at_peak)
        peak[0] -= base

    trio.run(main)
    return peak[0] / n


def _rss_in_child(key: str, n: int) -> float:
    return float(run_child("benches.memory", key, str(n)))


@attrs.define
class InflightResult:
    """Per in-flight call: traced bytes, gc-tracked objects and RSS growth per holder."""

    n: int
    traced: dict[str, list[float]] = attrs.Factory(dict)
    objects: dict[str, list[float]] = attrs.Factory(dict)
    rss: dict[str, list[float]] = attrs.Factory(dict)


def measure_inflight(n: int, *, repeats: int, progress: Callable[[str], None]) -> InflightResult:
    """Measure every holder ``repeats`` times (interleaved), traced and RSS passes."""
    result = InflightResult(n)
    for _ in range(repeats):
        for key, (_, hold) in HOLDERS.items():
            settle_heap("freeze")
            size, objects = _traced(hold, n)
            result.traced.setdefault(key, []).append(size)
            result.objects.setdefault(key, []).append(objects)
            result.rss.setdefault(key, []).append(_rss_in_child(key, n))
    progress(f"memory: {n} parked calls done")
    return result


def report_inflight(result: InflightResult) -> str:
    """The in-flight memory table and the ≤ 2× raw-task target."""
    rows = []
    for key, (label, _) in HOLDERS.items():
        traced = Stats.of(result.traced[key])
        objects = Stats.of(result.objects[key])
        rss = Stats.of(result.rss[key])
        rows.append(
            [
                label,
                f"{fmt_bytes(traced.median)} ({fmt_bytes(traced.low)}–{fmt_bytes(traced.high)})",
                f"{objects.median:.1f}",
                f"{fmt_bytes(rss.median)} ({fmt_bytes(rss.low)}–{fmt_bytes(rss.high)})",
            ]
        )
    ratio = Stats.of(result.traced["dsh"]).median / Stats.of(result.traced["task"]).median
    status = "met" if ratio <= 2.0 else "**NOT MET**"
    return "\n".join(
        [
            f"{result.n} calls parked at once; heap condition **freeze** (gc.collect() + "
            "gc.freeze() before every traced sample); RSS in a fresh process per sample.",
            "",
            markdown_table(
                [
                    "per in-flight call",
                    "tracemalloc bytes",
                    "gc-tracked objects",
                    "RSS growth, fresh process (rough)",
                ],
                rows,
            ),
            "",
            f"Target: memory per in-flight call ≤ 2× a raw trio task: "
            f"{fmt_ratio(ratio)} (tracemalloc medians) — {status}.",
        ]
    )


# -- garbage collector --------------------------------------------------------------------


@attrs.frozen
class GcFigures:
    """What one batch of ``n`` calls costs the cyclic collector."""

    net_tracked_per_call: float
    cyclic_garbage_per_call: float
    collections: tuple[int, int, int]
    gc_seconds_per_call: float
    seconds_per_call: float


def _count_objects(system: System, n: int) -> tuple[float, float]:
    batch = system.prepare(n)
    run = batch.run

    async def counted() -> tuple[float, float]:
        gc.collect()
        before = gc.get_count()[0]
        last = await run()
        grown = gc.get_count()[0] - before
        batch.check(last)
        del last
        garbage = gc.collect()
        return grown / n, garbage / n

    run_in_loop(system.loop, run)  # warm-up
    gc.disable()
    try:
        return run_in_loop(system.loop, counted)
    finally:
        gc.enable()


def _count_collections(system: System, n: int) -> tuple[tuple[int, int, int], float, float]:
    batch = system.prepare(n)
    run = batch.run
    counts = [0, 0, 0]
    spent = [0.0]
    started = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            counts[info["generation"]] += 1
            spent[0] += time.perf_counter() - started[0]

    async def timed() -> float:
        settle_heap("freeze")
        gc.callbacks.append(on_gc)
        try:
            start = time.perf_counter()
            last = await run()
            elapsed = time.perf_counter() - start
        finally:
            gc.callbacks.remove(on_gc)
        batch.check(last)
        return elapsed

    run_in_loop(system.loop, run)  # warm-up
    elapsed = run_in_loop(system.loop, timed)
    return (counts[0], counts[1], counts[2]), spent[0] / n, elapsed / n


def measure_gc(
    systems: Sequence[System], n: int, *, progress: Callable[[str], None]
) -> dict[str, GcFigures]:
    """One counted batch (collector off) and one observed batch (collector on) per system."""
    figures = {}
    for system in systems:
        settle_heap("freeze")
        net, garbage = _count_objects(system, n)
        collections, gc_seconds, seconds = _count_collections(system, n)
        figures[system.key] = GcFigures(net, garbage, collections, gc_seconds, seconds)
    progress(f"gc: n={n} done")
    return figures


def report_gc(figures: dict[str, GcFigures], labels: dict[str, str], n: int) -> str:
    """The GC table."""
    rows = []
    for key, f in figures.items():
        share = f.gc_seconds_per_call / f.seconds_per_call if f.seconds_per_call else 0.0
        rows.append(
            [
                f"`{key}` {labels[key]}",
                f"{f.net_tracked_per_call:.1f}",
                f"{f.cyclic_garbage_per_call:.1f}",
                "/".join(map(str, f.collections)),
                f"{f.gc_seconds_per_call * 1e6:.2f} ({share:.0%})",
            ]
        )
    return "\n".join(
        [
            f"One batch of N={n}; heap condition **freeze** ({HEAP_CONDITIONS['freeze']}).",
            "",
            markdown_table(
                [
                    "system",
                    "net gc-tracked objects / call (results held)",
                    "cyclic garbage / call",
                    "collections gen0/1/2 (gc on)",
                    "GC µs / call (share of batch time)",
                ],
                rows,
            ),
        ]
    )


if __name__ == "__main__":
    # The RSS pass of measure_inflight: one holder, one size, in a fresh process.
    _key, _n = sys.argv[1], int(sys.argv[2])
    print(_rss_bytes(HOLDERS[_key][1], _n))

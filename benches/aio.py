"""The asyncio bridge: a batch awaited from asyncio through ``dsh_sched.aio`` against the same
batch awaited natively inside ``trio.run`` (integrations §3.5, Y-P1..Y-P3).

Each repeat runs one native sample (a fresh ``trio.run``) and then one bridged sample per
host (a fresh ``asyncio.run``, and uvloop's when installed), so slow drift of the machine
hits both sides alike. Only the awaited batches are timed: the loop's start-up and the
portal's start (one warm-up batch) are not. Heap condition **freeze** before every sample.

- **Y-P1, fixed cost:** ``inner`` consecutive 1-call batches; the per-batch medians of the
  two sides are subtracted.
- **Y-P2:** one 1000-call batch (``max_parallel=1000``); ratio of the medians.
- **Y-P3:** ten concurrent callers (``asyncio.gather``) each awaiting a 1000-call batch,
  against ten such batches in one trio nursery; ratio of the medians.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import TYPE_CHECKING, Final

import attrs
import trio

import dsh_sched
from dsh_sched import aio

from ._dsh import check_outcome, model_calls, raw_tool, runtime_with
from ._harness import fmt_ratio, fmt_us, markdown_table, settle_heap

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Sequence
    from typing import Any

    from dsh_tools import ToolRuntime

__all__ = ["AioResult", "available_hosts", "measure", "report"]

_P1_LIMIT_US: Final = 150.0
_P2_LIMIT: Final = 1.10
_P3_LIMIT: Final = 1.15


def available_hosts() -> tuple[str, ...]:
    """``asyncio``, plus ``uvloop`` when it can be imported."""
    try:
        import uvloop  # noqa: F401
    except ImportError:  # pragma: no cover - uvloop is in the dev extra
        return ("asyncio",)
    return ("asyncio", "uvloop")


@attrs.frozen(kw_only=True)
class AioResult:
    """Seconds per sample, per measure and side (``native`` or a host name)."""

    inner: int
    n: int
    callers: int
    repeats: int
    fixed: dict[str, tuple[float, ...]]  # seconds per 1-call batch
    single: dict[str, tuple[float, ...]]  # seconds per n-call batch
    concurrent: dict[str, tuple[float, ...]]  # seconds for `callers` n-call batches


def _run_host(host: str, main: Callable[[], Coroutine[Any, Any, float]]) -> float:
    if host == "uvloop":
        import uvloop

        return uvloop.run(main())
    return asyncio.run(main())


def _samples(
    runtime: ToolRuntime, *, inner: int, n: int, callers: int
) -> tuple[
    Callable[[], Coroutine[Any, Any, float]],
    Callable[[], Coroutine[Any, Any, float]],
    Callable[[], Coroutine[Any, Any, float]],
    Callable[[], Coroutine[Any, Any, float]],
    Callable[[], Coroutine[Any, Any, float]],
    Callable[[], Coroutine[Any, Any, float]],
]:
    one = model_calls(1)
    many = model_calls(n)

    async def native_fixed() -> float:
        start = time.perf_counter()
        for _ in range(inner):
            outcome = await dsh_sched.run_tool_calls(runtime, one)
        elapsed = time.perf_counter() - start
        check_outcome(1)(outcome)
        return elapsed / inner

    async def bridged_fixed() -> float:
        await aio.run_tool_calls(runtime, one)  # starts the portal: not timed
        start = time.perf_counter()
        for _ in range(inner):
            outcome = await aio.run_tool_calls(runtime, one)
        elapsed = time.perf_counter() - start
        check_outcome(1)(outcome)
        return elapsed / inner

    async def native_single() -> float:
        start = time.perf_counter()
        outcome = await dsh_sched.run_tool_calls(runtime, many, max_parallel=n)
        elapsed = time.perf_counter() - start
        check_outcome(n)(outcome)
        return elapsed

    async def bridged_single() -> float:
        await aio.run_tool_calls(runtime, one)
        start = time.perf_counter()
        outcome = await aio.run_tool_calls(runtime, many, max_parallel=n)
        elapsed = time.perf_counter() - start
        check_outcome(n)(outcome)
        return elapsed

    async def native_concurrent() -> float:
        outcomes: list[dsh_sched.BatchOutcome] = []

        async def caller() -> None:
            outcomes.append(await dsh_sched.run_tool_calls(runtime, many, max_parallel=n))

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for _ in range(callers):
                nursery.start_soon(caller)
        elapsed = time.perf_counter() - start
        for outcome in outcomes:
            check_outcome(n)(outcome)
        return elapsed

    async def bridged_concurrent() -> float:
        await aio.run_tool_calls(runtime, one)
        start = time.perf_counter()
        outcomes = await asyncio.gather(
            *(aio.run_tool_calls(runtime, many, max_parallel=n) for _ in range(callers))
        )
        elapsed = time.perf_counter() - start
        for outcome in outcomes:
            check_outcome(n)(outcome)
        return elapsed

    return (
        native_fixed,
        bridged_fixed,
        native_single,
        bridged_single,
        native_concurrent,
        bridged_concurrent,
    )


def measure(
    *,
    inner: int,
    n: int,
    callers: int,
    repeats: int,
    hosts: Sequence[str],
    progress: Callable[[str], None],
) -> AioResult:
    """Interleave native and bridged samples ``repeats`` times."""
    runtime = runtime_with(raw_tool())
    nf, bf, ns, bs, nc, bc = _samples(runtime, inner=inner, n=n, callers=callers)
    sides = ("native", *hosts)
    fixed: dict[str, list[float]] = {side: [] for side in sides}
    single: dict[str, list[float]] = {side: [] for side in sides}
    concurrent: dict[str, list[float]] = {side: [] for side in sides}
    for repeat in range(repeats):
        for store, native, bridged in ((fixed, nf, bf), (single, ns, bs), (concurrent, nc, bc)):
            settle_heap("freeze")
            store["native"].append(trio.run(native))
            for host in hosts:
                settle_heap("freeze")
                store[host].append(_run_host(host, bridged))
        progress(f"aio: repeat {repeat + 1}/{repeats}")
    return AioResult(
        inner=inner,
        n=n,
        callers=callers,
        repeats=repeats,
        fixed={k: tuple(v) for k, v in fixed.items()},
        single={k: tuple(v) for k, v in single.items()},
        concurrent={k: tuple(v) for k, v in concurrent.items()},
    )


def _status(met: bool) -> str:
    return "met" if met else "**NOT MET**"


def _spread(values: Sequence[float], fmt: Callable[[float], str]) -> str:
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})"


def report(result: AioResult) -> str:
    """The three measures per host and the Y-P1..Y-P3 verdicts.

    The bridge's extra cost and its ratios are taken per repeat (each repeat's bridged
    sample against the native sample just before it) and shown as median (min–max).
    """
    med = statistics.median
    rows = [
        [
            "native `trio.run`",
            _spread(result.fixed["native"], fmt_us),
            _spread([x * 1e3 for x in result.single["native"]], _ms),
            _spread([x * 1e3 for x in result.concurrent["native"]], _ms),
        ]
    ]
    verdicts = []
    for host in [side for side in result.fixed if side != "native"]:
        extra = [b - a for a, b in zip(result.fixed["native"], result.fixed[host], strict=True)]
        single = [b / a for a, b in zip(result.single["native"], result.single[host], strict=True)]
        concurrent = [
            b / a for a, b in zip(result.concurrent["native"], result.concurrent[host], strict=True)
        ]
        rows.append(
            [
                f"`aio` on {host}",
                _spread(result.fixed[host], fmt_us),
                _spread([x * 1e3 for x in result.single[host]], _ms),
                _spread([x * 1e3 for x in result.concurrent[host]], _ms),
            ]
        )
        rows.append(
            [
                f"{host} − or ÷ native, per repeat",
                f"+{_spread(extra, fmt_us)}",
                _spread(single, fmt_ratio),
                _spread(concurrent, fmt_ratio),
            ]
        )
        verdicts += [
            f"- Y-P1 on {host}: the bridge adds {fmt_us(med(extra))} µs per batch "
            f"(target ≤ 150 µs) — {_status(med(extra) * 1e6 <= _P1_LIMIT_US)}.",
            f"- Y-P2 on {host}: {fmt_ratio(med(single))} of native (target ≤ 1.10×) — "
            f"{_status(med(single) <= _P2_LIMIT)}.",
            f"- Y-P3 on {host}: {fmt_ratio(med(concurrent))} of native (target ≤ 1.15×) — "
            f"{_status(med(concurrent) <= _P3_LIMIT)}.",
        ]
    headers = [
        "side",
        "1-call batch, µs",
        f"{result.n}-call batch, ms",
        f"{result.callers} callers × {result.n} calls, ms",
    ]
    return "\n".join(
        [
            f"No-op tool; median (min–max) of {result.repeats} interleaved repeats "
            f"(1-call batches: {result.inner} per sample); `max_parallel={result.n}` for the "
            f"large batches; heap condition **freeze**.",
            "",
            markdown_table(headers, rows),
            "",
            *verdicts,
        ]
    )


def _ms(value: float) -> str:
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"

"""Scenario ``code``: Code Mode's costs, each as a ratio against a baseline of the same run.

Every measure is a pair of samplers (numerator and denominator) timed alternately, medians
over repeats; the table shows both medians, their ratio and the target (code-mode §10).

- **P5**, lane overhead: ``n`` sub-calls of a parallel-safe no-op through ``run_code``,
  whose ``ScriptedCodeRuntime`` program gathers them (the sub-call lane, pool of 10) /
  ``dsh_sched.run_tool_calls`` of the same ``n`` calls with ``max_parallel=10`` (the same
  lane, driven for a model batch). Target ≤ 2.0.

The WASI measures (P1–P4, P6) join :data:`MEASURES` the same way: a :class:`Measure` whose
``build`` returns the two samplers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, TypeAlias

import attrs
import trio

from dsh_sched import run_tool_calls
from dsh_tools import ToolCall, ToolRuntime
from dsh_tools.code import CodeRunOutcome
from dsh_tools.testing import ScriptedCodeRuntime

from ._dsh import check_outcome, model_calls, raw_tool, runtime_with
from ._harness import Stats, fmt_ratio, fmt_us, markdown_table, settle_heap

if TYPE_CHECKING:
    from collections.abc import Awaitable, Sequence

    from dsh_tools.code import CodeRunLimits, Dispatch

__all__ = ["MEASURES", "CodeResult", "Measure", "Sampler", "measure", "report"]

#: Times one sample (``inner`` runs) and returns the elapsed seconds per run.
Sampler: TypeAlias = Callable[[], float]

_MAX_PARALLEL: Final = 10
_ARGUMENTS: Final = {"a": 1, "b": "x"}


@attrs.frozen(kw_only=True)
class Measure:
    """One row of the table: what is divided by what, and the target for the ratio."""

    key: str
    title: str
    numerator: str
    denominator: str
    target: str
    meets: Callable[[float], bool]
    #: ``build(n, inner)`` returns the numerator and denominator samplers.
    build: Callable[[int, int], tuple[Sampler, Sampler]]


def _timed(run: Callable[[], Awaitable[None]], inner: int) -> Sampler:
    """A sampler: ``inner`` runs of ``run`` in one fresh trio run, seconds per run."""

    async def sample() -> float:
        start = time.perf_counter()
        for _ in range(inner):
            await run()
        return (time.perf_counter() - start) / inner

    return lambda: trio.run(sample)


def _lane_overhead(n: int, inner: int) -> tuple[Sampler, Sampler]:
    """P5's samplers: ``n`` gathered sub-calls through run_code / the same batch."""

    async def script(
        dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits
    ) -> CodeRunOutcome:
        async with trio.open_nursery() as nursery:
            for _ in range(n):
                nursery.start_soon(dispatch, "noop", _ARGUMENTS)
        return CodeRunOutcome()

    code_runtime = ToolRuntime(
        mode="code",
        code_runtime=ScriptedCodeRuntime(script),
        max_parallel_sub_calls=_MAX_PARALLEL,
    )
    code_runtime.register(raw_tool())
    program = {"code": "await asyncio.gather(...)", "description": "Gather the no-ops."}

    async def through_run_code() -> None:
        result = await code_runtime.execute(
            ToolCall(call_id="run", name="run_code", arguments=program)
        )
        if result.is_error:
            raise AssertionError(f"run_code failed: {result.content}")

    batch_runtime = runtime_with(raw_tool())
    calls = model_calls(n)
    check = check_outcome(n)

    async def through_a_batch() -> None:
        check(await run_tool_calls(batch_runtime, calls, max_parallel=_MAX_PARALLEL))

    return _timed(through_run_code, inner), _timed(through_a_batch, inner)


#: The measures of the scenario, in table order.
MEASURES: tuple[Measure, ...] = (
    Measure(
        key="P5",
        title="lane overhead",
        numerator="run_code gathering n sub-calls (ScriptedCodeRuntime)",
        denominator="run_tool_calls of the same n calls",
        target="≤ 2.0",
        meets=lambda ratio: ratio <= 2.0,
        build=_lane_overhead,
    ),
)


@attrs.define
class CodeResult:
    """Seconds per run, per measure and side (``"numerator"`` / ``"denominator"``)."""

    n: int
    seconds: dict[tuple[str, str], list[float]] = attrs.Factory(dict)

    def stats(self, key: str, side: str) -> Stats | None:
        values = self.seconds.get((key, side))
        return Stats.of(values) if values else None


def measure(
    *,
    n: int,
    repeats: int,
    inner: int,
    progress: Callable[[str], None],
    measures: Sequence[Measure] = MEASURES,
) -> CodeResult:
    """Run each measure's two samplers alternately, ``repeats`` times, after a warm-up."""
    result = CodeResult(n=n)
    for m in measures:
        sides = dict(zip(("numerator", "denominator"), m.build(n, inner), strict=True))
        for sampler in sides.values():
            sampler()  # warm-up
        for r in range(repeats):
            order = list(sides.items())
            if r % 2:
                order.reverse()
            for side, sampler in order:
                settle_heap("freeze")
                result.seconds.setdefault((m.key, side), []).append(sampler())
        progress(f"code: {m.key} done")
    return result


def report(result: CodeResult, measures: Sequence[Measure] = MEASURES) -> str:
    """One row per measure: both medians (µs per run, min–max), the ratio and the target."""

    def cell(stats: Stats | None) -> str:
        if stats is None:
            return "–"
        return f"{fmt_us(stats.median)} ({fmt_us(stats.low)}–{fmt_us(stats.high)})"

    rows = []
    for m in measures:
        top, bottom = result.stats(m.key, "numerator"), result.stats(m.key, "denominator")
        if top is None or bottom is None:
            ratio, status = "–", "not measured"
        else:
            value = top.median / bottom.median
            ratio = fmt_ratio(value)
            status = "met" if m.meets(value) else "**NOT MET**"
        rows.append(
            [
                m.key,
                m.title,
                f"{m.numerator}: {cell(top)}",
                f"{m.denominator}: {cell(bottom)}",
                ratio,
                m.target,
                status,
            ]
        )
    return "\n".join(
        [
            "Heap condition: **freeze** (gc.collect() + gc.freeze() before every sample).",
            "",
            f"n = {result.n}; µs per run: median (min–max); the ratio divides the medians.",
            "",
            markdown_table(
                ["#", "measure", "numerator", "denominator", "ratio", "target", "status"], rows
            ),
        ]
    )

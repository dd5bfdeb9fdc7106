"""MCP tool sources (integrations §4.7): what dsh-trio adds on top of the ``mcp`` SDK.

One demo server (the test server, ``tests/data/mcp_demo_server.py``, with 100 filler tools
so that its listing has 110) runs over stdio for the whole scenario; every figure compares
dsh-trio with the bare ``mcp.Client`` calls on the same session, interleaved, medians over
repeats:

- X-P1: 100 calls of the trusted read-only ``add`` through ``run_tool_calls(max_parallel=100)``
  against 100 bare ``client.call_tool`` in one trio nursery (target ratio ≤ 1.2×).
- X-P2: a 1-call batch against one bare ``client.call_tool`` of the same tool (target:
  ≤ 250 µs added, median).
- X-P3: ``source.refresh()`` of the unchanged listing against a bare paginated
  ``list_tools(cache_mode="refresh")`` (target: no change notification, ≤ 2 ms added).
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Final

import attrs
import trio
from mcp import StdioServerParameters

from dsh_sched import ModelToolCall, run_tool_calls
from dsh_tools import ToolRuntime
from dsh_tools.mcp import open_mcp_source

from ._harness import REPO_ROOT, Stats, fmt_ratio, fmt_us, markdown_table, settle_heap

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp import Client

__all__ = ["McpResult", "measure", "report"]

SERVER: Final = REPO_ROOT / "tests" / "data" / "mcp_demo_server.py"
FILLERS: Final = 100
#: Calls per X-P2 sample: one call is a few hundred µs, too short to time alone.
SINGLE_INNER: Final = 20


@attrs.define
class McpResult:
    """Seconds per sample, by figure and system (``bare`` or ``dsh``)."""

    seconds: dict[tuple[str, str], list[float]] = attrs.Factory(dict)
    tools: int = 0
    notifications: int = 0

    def stats(self, figure: str, system: str) -> Stats:
        return Stats.of(self.seconds[(figure, system)])


async def _timed(fn: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start


def _check_adds(results: list[object], n: int) -> None:
    texts = [getattr(r, "content", [None])[0] for r in results]
    expected = [str(i + 1) for i in range(n)]
    if [getattr(t, "text", None) for t in texts] != expected:
        raise AssertionError("a call returned a wrong sum")


async def _measure(repeats: int, progress: Callable[[str], None]) -> McpResult:
    result = McpResult()
    runtime = ToolRuntime()
    server = StdioServerParameters(
        command=sys.executable, args=[str(SERVER)], env={"DEMO_EXTRA_TOOLS": str(FILLERS)}
    )
    async with open_mcp_source(runtime, server, trusted=True) as source:
        client: Client = source.client
        result.tools = len(source.tools)
        batch = [
            ModelToolCall(call_id=f"c{i}", name="add", arguments={"a": i, "b": 1})
            for i in range(100)
        ]
        one = [ModelToolCall(call_id="one", name="add", arguments={"a": 1, "b": 1})]

        async def bare_many() -> None:
            results: list[object] = [None] * 100

            async def call(i: int) -> None:
                results[i] = await client.call_tool("add", {"a": i, "b": 1})

            async with trio.open_nursery() as nursery:
                for i in range(100):
                    nursery.start_soon(call, i)
            _check_adds(results, 100)

        async def dsh_many() -> None:
            outcome = await run_tool_calls(runtime, batch, max_parallel=100)
            _check_adds([c.result for c in outcome.results], 100)

        async def bare_one() -> None:
            for _ in range(SINGLE_INNER):
                await client.call_tool("add", {"a": 1, "b": 1})

        async def dsh_one() -> None:
            for _ in range(SINGLE_INNER):
                await run_tool_calls(runtime, one, max_parallel=1)

        async def bare_list() -> None:
            cursor: str | None = None
            for _ in range(100):
                page = await client.list_tools(cursor=cursor, cache_mode="refresh")
                cursor = page.next_cursor
                if cursor is None:
                    return

        figures = {
            "X-P1": {"bare": bare_many, "dsh": dsh_many},
            "X-P2": {"bare": bare_one, "dsh": dsh_one},
            "X-P3": {"bare": bare_list, "dsh": source.refresh},
        }
        notifications = 0

        def count() -> None:
            nonlocal notifications
            notifications += 1

        runtime.on_change(count)
        for systems in figures.values():  # warm-up
            for fn in systems.values():
                await fn()
        for r in range(repeats):
            for figure, systems in figures.items():
                order = list(systems.items())
                if r % 2:
                    order.reverse()
                for name, fn in order:
                    settle_heap("freeze")
                    result.seconds.setdefault((figure, name), []).append(await _timed(fn))
            if r % 10 == 9:
                progress(f"mcp: {r + 1} of {repeats} repeats")
        result.notifications = notifications
    return result


def measure(*, repeats: int, progress: Callable[[str], None]) -> McpResult:
    """Run the three figures against one stdio server, ``repeats`` interleaved samples each."""
    return trio.run(_measure, repeats, progress)


def report(result: McpResult) -> str:
    """The X-P1–X-P3 table: bare SDK, dsh-trio, the figure and its target."""
    p1 = (result.stats("X-P1", "bare"), result.stats("X-P1", "dsh"))
    p2 = (result.stats("X-P2", "bare"), result.stats("X-P2", "dsh"))
    p3 = (result.stats("X-P3", "bare"), result.stats("X-P3", "dsh"))
    ratio = p1[1].median / p1[0].median
    added_call = (p2[1].median - p2[0].median) / SINGLE_INNER
    added_refresh = p3[1].median - p3[0].median

    def cell(stats: Stats, per: int = 1) -> str:
        return (
            f"{fmt_us(stats.median / per)} ({fmt_us(stats.low / per)}–{fmt_us(stats.high / per)})"
        )

    def status(ok: bool) -> str:
        return "met" if ok else "**NOT MET**"

    rows = [
        ["X-P1: 100 parallel `add` calls", cell(p1[0]), cell(p1[1]),
         fmt_ratio(ratio), "≤ 1.2×", status(ratio <= 1.2)],
        ["X-P2: one `add` call (a 1-call batch)", cell(p2[0], SINGLE_INNER),
         cell(p2[1], SINGLE_INNER), f"+{fmt_us(added_call)} µs", "≤ +250 µs",
         status(added_call <= 250e-6)],
        [f"X-P3: unchanged {result.tools}-tool listing", cell(p3[0]), cell(p3[1]),
         f"+{fmt_us(added_refresh)} µs, {result.notifications} notifications",
         "≤ +2000 µs, none", status(added_refresh <= 2e-3 and result.notifications == 0)],
    ]  # fmt: skip
    return "\n".join(
        [
            "One stdio server for the scenario; bare `mcp.Client` calls and dsh-trio on the "
            "same session, interleaved; µs: median (min–max) over "
            f"{result.stats('X-P1', 'bare').count} samples.",
            "",
            markdown_table(
                ["figure", "bare mcp.Client", "dsh-trio", "dsh-trio adds", "target", "status"],
                rows,
            ),
        ]
    )

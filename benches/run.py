"""``python -m benches``: run the bench scenarios and print Markdown tables.

Examples::

    python -m benches                      # everything, full sizes (~10 min on 2 cores)
    python -m benches --quick              # everything, small sizes (~1 min)
    python -m benches overhead --n 100,1000 --repeats 9
    python -m benches overhead --heap alone   # each system in its own process
    python -m benches streaming --markdown /tmp/stream.md

Profiling lives in ``python -m benches.profile``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

import attrs

from . import abort, adapters, aio, code, makespan, memory, overhead, realistic, streaming
from ._harness import CLOCKS, HEAP_CONDITIONS, Clock, HeapMode, environment, markdown_table

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["FULL", "QUICK", "Plan", "main"]

SCENARIOS: Final = (
    "overhead",
    "gc",
    "memory",
    "makespan",
    "abort",
    "streaming",
    "adapters",
    "mcp",
    "aio",
    "code",
    "code-wasi",
    "realistic",
)


@attrs.frozen(kw_only=True)
class Plan:
    """Sizes and repeat counts of one run."""

    ns: tuple[int, ...]
    repeats: int
    repeats_large: int  # for N >= 10,000
    target_calls: int  # calls per sample at small N (batches are repeated)
    gc_n: int
    memory_n: int
    memory_repeats: int
    makespan_ns: tuple[int, ...]
    mixed_ns: tuple[int, ...]
    makespan_repeats: int
    abort_ns: tuple[int, ...]
    abort_repeats: int
    stream_total: int
    stream_batch: int
    stream_every: int
    stream_max_parallel: int
    adapters_n: int = 100  # calls per turn and schemas per export (integrations §2.9)
    adapters_repeats: int = 61
    adapters_inner: int = 20  # operations per sample
    mcp_repeats: int = 50
    aio_inner: int = 100  # 1-call batches per sample (Y-P1)
    aio_n: int = 1000  # calls per large batch (Y-P2, Y-P3)
    aio_callers: int = 10  # concurrent asyncio callers (Y-P3)
    aio_repeats: int = 31
    code_n: int = 100  # sub-calls per run_code and calls per batch (code-mode §10 P5)
    code_repeats: int = 15
    code_inner: int = 10  # runs per sample
    wasi_calls: int = 100  # sub-calls per program (code-mode §10 P3, P4)
    wasi_repeats: int = 9
    wasi_cold_repeats: int = 1  # each one is a full compile (~20 s on 2 cores)
    wasi_cache_dir: Path | None = None  # a folder holding the compiled module; None: compile once
    realistic_batches: int = 500  # batches of realistic_calls calls (issue 19)
    realistic_calls: int = 20
    realistic_repeats: int = 5


FULL: Final = Plan(
    ns=(1, 10, 100, 1000, 10_000),
    repeats=5,
    repeats_large=3,
    target_calls=2000,
    gc_n=10_000,
    memory_n=10_000,
    memory_repeats=3,
    makespan_ns=(1, 10, 100, 1000, 10_000),
    mixed_ns=(10, 100, 1000),
    makespan_repeats=5,
    abort_ns=(10, 100, 1000, 10_000),
    abort_repeats=15,
    stream_total=1_000_000,
    stream_batch=10_000,
    stream_every=100_000,
    stream_max_parallel=10,
    mcp_repeats=60,
)

QUICK: Final = Plan(
    ns=(1, 10, 100, 1000),
    repeats=3,
    repeats_large=1,
    target_calls=500,
    gc_n=1000,
    memory_n=1000,
    memory_repeats=1,
    makespan_ns=(1, 10, 100),
    mixed_ns=(10, 100),
    makespan_repeats=3,
    abort_ns=(100, 1000),
    abort_repeats=3,
    stream_total=100_000,
    stream_batch=10_000,
    stream_every=10_000,
    stream_max_parallel=10,
    adapters_repeats=5,
    adapters_inner=10,
    mcp_repeats=10,
    aio_inner=50,
    aio_repeats=3,
    code_repeats=5,
    code_inner=3,
    wasi_repeats=3,
    realistic_batches=50,
    realistic_repeats=3,
)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part.replace("_", "")) for part in text.split(",") if part)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benches",
        description="Measure dsh-trio against the raw trio floor and the peer frameworks.",
    )
    parser.add_argument(
        "scenarios",
        nargs="*",
        metavar="SCENARIO",
        help=f"any of {', '.join(SCENARIOS)} (default: all)",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats")
    parser.add_argument("--n", type=_ints, help="comma-separated batch sizes for overhead/gc")
    parser.add_argument("--repeats", type=int, help="repeats per size (overhead)")
    parser.add_argument("--repeats-large", type=int, help="repeats at N >= 10,000 (overhead)")
    parser.add_argument("--target-calls", type=int, help="calls per sample at small N")
    parser.add_argument(
        "--heap",
        choices=list(HEAP_CONDITIONS),
        default="freeze",
        help="freeze: one process, gc.freeze() before each sample; alone: one process per system",
    )
    parser.add_argument(
        "--clock",
        choices=list(CLOCKS),
        default="wall",
        help="overhead samples: wall time, or the process's CPU time (leaves out waiting for"
        " a core on a shared machine)",
    )
    parser.add_argument(
        "--system", action="append", help="only these overhead systems (repeatable)"
    )
    parser.add_argument("--no-peers", action="store_true", help="skip the peer frameworks")
    parser.add_argument("--stream-total", type=int, help="calls streamed in total")
    parser.add_argument("--stream-batch", type=int, help="calls per streamed batch")
    parser.add_argument("--json", type=Path, help="also write the overhead samples as JSON")
    parser.add_argument("--markdown", type=Path, help="also write the report to this file")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the selected scenarios and print the report; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    unknown = [s for s in args.scenarios if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario {unknown[0]!r}; choose from {', '.join(SCENARIOS)}")
    plan = QUICK if args.quick else FULL
    plan = attrs.evolve(
        plan,
        ns=args.n or plan.ns,
        repeats=args.repeats or plan.repeats,
        repeats_large=args.repeats_large or plan.repeats_large,
        target_calls=args.target_calls or plan.target_calls,
        stream_total=args.stream_total or plan.stream_total,
        stream_batch=args.stream_batch or plan.stream_batch,
    )
    scenarios: list[str] = args.scenarios or list(SCENARIOS)
    heap: HeapMode = args.heap
    quiet: bool = args.quiet

    def progress(message: str) -> None:
        if not quiet:
            print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    sections = run_scenarios(
        scenarios,
        plan,
        heap=heap,
        systems=args.system,
        peers=not args.no_peers,
        json_path=args.json,
        progress=progress,
        clock=args.clock,
    )
    if args.system and heap == "alone":
        return 0  # a child of an ``alone`` run: its JSON is the output
    header = ["## Environment", "", markdown_table(["", ""], list(environment().items()))]
    text = "\n\n".join(["\n".join(header), *sections]) + "\n"
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    if not quiet or not args.markdown:
        print(text)
    return 0


def run_scenarios(
    scenarios: Sequence[str],
    plan: Plan,
    *,
    heap: HeapMode,
    systems: Sequence[str] | None,
    peers: bool,
    json_path: Path | None,
    progress: overhead.Progress,
    clock: Clock = "wall",
) -> list[str]:
    """Run each scenario in turn; return one Markdown section per scenario."""
    sections = []
    chosen = overhead.all_systems(peers=peers)
    if systems:
        unknown = set(systems) - {s.key for s in chosen}
        if unknown:
            raise SystemExit(f"unknown or unavailable systems: {', '.join(sorted(unknown))}")
        chosen = [s for s in chosen if s.key in systems]
    for scenario in scenarios:
        started = time.perf_counter()
        if scenario == "overhead":
            if heap == "alone" and not systems:
                m = overhead.measure_alone(
                    [s.key for s in chosen],
                    plan.ns,
                    repeats=plan.repeats,
                    repeats_large=plan.repeats_large,
                    target_calls=plan.target_calls,
                    progress=progress,
                    clock=clock,
                )
                m.labels = {s.key: s.label for s in chosen}
            else:
                m = overhead.measure(
                    chosen,
                    plan.ns,
                    repeats=plan.repeats,
                    repeats_large=plan.repeats_large,
                    target_calls=plan.target_calls,
                    heap=heap,
                    progress=progress,
                    clock=clock,
                )
            if json_path is not None:
                json_path.write_text(json.dumps(m.to_json(), indent=1), encoding="utf-8")
            body = overhead.report(m)
            title = "Per-call overhead (scenarios a–d, floors, peers)"
        elif scenario == "gc":
            gc_systems = [s for s in chosen if s.key != "a10"]
            figures = memory.measure_gc(gc_systems, plan.gc_n, progress=progress)
            body = memory.report_gc(figures, {s.key: s.label for s in gc_systems}, plan.gc_n)
            title = "Garbage-collector pressure per call"
        elif scenario == "memory":
            inflight = memory.measure_inflight(
                plan.memory_n, repeats=plan.memory_repeats, progress=progress
            )
            body = memory.report_inflight(inflight)
            title = "Memory per in-flight call"
        elif scenario == "makespan":
            result = makespan.measure(
                plan.makespan_ns,
                plan.mixed_ns,
                repeats=plan.makespan_repeats,
                progress=progress,
                timeline_n=100 if 100 in plan.makespan_ns else None,
            )
            body = makespan.report(result, plan.makespan_ns, plan.mixed_ns)
            title = "Makespan against the lower bound"
        elif scenario == "abort":
            latency = abort.measure(plan.abort_ns, repeats=plan.abort_repeats, progress=progress)
            body = abort.report(latency, plan.abort_ns)
            title = "Abort latency"
        elif scenario == "adapters":
            timings = adapters.measure(
                plan.adapters_n,
                repeats=plan.adapters_repeats,
                inner=plan.adapters_inner,
                progress=progress,
            )
            body = adapters.report(timings)
            title = "Provider adapters against hand-written code"
        elif scenario == "mcp":
            from . import mcp  # needs the mcp extra; imported only when asked for

            body = mcp.report(mcp.measure(repeats=plan.mcp_repeats, progress=progress))
            title = "MCP tool sources (integrations §4.7)"
        elif scenario == "aio":
            bridge = aio.measure(
                inner=plan.aio_inner,
                n=plan.aio_n,
                callers=plan.aio_callers,
                repeats=plan.aio_repeats,
                hosts=aio.available_hosts(),
                progress=progress,
            )
            body = aio.report(bridge)
            title = "The asyncio bridge (dsh_sched.aio)"
        elif scenario == "code":
            costs = code.measure(
                n=plan.code_n, repeats=plan.code_repeats, inner=plan.code_inner, progress=progress
            )
            body = code.report(costs)
            title = "Code Mode (code-mode §10)"
        elif scenario == "code-wasi":
            from . import code_wasi  # needs the codemode extra; imported only when asked for

            body = code_wasi.report(
                code_wasi.measure(
                    calls=plan.wasi_calls,
                    repeats=plan.wasi_repeats,
                    cold_repeats=plan.wasi_cold_repeats,
                    cache_dir=plan.wasi_cache_dir,
                    progress=progress,
                )
            )
            title = "Code Mode in the WASI sandbox (code-mode §10 P1–P4, P6)"
        elif scenario == "realistic":
            body = realistic.report(
                realistic.measure(
                    batches=plan.realistic_batches,
                    calls=plan.realistic_calls,
                    repeats=plan.realistic_repeats,
                    systems=realistic.available(peers=peers),
                    progress=progress,
                )
            )
            title = "Realistic calls: ~2 KB arguments, typed parameters, 1–5 ms bodies"
        else:
            stream = streaming.measure_in_child(
                plan.stream_total,
                batch_size=plan.stream_batch,
                sample_every=plan.stream_every,
                max_parallel=plan.stream_max_parallel,
            )
            body = streaming.report(stream)
            title = "Streaming through open_batch"
        elapsed = time.perf_counter() - started
        sections.append(f"## {title}\n\n{body}\n\n(scenario wall time {elapsed:.0f} s)")
    return sections

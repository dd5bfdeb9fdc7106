"""Per-call overhead: the trio floors, asyncio, dsh-trio configurations (a)–(d) and the peers.

Systems (``key``: what one batch of ``n`` calls does):

- ``F0``: a raw trio nursery spawning one no-op task per call.
- ``F1``: the same, each task entering one ``trio.CancelScope``.
- ``asyncio``: an ``asyncio.TaskGroup`` creating one no-op task per call.
- ``a``: ``run_tool_calls`` on a raw ``ToolDefinition``, no hooks, ``max_parallel=n``.
- ``a10``: the same with the default ``max_parallel=10``.
- ``b``: (a) plus one pre hook, one wrapper, one post hook (all delegating) and one observer.
- ``c``: (a) with an ``@tool`` definition that validates and structures its arguments.
- ``d``: ``runtime.execute`` awaited in a loop, one call at a time (no scheduler).
- ``D0``: the no-op body awaited inside one ``trio.CancelScope``, in a loop (the floor of d).
- the peers (``benches.peers``) when the ``peers`` extra is installed.

Every system is measured at every ``n`` in the same run with the repeats interleaved (the
order rotates each repeat); figures are microseconds per call and ratios to ``F1`` (``d``
to ``D0``).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Final

import attrs
import trio

from dsh_sched import run_tool_calls

from ._dsh import (
    check_outcome,
    check_results,
    model_calls,
    noop_body,
    raw_tool,
    runtime_with,
    tool_calls,
    validated_sync_tool,
    validated_tool,
)
from ._harness import (
    HEAP_CONDITIONS,
    Batch,
    Clock,
    HeapMode,
    Stats,
    System,
    fmt_ratio,
    fmt_us,
    inner_count,
    markdown_table,
    run_child,
    settle_heap,
    time_batches,
)

__all__ = [
    "CORE_KEYS",
    "Measurements",
    "all_systems",
    "core_systems",
    "measure",
    "measure_alone",
    "report",
]

Progress = Callable[[str], None]


# -- floors -------------------------------------------------------------------------------


async def _noop_task() -> None:
    return None


async def _scoped_noop_task() -> None:
    # The floor F1 measures the cost of entering and leaving one scope per task; nothing in
    # it needs to be cancellable.
    with trio.CancelScope():  # noqa: ASYNC100 - the scope's own cost is what is measured
        return None


def _expect(n: int) -> Callable[[object], None]:
    def check(value: object) -> None:
        if value != n:
            raise AssertionError(f"expected {n} calls, got {value!r}")

    return check


def _nursery_floor(task: Callable[[], Awaitable[None]]) -> Callable[[int], Batch]:
    def prepare(n: int) -> Batch:
        async def run() -> int:
            async with trio.open_nursery() as nursery:
                for _ in range(n):
                    nursery.start_soon(task)
            return n

        return Batch(run, _expect(n))

    return prepare


async def _noop_coroutine() -> None:
    return None


def _prepare_asyncio(n: int) -> Batch:
    async def run() -> int:
        async with asyncio.TaskGroup() as group:
            for _ in range(n):
                group.create_task(_noop_coroutine())
        return n

    return Batch(run, _expect(n))


# -- dsh-trio -----------------------------------------------------------------------------


def _scheduled(
    *,
    validated: bool = False,
    sync: bool = False,
    hooks: bool = False,
    max_parallel: int | None = None,
) -> Callable[[int], Batch]:
    def prepare(n: int) -> Batch:
        if validated:
            definition = validated_sync_tool() if sync else validated_tool()
        else:
            definition = raw_tool()
        runtime = runtime_with(definition, hooks=hooks)
        calls = model_calls(n)
        limit = n if max_parallel is None else max_parallel

        async def run() -> object:
            return await run_tool_calls(runtime, calls, max_parallel=limit)

        return Batch(run, check_outcome(n))

    return prepare


def _prepare_execute(n: int) -> Batch:
    runtime = runtime_with(raw_tool())
    calls = tool_calls(n)
    execute = runtime.execute

    async def run() -> object:
        return [await execute(call) for call in calls]

    return Batch(run, check_results(n))


def _prepare_body_in_scope(n: int) -> Batch:
    arguments = {"a": 1, "b": "x"}

    async def run() -> object:
        out = []
        for _ in range(n):
            with trio.CancelScope():
                out.append(await noop_body(arguments, None))
        return len(out)

    return Batch(run, _expect(n))


#: Keys of the systems that need nothing beyond the core install.
CORE_KEYS: Final = ("F0", "F1", "asyncio", "a", "a10", "b", "c", "cs", "d", "D0")


def core_systems() -> list[System]:
    """The floors, asyncio and the dsh-trio configurations."""
    return [
        System("F0", "trio nursery, one no-op task per call", "trio", _nursery_floor(_noop_task)),
        System(
            "F1",
            "trio nursery, one task + one CancelScope per call",
            "trio",
            _nursery_floor(_scoped_noop_task),
        ),
        System(
            "asyncio", "asyncio.TaskGroup, one no-op task per call", "asyncio", _prepare_asyncio
        ),
        System("a", "run_tool_calls, raw ToolDefinition, no hooks", "trio", _scheduled()),
        System(
            "a10",
            "(a) with the default max_parallel=10",
            "trio",
            _scheduled(max_parallel=10),
        ),
        System("b", "(a) + pre hook, wrapper, post hook, observer", "trio", _scheduled(hooks=True)),
        System(
            "c",
            "run_tool_calls, @tool with argument validation",
            "trio",
            _scheduled(validated=True),
        ),
        System(
            "cs",
            "(c) with a plain def body (blocking=False, run inline)",
            "trio",
            _scheduled(validated=True, sync=True),
        ),
        System("d", "runtime.execute in a loop (no scheduler)", "trio", _prepare_execute),
        System(
            "D0", "no-op body awaited in one CancelScope, in a loop", "trio", _prepare_body_in_scope
        ),
    ]


def all_systems(*, peers: bool) -> list[System]:
    """The core systems plus, if ``peers`` and the extra is installed, the peer frameworks."""
    systems = core_systems()
    if peers:
        from . import peers as peer_module

        systems.extend(peer_module.available_systems())
    return systems


# -- measuring ----------------------------------------------------------------------------


@attrs.define
class Measurements:
    """Seconds per call for each system, size and repeat (repeat order is preserved)."""

    heap: HeapMode
    ns: list[int]
    labels: dict[str, str]
    samples: dict[str, dict[int, list[float]]] = attrs.Factory(dict)
    clock: Clock = "wall"

    def add(self, key: str, n: int, seconds_per_call: float) -> None:
        self.samples.setdefault(key, {}).setdefault(n, []).append(seconds_per_call)

    def stats(self, key: str, n: int) -> Stats | None:
        values = self.samples.get(key, {}).get(n)
        return Stats.of(values) if values else None

    def ratio(self, key: str, base: str, n: int) -> Stats | None:
        """The per-repeat ratios ``key / base`` at ``n``, summarized."""
        mine = self.samples.get(key, {}).get(n)
        theirs = self.samples.get(base, {}).get(n)
        if not mine or not theirs:
            return None
        return Stats.of([a / b for a, b in zip(mine, theirs, strict=False)])

    def to_json(self) -> dict[str, object]:
        return {
            "heap": self.heap,
            "clock": self.clock,
            "ns": self.ns,
            "labels": self.labels,
            "samples": {
                k: {str(n): v for n, v in by_n.items()} for k, by_n in self.samples.items()
            },
        }

    def merge_json(self, data: dict[str, object]) -> None:
        labels = data["labels"]
        samples = data["samples"]
        if not isinstance(labels, dict) or not isinstance(samples, dict):
            raise TypeError("not a Measurements JSON document")
        self.labels.update(labels)
        for key, by_n in samples.items():
            for n, values in by_n.items():
                for value in values:
                    self.add(key, int(n), float(value))


def _repeats_for(n: int, repeats: int, repeats_large: int) -> int:
    return repeats_large if n >= 10_000 else repeats


def measure(
    systems: Sequence[System],
    ns: Sequence[int],
    *,
    repeats: int,
    repeats_large: int,
    target_calls: int,
    heap: HeapMode,
    progress: Progress,
    clock: Clock = "wall",
) -> Measurements:
    """Measure every system at every ``n``, repeats interleaved and rotated."""
    result = Measurements(
        heap=heap, ns=list(ns), labels={s.key: s.label for s in systems}, clock=clock
    )
    for n in ns:
        inner = inner_count(n, target_calls)
        batches = {s.key: s.prepare(n) for s in systems}
        for system in systems:  # warm-up, untimed (also validates every system once)
            time_batches(system.loop, batches[system.key], 1)
        count = _repeats_for(n, repeats, repeats_large)
        for r in range(count):
            k = r % len(systems)
            for system in [*systems[k:], *systems[:k]]:
                settle_heap(heap)
                elapsed = time_batches(system.loop, batches[system.key], inner, clock)
                result.add(system.key, n, elapsed / (inner * n))
        progress(f"overhead: n={n} done ({count} repeats x {inner} batches)")
        del batches
    return result


def measure_alone(
    keys: Sequence[str],
    ns: Sequence[int],
    *,
    repeats: int,
    repeats_large: int,
    target_calls: int,
    progress: Progress,
    clock: Clock = "wall",
) -> Measurements:
    """Measure each system in its own child process (heap condition ``alone``)."""
    result = Measurements(heap="alone", ns=list(ns), labels={}, clock=clock)
    with tempfile.TemporaryDirectory() as tmp:
        for key in keys:
            out = Path(tmp) / f"{key}.json"
            run_child(
                "benches",
                "overhead",
                "--heap",
                "alone",
                "--system",
                key,
                "--n",
                ",".join(map(str, ns)),
                "--repeats",
                str(repeats),
                "--repeats-large",
                str(repeats_large),
                "--target-calls",
                str(target_calls),
                "--clock",
                clock,
                "--json",
                str(out),
                "--quiet",
            )
            result.merge_json(json.loads(out.read_text(encoding="utf-8")))
            progress(f"overhead (alone): {key} done")
    return result


# -- reporting ----------------------------------------------------------------------------


def _base_of(key: str) -> str:
    return "D0" if key == "d" else "F1"


def _cell(stats: Stats | None, fmt: Callable[[float], str]) -> str:
    if stats is None:
        return "–"
    if stats.count == 1:
        return fmt(stats.median)
    return f"{fmt(stats.median)} ({fmt(stats.low)}–{fmt(stats.high)})"


#: (system, n, bound, base): the issue's per-call targets.
_TARGETS: Final = (
    ("a", 1000, 2.0, "F1"),
    ("c", 1000, 2.5, "F1"),
    ("b", 1000, 3.5, "F1"),
    ("d", 1000, 3.0, "D0"),
    ("c", 1000, 2.5, "F0"),  # issue 19
)
#: (peer, sizes): (c) ≥ 10× faster per call; issue 19 adds N=1 and 10 for pydantic-ai, and
#: the synchronous (cs) beside (c).
_PEER_TARGETS: Final = (("langgraph", (100, 1000)), ("pydantic-ai", (1, 10, 100, 1000)))


def report(m: Measurements) -> str:
    """The per-call tables, the ratio tables and the target check, as Markdown."""
    keys = [k for k in m.labels if k in m.samples]
    headers = ["system", *(f"N={n}" for n in m.ns)]
    lines = [
        f"Heap condition: **{m.heap}** — {HEAP_CONDITIONS[m.heap]}.",
        "",
        f"Per call, µs of {'CPU' if m.clock == 'cpu' else 'wall'} time: median (min–max)"
        " over repeats.",
        "",
        markdown_table(
            headers,
            [[f"`{k}` {m.labels[k]}", *(_cell(m.stats(k, n), fmt_us) for n in m.ns)] for k in keys],
        ),
        "",
        "Ratio to the floor (`F1`; `d` to `D0`): median (min–max) of the per-repeat ratios.",
        "",
        markdown_table(
            headers,
            [
                [
                    f"`{k}` ÷ `{_base_of(k)}`",
                    *(_cell(m.ratio(k, _base_of(k), n), fmt_ratio) for n in m.ns),
                ]
                for k in keys
                if k not in ("F1", "D0")
            ],
        ),
        "",
        "Targets:",
        "",
        markdown_table(["target", "measured", "status"], _target_rows(m)),
    ]
    return "\n".join(lines)


def _status(ok: bool) -> str:
    return "met" if ok else "**NOT MET**"


def _target_rows(m: Measurements) -> list[list[str]]:
    rows: list[list[str]] = []
    for key, n, bound, base in _TARGETS:
        ratio = m.ratio(key, base, n)
        label = f"({key}) ≤ {bound}× {base} per call at N={n}"
        if ratio is None:
            rows.append([label, "not measured", "–"])
        else:
            rows.append([label, fmt_ratio(ratio.median), _status(ratio.median <= bound)])
    at_1000 = m.stats("c", 1000)
    large = max((n for n in m.ns if n >= 100_000), default=None)
    top = None if large is None else m.stats("c", large)
    if at_1000 is not None and top is not None:
        growth = top.median / at_1000.median
        rows.append(
            [
                f"(c) per call at N={large} ≤ 1.1× its cost at N=1000",
                fmt_ratio(growth),
                _status(growth <= 1.1),
            ]
        )
    for peer, sizes in _PEER_TARGETS:
        for key in ("c", "cs"):
            for n in sizes:
                if key == "cs" and peer != "pydantic-ai":
                    continue
                label = f"({key}) ≥ 10× faster per call than `{peer}` at N={n}"
                ratio = m.ratio(peer, key, n)
                if ratio is None:
                    rows.append([label, "not measured", "–"])
                else:
                    rows.append(
                        [label, f"{fmt_ratio(ratio.median)} faster", _status(ratio.median >= 10)]
                    )
    return rows

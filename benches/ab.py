"""``python -m benches.ab``: the overhead systems of two checkouts, interleaved in one process.

An A/B of a change to the hot path must see a few per cent through the noise of a shared
machine. Two runs of ``python -m benches overhead`` from two worktrees see the load move
between them (the floor ``F1``, identical code on both sides, moves by ±6 % from run to
run on a busy 2-core machine). Here both checkouts are imported into one process, each
under its own snapshot of ``sys.modules`` (``dsh_tools``, ``dsh_sched`` and ``benches``),
and their samples alternate one by one (the order flips every repeat), so that both sides
see the same load. A sample is the per-call **CPU time of the thread**
(``time.thread_time_ns``) over a batch loop of at least ``--target-calls`` calls, so that
time spent descheduled does not count. Ratios are taken per repeat against the same side's
floor (``F1``; ``D0`` for ``d``); the report gives their medians (min–max) and the change.

Example::

    git worktree add /tmp/before <commit>
    python -m benches.ab --before /tmp/before --after . --n 100,1000 --repeats 40
"""

from __future__ import annotations

import argparse
import gc
import importlib
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from collections.abc import Sequence
    from types import ModuleType

__all__ = ["PAIRS", "main", "measure_ab"]

#: The ratios of the overhead targets: each system against its floor.
PAIRS: dict[str, str] = {"a": "F1", "b": "F1", "c": "F1", "d": "D0"}
_PACKAGES = ("dsh_tools", "dsh_sched", "benches")


def _ours(name: str) -> bool:
    return name.split(".")[0] in _PACKAGES


def _install(snapshot: dict[str, ModuleType]) -> None:
    for name in [name for name in sys.modules if _ours(name)]:
        del sys.modules[name]
    sys.modules.update(snapshot)


def _load(root: Path, n: int) -> tuple[dict[str, ModuleType], dict[str, Any]]:
    """Import ``root``'s packages afresh; return their modules and the prepared batches."""
    _install({})
    sys.path[:0] = [str(root / "src"), str(root)]
    try:
        overhead = importlib.import_module("benches.overhead")
        importlib.import_module("dsh_tools.lowlevel")
        importlib.import_module("dsh_sched")
        loaded = Path(importlib.import_module("dsh_tools").__file__ or "")
        if root.resolve() not in loaded.resolve().parents:
            raise RuntimeError(f"{root} did not provide dsh_tools (got {loaded})")
        batches = {s.key: s.prepare(n) for s in overhead.core_systems() if s.key in _KEYS}
    finally:
        del sys.path[:2]
    return {name: m for name, m in sys.modules.items() if _ours(name)}, batches


_KEYS = ("F1", "a", "b", "c", "d", "D0")


def _sample(batch: Any, inner: int, n: int) -> float:
    run = batch.run

    async def timed() -> tuple[int, object]:
        last: object = None
        start = time.thread_time_ns()
        for _ in range(inner):
            last = await run()
        return time.thread_time_ns() - start, last

    elapsed, last = trio.run(timed)
    batch.check(last)
    return elapsed / 1e9 / (inner * n)


def measure_ab(
    before: Path, after: Path, n: int, *, repeats: int, target_calls: int = 2000
) -> dict[str, dict[str, list[float]]]:
    """Per-call CPU seconds of every system of both checkouts at ``n``, interleaved.

    The caller's own modules are back in ``sys.modules`` on return.
    """
    original = {name: m for name, m in sys.modules.items() if _ours(name)}
    try:
        return _measure(before, after, n, repeats=repeats, target_calls=target_calls)
    finally:
        _install(original)


def _measure(
    before: Path, after: Path, n: int, *, repeats: int, target_calls: int
) -> dict[str, dict[str, list[float]]]:
    sides = {"before": _load(before, n), "after": _load(after, n)}
    inner = max(1, -(-target_calls // n))
    samples: dict[str, dict[str, list[float]]] = {s: {k: [] for k in _KEYS} for s in sides}
    for snapshot, batches in sides.values():  # warm-up, untimed
        _install(snapshot)
        for key in _KEYS:
            _sample(batches[key], 1, n)
    for r in range(repeats):
        for side in ("before", "after") if r % 2 == 0 else ("after", "before"):
            snapshot, batches = sides[side]
            _install(snapshot)
            for key in _KEYS:
                gc.collect()
                gc.freeze()
                samples[side][key].append(_sample(batches[key], inner, n))
                gc.unfreeze()
    return samples


def report(n: int, samples: dict[str, dict[str, list[float]]]) -> str:
    """A markdown table: per-call µs of each side, the ratios and their change."""
    lines = [
        f"N={n}, {len(samples['before']['F1'])} repeats",
        "",
        "| ratio | before | after | change |",
        "| :--- | ---: | ---: | ---: |",
    ]
    for key, floor in PAIRS.items():
        cells = []
        medians = []
        for side in ("before", "after"):
            ratios = [x / y for x, y in zip(samples[side][key], samples[side][floor], strict=True)]
            medians.append(statistics.median(ratios))
            cells.append(f"{medians[-1]:.2f}× ({min(ratios):.2f}×–{max(ratios):.2f}×)")
        change = 100 * (medians[1] / medians[0] - 1)
        lines.append(f"| `{key}` ÷ `{floor}` | {cells[0]} | {cells[1]} | {change:+.1f} % |")
    lines.append("")
    lines.append("| per call, CPU µs (median) | " + " | ".join(f"`{k}`" for k in _KEYS) + " |")
    lines.append("| :--- |" + " ---: |" * len(_KEYS))
    for side in ("before", "after"):
        cells = [f"{statistics.median(samples[side][k]) * 1e6:.2f}" for k in _KEYS]
        lines.append(f"| {side} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (``python -m benches.ab``)."""
    parser = argparse.ArgumentParser(prog="python -m benches.ab", description=__doc__)
    parser.add_argument("--before", type=Path, required=True, help="the old checkout")
    parser.add_argument("--after", type=Path, required=True, help="the new checkout")
    parser.add_argument("--n", default="100,1000", help="comma-separated batch sizes")
    parser.add_argument("--repeats", type=int, default=40, help="samples per system and side")
    parser.add_argument("--target-calls", type=int, default=2000, help="calls per sample")
    args = parser.parse_args(argv)
    for n in (int(part) for part in args.n.split(",")):
        samples = measure_ab(
            args.before, args.after, n, repeats=args.repeats, target_calls=args.target_calls
        )
        print(report(n, samples), end="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

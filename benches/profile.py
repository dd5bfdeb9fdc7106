"""``python -m benches.profile``: profile one per-call system's hot path.

Runs batches of ``--n`` calls of one ``benches.overhead`` system inside one event loop
under cProfile (default) or pyinstrument (if installed), after a warm-up batch, and prints
the top functions. Only the loop of batches is profiled, not the event loop's start-up.

Examples::

    python -m benches.profile d --n 1000 --calls 50000
    python -m benches.profile a --n 1000 --profiler pyinstrument
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
from typing import TYPE_CHECKING

from ._harness import run_in_loop, settle_heap
from .overhead import all_systems

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main", "profile_system"]


def profile_system(
    key: str, *, n: int, calls: int, profiler: str = "cprofile", top: int = 30
) -> str:
    """Profile ``calls`` calls of system ``key`` in batches of ``n``; return the report.

    Raises:
        KeyError: no system has that key.
        ModuleNotFoundError: ``profiler="pyinstrument"`` and it is not installed.
    """
    systems = {s.key: s for s in all_systems(peers=True)}
    system = systems[key]
    batch = system.prepare(n)
    run = batch.run
    inner = max(1, calls // n)
    run_in_loop(system.loop, run)  # warm-up

    if profiler == "pyinstrument":
        from pyinstrument import Profiler  # type: ignore[import-not-found, unused-ignore]

        sampler = Profiler(interval=0.0001, async_mode="disabled")

        async def sampled() -> object:
            last: object = None
            sampler.start()
            for _ in range(inner):
                last = await run()
            sampler.stop()
            return last

        settle_heap("freeze")
        batch.check(run_in_loop(system.loop, sampled))
        text: str = sampler.output_text(unicode=True, color=False, show_all=False)
        return text

    profile = cProfile.Profile()

    async def profiled() -> object:
        last: object = None
        profile.enable()
        for _ in range(inner):
            last = await run()
        profile.disable()
        return last

    settle_heap("freeze")
    batch.check(run_in_loop(system.loop, profiled))
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.strip_dirs()
    out.write(f"# {key}: {inner} batches of {n} calls ({inner * n} calls)\n\n")
    out.write("## by own time (tottime)\n")
    stats.sort_stats("tottime").print_stats(top)
    out.write("## by cumulative time\n")
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(prog="python -m benches.profile", description=__doc__)
    parser.add_argument("system", help="a system key of benches.overhead (a, b, c, d, F1, ...)")
    parser.add_argument("--n", type=int, default=1000, help="calls per batch")
    parser.add_argument("--calls", type=int, default=50_000, help="calls in total")
    parser.add_argument("--profiler", choices=["cprofile", "pyinstrument"], default="cprofile")
    parser.add_argument("--top", type=int, default=30, help="functions listed per table")
    args = parser.parse_args(argv)
    print(
        profile_system(
            args.system, n=args.n, calls=args.calls, profiler=args.profiler, top=args.top
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

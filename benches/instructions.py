"""A fixed workload for instruction counts (``valgrind --tool=callgrind``).

Wall-clock benchmarks on a shared machine swing by tens of percent; instruction counts do
not (the same binary, inputs and environment give the same total). Run the workload at two
sizes and divide the difference by the extra calls, so that start-up and imports cancel::

    for n in 500 1500; do
        PYTHONPATH=src PYTHONHASHSEED=0 valgrind --tool=callgrind \\
            --callgrind-out-file=/dev/null .venv/bin/python -m benches.instructions $n a
    done
    # instructions per call = (I(1500) - I(500)) / 1000

``MODE`` picks the systems: ``a`` a batch of raw tool calls (``run_tool_calls``), ``c`` a batch
of ``@tool`` calls with validated arguments, ``d`` ``runtime.execute`` in a loop; ``acd``
(the default) runs all three, so the difference is the cost of one call of each. ``r`` runs
the realistic scenario's calls (``benches.realistic``: ~2 KB arguments into typed
parameters) in batches of 20, with a body that does not sleep; ``R`` the same with a
``JsonlSessionLog`` sink (a temporary file); ``f`` is their floor: the same batches as raw
trio tasks that each ``json.loads`` their text. ``s`` and ``S`` are the realistic scenario
itself, sleeps included (``benches.realistic``'s own dsh-trio system and raw trio floor, in
batches of 20): the stable stand-in for its CPU-time target, whose samples move by ±30 %
on a 2-core machine (a sleeping process's wake-ups cost what the host makes them cost);
their counts depend a little on timing (about 1 % from run to run). All of these build
their argument texts as they go: ``g`` builds only the texts, to be subtracted. ``F`` is
the per-call floor ``F0`` of ``benches.overhead``: one no-op trio task per call in one
nursery. ``w`` is a batch of
raw calls whose body waits once (a checkpoint), so each gets a task of its own (the
makespan scenario's path), and ``W`` its floor: one trio task per call that waits once.
None of these is in the default.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import trio
import trio.lowlevel

from dsh_sched import JsonlSessionLog, ModelToolCall, run_tool_calls
from dsh_tools import Output, TextContent, ToolCall, ToolDefinition, ToolRuntime, tool

from . import realistic
from ._dsh import raw_tool


async def _body(args: object, ctx: object) -> object:
    return "ok"


_RAW = ToolDefinition(
    name="raw",
    description="raw",
    parameters={},
    output=Output(schema={}, render=lambda args, value: [TextContent("ok")]),
    execute=_body,
    is_concurrency_safe=True,
)


@tool(is_concurrency_safe=True)
async def add(a: int, b: str) -> str:
    """The overhead scenario's ``c`` tool (``benches._dsh.validated_tool``), by another name."""
    return "ok"


@tool(name="search", is_concurrency_safe=True)
async def _search(
    query: str,
    filters: list[realistic.Filter],
    options: realistic.Options,
    tags: list[str],
    note: str,
    sleep_ms: int,
) -> str:
    """The realistic tool without its sleep."""
    return f"{len(filters)} filters, limit {options.limit}"


async def _floor(n: int) -> None:
    async def one(text: str) -> None:
        json.loads(text)

    for start in range(0, n, 20):
        async with trio.open_nursery() as nursery:
            for i in range(start, min(n, start + 20)):
                nursery.start_soon(one, realistic.arguments(i))


async def _yield_body(args: object, ctx: object) -> object:
    await trio.lowlevel.checkpoint()
    return "ok"


_WAITS = raw_tool("waits", _yield_body)


async def _yielding_tasks(n: int) -> None:
    async def one() -> None:
        await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        for _ in range(n):
            nursery.start_soon(one)


async def _bare_tasks(n: int) -> None:
    async def noop() -> None:
        pass

    async with trio.open_nursery() as nursery:
        for _ in range(n):
            nursery.start_soon(noop)


async def _realistic(runtime: ToolRuntime, n: int, log: Path | None) -> None:
    if runtime.get("search") is None:
        runtime.register(_search)
    sink = None if log is None else JsonlSessionLog(log)
    try:
        for start in range(0, n, 20):
            calls = [
                ModelToolCall(call_id=f"r{i}", name="search", arguments=realistic.arguments(i))
                for i in range(start, min(n, start + 20))
            ]
            outcome = await run_tool_calls(runtime, calls, max_parallel=20, sink=sink)
            assert not any(c.result.is_error for c in outcome.results)
    finally:
        if sink is not None:
            sink.close()


def _batches(n: int) -> list[tuple[str, ...]]:
    texts = [realistic.arguments(i) for i in range(n)]
    return [tuple(texts[start : start + 20]) for start in range(0, n, 20)]


async def workload(n: int, mode: str) -> None:
    """Ten warm-up calls, then ``n`` calls of each system named in ``mode``."""
    runtime = ToolRuntime()
    runtime.register(_RAW)
    runtime.register(add)
    runtime.register(_WAITS)
    warm = [ModelToolCall(call_id=f"w{i}", name="raw", arguments="{}") for i in range(10)]
    await run_tool_calls(runtime, warm)
    warm = [ModelToolCall(call_id=f"w{i}", name="waits", arguments="{}") for i in range(2)]
    await run_tool_calls(runtime, warm)  # now known to wait: a task per call
    if "a" in mode:
        calls = [ModelToolCall(call_id=f"a{i}", name="raw", arguments="{}") for i in range(n)]
        await run_tool_calls(runtime, calls, max_parallel=n)
    if "c" in mode:
        args = '{"a": 1, "b": "x"}'
        calls = [ModelToolCall(call_id=f"c{i}", name="add", arguments=args) for i in range(n)]
        await run_tool_calls(runtime, calls, max_parallel=n)
    if "d" in mode:
        for i in range(n):
            await runtime.execute(ToolCall(call_id=f"d{i}", name="raw", arguments={}))
    if "F" in mode:
        await _bare_tasks(n)
    if "w" in mode:
        calls = [ModelToolCall(call_id=f"w{i}", name="waits", arguments="{}") for i in range(n)]
        await run_tool_calls(runtime, calls, max_parallel=n)
    if "W" in mode:
        await _yielding_tasks(n)
    if "g" in mode:
        for i in range(n):
            realistic.arguments(i)
    if "f" in mode:
        await _floor(n)
    if "r" in mode:
        await _realistic(runtime, n, None)
    if "R" in mode:
        with tempfile.TemporaryDirectory() as folder:
            await _realistic(runtime, n, Path(folder) / "log.jsonl")
    if "s" in mode:
        await realistic.dsh_system(realistic.model_calls(_batches(n)), None)
    if "S" in mode:
        await realistic.trio_floor(_batches(n))


def main(argv: list[str]) -> None:
    n = int(argv[0]) if argv else 1000
    mode = argv[1] if len(argv) > 1 else "acd"
    trio.run(workload, n, mode)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Ctrl-C at every line: deliver SIGINT through trio's real handler at each line event of the
library while a batch (or an ``execute()``) runs, and check what the user is promised.

Run as a script (``python -m tests.ki_sweep [--stride N] [--scenario NAME]``), it prints one
JSON object: the landing points tried, the problems found and the seconds taken.
``tests/test_ki_sweep.py`` runs it in a child process, because the sweep replaces the
interpreter's trace function (which a coverage tracer in the test process also uses) and
because a corrupted run must not take the test process down with it.

At line event ``k`` of the library's own frames (``dsh_tools`` and ``dsh_sched``), the
trace function raises SIGINT with ``signal.raise_signal``; trio's handler then either raises
``KeyboardInterrupt`` right there (an unprotected frame) or delivers it to the main task (a
``enable_ki_protection`` frame). Every run must end with ``KeyboardInterrupt`` raised bare out
of ``trio.run`` (never swallowed, never wrapped in a group, never a ``TrioInternalError``),
and every call that got ``on_call`` must get exactly one ``on_result``, with no
``on_result`` without its ``on_call``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio
import trio.testing

import dsh_sched
import dsh_tools
from dsh_sched import CallCommitted, CallStarted, ModelToolCall, RecordingSink, open_batch
from dsh_tools import (
    CallNext,
    Output,
    PostDecision,
    PreDecision,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolExecution,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from types import FrameType

ROOTS = tuple(str(Path(str(p.__file__)).resolve().parent) for p in (dsh_tools, dsh_sched))


def _output() -> Output:
    return Output(schema={}, render=lambda args, value: [TextContent(str(value))])


def _tool(name: str, *, parallel: bool, sleep: float) -> ToolDefinition:
    async def body(args: object, ctx: ToolRunContext) -> object:
        await trio.sleep(sleep)
        return ctx.call_id

    return ToolDefinition(
        name=name,
        description=name,
        parameters={"type": "object"},
        output=_output(),
        execute=body,
        is_concurrency_safe=parallel,
        finalize_content=lambda execution, result: None,
    )


class _Seen:
    """What the user's side saw: sink events per call and observer notifications."""

    def __init__(self) -> None:
        self.sink = RecordingSink()
        self.observed: Counter[str] = Counter()


def _runtime(seen: _Seen, *, hooks: bool) -> ToolRuntime:
    runtime = ToolRuntime()
    runtime.register(_tool("r", parallel=True, sleep=0.01))
    runtime.register(_tool("w", parallel=False, sleep=0.02))
    runtime.on_result(lambda execution, result: seen.observed.update([execution.call_id]))
    if hooks:

        async def pre(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
            await trio.lowlevel.checkpoint()
            return await call_next()

        async def wrap(execution: ToolExecution, call_next: CallNext[ToolResult]) -> ToolResult:
            return await call_next()

        async def post(
            execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
        ) -> PostDecision:
            await trio.lowlevel.checkpoint()
            return await call_next()

        runtime.on_pre_execute(pre)
        runtime.wrap_execute(wrap)
        runtime.on_post_execute(post)
        runtime.guard(lambda execution: None)
    return runtime


_CALLS = tuple(
    ModelToolCall(call_id=f"c{i}", name=name, arguments='{"n": 1}')
    for i, name in enumerate(["r", "r", "w", "r", "r"])
)


def _batch(*, hooks: bool, iterate: bool, timeout: float | None) -> Callable[[_Seen], Any]:
    async def main(seen: _Seen) -> None:
        runtime = _runtime(seen, hooks=hooks)
        batch = open_batch(runtime, _CALLS, max_parallel=2, sink=seen.sink, timeout=timeout)
        async with batch:
            if iterate:
                async for _ in batch:
                    pass

    return main


def _aborted_batch() -> Callable[[_Seen], Awaitable[None]]:
    async def main(seen: _Seen) -> None:
        runtime = _runtime(seen, hooks=True)

        async def stop_at_c3(
            execution: ToolExecution, call_next: CallNext[PreDecision]
        ) -> PreDecision:
            if execution.call_id == "c3":
                execution.abort.abort("user pressed stop")
            return await call_next()

        runtime.on_pre_execute(stop_at_c3)
        async with open_batch(runtime, _CALLS, max_parallel=2, sink=seen.sink):
            pass

    return main


def _execute(*, hooks: bool) -> Callable[[_Seen], Awaitable[None]]:
    async def main(seen: _Seen) -> None:
        runtime = _runtime(seen, hooks=hooks)
        for name in ("r", "w"):
            await runtime.execute(ToolCall(call_id=f"x-{name}", name=name, arguments={}))

    return main


SCENARIOS: dict[str, Callable[[_Seen], Awaitable[None]]] = {
    "batch": _batch(hooks=False, iterate=False, timeout=None),
    "batch-hooks-iterated": _batch(hooks=True, iterate=True, timeout=None),
    "batch-timeout": _batch(hooks=True, iterate=False, timeout=0.015),
    "batch-aborted": _aborted_batch(),
    "execute": _execute(hooks=False),
    "execute-hooks": _execute(hooks=True),
}


def run_point(scenario: str, k: int) -> tuple[bool, list[str]]:
    """Run ``scenario`` with SIGINT at the library's ``k``-th line event (1-based).

    Returns whether the signal was raised (``k`` within the run) and the problems found.
    """
    count = 0
    fired = False
    where = ""

    def local(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal count, fired, where
        if event == "line" and not fired:
            count += 1
            if count == k:
                fired = True
                where = f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}"
                signal.raise_signal(signal.SIGINT)
        return local

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        if frame.f_code.co_filename.startswith(ROOTS):
            return local
        return None

    seen = _Seen()
    # trio runs the tasks that are ready together in an order from its own generator; seed
    # it so that each landing point is the same run every time (test-only, private name).
    trio._core._run._r.seed(k)
    raised: BaseException | None = None
    # Put back whatever traced before (coverage's tracer, when the suite is measured):
    # clearing it would stop the measurement of every test that runs after this one.
    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        trio.run(SCENARIOS[scenario], seen, clock=trio.testing.MockClock(autojump_threshold=0))
    except BaseException as exc:
        raised = exc
    finally:
        sys.settrace(previous)
    problems = [f"{scenario} k={k} at {where}: {p}" for p in _check(seen, raised, fired)]
    return fired, problems


def _check(seen: _Seen, raised: BaseException | None, fired: bool) -> list[str]:
    problems: list[str] = []
    if fired:
        if type(raised) is not KeyboardInterrupt:
            problems.append(f"trio.run raised {raised!r}, not a bare KeyboardInterrupt")
    elif raised is not None:
        problems.append(f"trio.run raised {raised!r} with no signal")
    calls: Counter[int] = Counter()
    results: Counter[int] = Counter()
    for event in seen.sink.events:
        if isinstance(event, CallStarted):
            if results[event.index]:
                problems.append(f"call {event.index}: on_call after its on_result")
            calls[event.index] += 1
        elif isinstance(event, CallCommitted):
            if not calls[event.index]:
                problems.append(f"call {event.index}: on_result without on_call")
            results[event.index] += 1
    for index in sorted(set(calls) | set(results)):
        if calls[index] > 1 or results[index] > 1 or calls[index] != results[index]:
            problems.append(f"call {index}: {calls[index]} on_call, {results[index]} on_result")
    for call_id, times in seen.observed.items():
        if times > 1:
            problems.append(f"{call_id}: observers told {times} times")
    return problems


def sweep(scenario: str, *, stride: int = 1, offset: int = 0) -> dict[str, Any]:
    """Every ``stride``-th landing point of ``scenario`` (starting at ``1 + offset``) until
    the signal no longer lands within the run."""
    start = time.perf_counter()
    points = 0
    problems: list[str] = []
    k = 1 + offset
    while True:
        fired, found = run_point(scenario, k)
        if not fired:
            break
        points += 1
        problems.extend(found)
        k += stride
    return {
        "scenario": scenario,
        "points": points,
        "last": k - stride,
        "problems": problems,
        "seconds": round(time.perf_counter() - start, 2),
    }


def main(argv: list[str] | None = None) -> int:
    # Started with SIGINT ignored (a background job), Python keeps it ignored: the sweep needs
    # the default handler, which trio replaces with its own while it runs.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stride", type=int, default=1, help="try every N-th landing point")
    parser.add_argument("--offset", type=int, default=0, help="start at point 1 + OFFSET")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    options = parser.parse_args(argv)
    reports = [
        sweep(name, stride=options.stride, offset=options.offset)
        for name in options.scenario or list(SCENARIOS)
    ]
    json.dump(reports, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

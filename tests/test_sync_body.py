"""Synchronous tools (issue 19): a plain ``def`` given to ``@tool`` or ``define_tool``.

Non-blocking (``blocking=False``) bodies run inline in the trio thread; the others in a
worker thread that the call always waits for. Threads make real concurrency here, so the
tests hold the thread on a ``threading.Event`` and let trio's ``wait_all_tasks_blocked``
(or the autojump clock) tell when everything else is parked: no real sleeps.
"""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

from dsh_sched import ModelToolCall, run_tool_calls
from dsh_tools import (
    Abort,
    ErrorCode,
    ErrorInfo,
    FrozenDict,
    Output,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    define_tool,
    tool,
)
from dsh_tools._sync_body import async_body
from dsh_tools.policies import install_timeout_policy
from tests.helpers import error_text

if TYPE_CHECKING:
    from collections.abc import Generator

_OUTPUT = Output(schema={"type": "string"}, render=lambda args, value: [TextContent(value)])
_PARAMETERS = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}


async def execute(
    defn: ToolDefinition, arguments: object, *, abort: Abort | None = None, timeout: bool = False
) -> ToolResult:
    runtime = ToolRuntime()
    runtime.register(defn)
    if timeout:
        install_timeout_policy(runtime)
    call = ToolCall(call_id="c1", name=defn.name, arguments=arguments, abort=abort or Abort())
    return await runtime.execute(call)


def text(result: ToolResult) -> str:
    assert not result.is_error, result
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def test_h031_a_plain_def_runs_in_a_worker_thread() -> None:
    """H-031: ``@tool`` accepts a plain ``def``; by default it runs in a worker thread, with
    its arguments validated and structured as for an ``async def``."""
    trio_thread = threading.get_ident()
    seen: list[int] = []

    @tool
    def count(words: list[str], ctx: ToolRunContext) -> str:
        """Count words."""
        seen.append(threading.get_ident())
        return f"{ctx.call_id}: {len(words)}"

    assert text(await execute(count, {"words": ["a", "b"]})) == "c1: 2"
    assert seen[0] != trio_thread
    invalid = await execute(count, {"words": [1]})
    assert error_text(invalid) == 'Error: invalid arguments: "words[0]" must be a string'
    assert seen == seen[:1]  # an invalid call never reaches the thread


async def test_h031_a_non_blocking_def_runs_inline() -> None:
    """H-031: ``blocking=False`` calls the ``def`` in the trio thread, without a thread."""
    seen: list[int] = []

    @tool(blocking=False)
    def double(x: int) -> int:
        """Double."""
        seen.append(threading.get_ident())
        return 2 * x

    assert text(await execute(double, {"x": 21})) == "42"
    assert seen == [threading.get_ident()]


@pytest.mark.parametrize("blocking", [None, True, False])
async def test_define_tool_accepts_a_plain_def(blocking: bool | None) -> None:
    seen: list[bool] = []

    def shout(arguments: FrozenDict, ctx: ToolRunContext) -> str:
        seen.append(threading.get_ident() == trio_thread)
        return "x" * int(arguments["x"])

    trio_thread = threading.get_ident()
    defn = define_tool(
        name="shout",
        description="Shout.",
        parameters=_PARAMETERS,
        output=_OUTPUT,
        execute=shout,
        blocking=blocking,
    )
    assert text(await execute(defn, {"x": 3})) == "xxx"
    assert seen == [blocking is False]
    assert error_text(await execute(defn, {"x": "3"})).startswith("Error: invalid arguments")


async def test_define_tool_keeps_other_callables_as_they_are() -> None:
    """An async callable object is not a plain ``def``: it is awaited as before."""

    class Body:
        async def __call__(self, arguments: FrozenDict, ctx: ToolRunContext) -> str:
            return "called"

    defn = define_tool(
        name="obj", description="Obj.", parameters=_PARAMETERS, output=_OUTPUT, execute=Body()
    )
    assert text(await execute(defn, {"x": 1})) == "called"


def test_blocking_is_refused_for_anything_but_a_plain_def() -> None:
    async def body(arguments: FrozenDict, ctx: ToolRunContext) -> str:
        return ""

    class Body:
        async def __call__(self, arguments: FrozenDict, ctx: ToolRunContext) -> str:
            return ""

    for execute_ in (body, Body()):
        with pytest.raises(TypeError, match=r"^define_tool\(t\): blocking= applies to a plain"):
            define_tool(
                name="t",
                description="T.",
                parameters=_PARAMETERS,
                output=_OUTPUT,
                execute=execute_,
                blocking=False,
            )

    async def f(x: int) -> int:
        """F."""
        return x

    with pytest.raises(TypeError, match=r"^@tool\(f\): blocking= applies to a plain def only$"):
        tool(blocking=True)(f)


class _Later:
    def __await__(self) -> Generator[Any, None, str]:
        yield from ()
        return "never"


@pytest.mark.parametrize("blocking", [True, False])
async def test_a_def_that_returns_an_awaitable_fails_the_call(blocking: bool) -> None:
    """A ``def`` that returns a coroutine (or any awaitable) was meant as ``async def``: the
    call fails with a ``TypeError`` that says so (the coroutine is closed, never awaited)."""

    async def later() -> str:
        return "never"

    @tool(blocking=blocking)
    def coroutine(x: int) -> str:
        """Coroutine."""
        return later()  # type: ignore[return-value]

    @tool(blocking=blocking)
    def awaitable(x: int) -> str:
        """Awaitable."""
        return _Later()  # type: ignore[return-value]

    ours = "the plain def returned an awaitable; declare it async def"
    # trio's worker thread refuses a coroutine itself, in its own words.
    theirs = "appears to be asynchronous"
    for defn, expected in ((coroutine, theirs if blocking else ours), (awaitable, ours)):
        result = await execute(defn, {"x": 1})
        assert result.error is not None
        assert expected in result.error.message


async def test_an_abort_waits_for_the_thread_and_its_late_success_is_aborted() -> None:
    """runtime.md §8.3: the body is never abandoned. The call waits for the thread after the
    ``Abort`` fired; the success it then returns came after the ``Abort``: ``ABORTED``."""
    release = threading.Event()
    finished: list[str] = []

    @tool
    def slow(x: int) -> str:
        """Slow."""
        release.wait()
        finished.append("done")
        return "late"

    abort = Abort()
    results: list[ToolResult] = []

    async def run() -> None:
        results.append(await execute(slow, {"x": 1}, abort=abort))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await trio.testing.wait_all_tasks_blocked()
        abort.abort("stop")
        await trio.testing.wait_all_tasks_blocked()
        assert results == []  # still waiting for the thread
        release.set()
    assert finished == ["done"]
    assert results[0].error is not None
    assert results[0].error.info == ErrorInfo("AbortError", ErrorCode.ABORTED)


async def test_a_thread_that_finished_before_the_abort_keeps_its_success() -> None:
    @tool
    def quick(x: int) -> str:
        """Quick."""
        return "kept"

    abort = Abort()
    result = await execute(quick, {"x": 1}, abort=abort)
    abort.abort("after")
    assert text(result) == "kept"


async def test_the_timeout_policy_waits_for_the_thread_then_reports_the_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The thread cannot be interrupted: the policy's deadline (1 s) passes while it runs;
    the call ends when the thread does (released at 5 s), as ``TOOL_TIMEOUT``."""
    release = threading.Event()

    @tool(timeout=1.0)
    def stuck(x: int) -> str:
        """Stuck."""
        release.wait()
        return "late"

    async def release_at_five() -> None:
        await trio.sleep(5)
        release.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(release_at_five)
        result = await execute(stuck, {"x": 1}, timeout=True)
        assert trio.current_time() >= 5
    assert result.error is not None
    assert result.error.info == ErrorInfo("ToolTimeoutError", ErrorCode.TOOL_TIMEOUT)


async def test_an_inline_body_within_its_timeout_succeeds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    @tool(timeout=1.0, blocking=False)
    def instant(x: int) -> str:
        """Instant."""
        return "ok"

    assert text(await execute(instant, {"x": 1}, timeout=True)) == "ok"


async def test_a_partial_or_a_bound_method_of_a_def_is_a_plain_def() -> None:
    class Greeter:
        def greet(self, arguments: FrozenDict, ctx: ToolRunContext, *, word: str) -> str:
            return f"{word} {arguments['x']}"

    body = functools.partial(Greeter().greet, word="hi")
    defn = define_tool(
        name="greet",
        description="Greet.",
        parameters=_PARAMETERS,
        output=_OUTPUT,
        execute=body,
        blocking=False,
    )
    assert text(await execute(defn, {"x": 1})) == "hi 1"


async def test_blocking_defs_of_a_batch_run_side_by_side() -> None:
    """Three parallel-safe blocking calls of one batch meet at a three-party barrier: each
    thread waits until all three run, which only side-by-side threads can do."""
    barrier = threading.Barrier(3, timeout=30)

    @tool(is_concurrency_safe=True)
    def meet(x: int) -> int:
        """Meet."""
        barrier.wait()
        return x

    runtime = ToolRuntime()
    runtime.register(meet)
    calls = [
        ModelToolCall(call_id=f"c{i}", name="meet", arguments=f'{{"x": {i}}}') for i in range(3)
    ]
    outcome = await run_tool_calls(runtime, calls, max_parallel=3)
    assert [c.result.value for c in outcome.results] == [0, 1, 2]


async def test_an_inline_def_may_return_any_value_that_is_not_awaitable() -> None:
    """A return value of a type outside the plain JSON ones goes through the awaitable check
    and comes back as it is."""

    def letters(word: str) -> frozenset[str]:
        return frozenset(word)

    body = async_body("letters", letters, False)
    assert body is not None
    assert await body("aab") == frozenset("ab")

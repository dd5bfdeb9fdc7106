"""TrustedCodeRuntime (code-mode §8.1): a real asyncio loop in a trio worker thread.

The program runs in another thread, so these tests use real (tiny) timings where the
program must wait, and never assert a duration beyond generous bounds.
"""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings

from dsh_tools import UNSET, CodeRunFailedError, JsonValue, _code_trusted, freeze_json
from dsh_tools import _code_program as program
from dsh_tools._code_values import is_valid_code_runtime
from dsh_tools.code import CodeRunLimits, TrustedCodeRuntime

from .code_corpus import CORPUS, CodeCase, CorpusTools, cases_citing, check_case, lines
from .strategies import maybe_json_values
from .test_code_checks import freeze_text, plain

LIMITS = CodeRunLimits()

Inject = Callable[..., None]


@pytest.fixture
def inject(monkeypatch: pytest.MonkeyPatch) -> Inject:
    """Add globals to the programs this test runs (objects of the test they can touch)."""
    extra: dict[str, object] = {}
    original = program.program_globals

    def program_globals(tools: object, error: type, **kwargs: Any) -> dict[str, Any]:
        return original(tools, error, **{**kwargs, **extra})

    monkeypatch.setattr(program, "program_globals", program_globals)
    return extra.update


async def run(
    code: str,
    *,
    tools: tuple[str, ...] = ("echo",),
    dispatch: Any = None,
    limits: CodeRunLimits = LIMITS,
) -> Any:
    if dispatch is None:
        dispatch = CorpusTools().dispatch
    return await TrustedCodeRuntime().run(code, tools=tools, dispatch=dispatch, limits=limits)


@pytest.mark.parametrize("case", cases_citing("L-077"), ids=lambda case: case.id)
async def test_l077_binding_call_forms(case: CodeCase) -> None:
    """L-077: keyword and dict forms, the TypeErrors, unbound names, ``in`` and ``dir``."""
    await check_case(TrustedCodeRuntime(), case)


@pytest.mark.parametrize("case", cases_citing("L-078"), ids=lambda case: case.id)
async def test_l078_result_and_logs(case: CodeCase) -> None:
    """L-078: no result, frozen results, log splitting, results that are not lossless JSON."""
    await check_case(TrustedCodeRuntime(), case)


@pytest.mark.parametrize("case", cases_citing("L-079"), ids=lambda case: case.id)
async def test_l079_failure_kinds(case: CodeCase) -> None:
    """L-079: syntax, exception, memory, output-limit and timeout kinds with their details."""
    await check_case(TrustedCodeRuntime(), case)


@pytest.mark.parametrize("case", cases_citing("L-035"), ids=lambda case: case.id)
async def test_l035_arguments_that_are_not_lossless_json(case: CodeCase) -> None:
    """L-035: a set, a datetime, a function, NaN: ToolCallError before any dispatch."""
    await check_case(TrustedCodeRuntime(), case)


@pytest.mark.parametrize("case", CORPUS, ids=lambda case: case.id)
async def test_l093_corpus_under_the_trusted_runtime(case: CodeCase) -> None:
    """L-093: the shared corpus's logs, results, kinds and details (the trusted half)."""
    tools = await check_case(TrustedCodeRuntime(), case)
    if case.id == "wait-for-times-out-a-slow-call":
        # The program stopped waiting; once it ended, its pending dispatch was cancelled.
        assert tools.cancelled == ["slow"]


async def test_l036_program_mutates_its_arguments_after_the_call() -> None:
    """L-036: the dispatched arguments are the snapshot taken at the call."""
    (case,) = cases_citing("L-036")
    await check_case(TrustedCodeRuntime(), case)


async def test_l092_a_real_asyncio_loop_runs_the_program() -> None:
    """L-092: the program runs on a running asyncio loop in another thread."""
    code = (
        "import asyncio, threading\n"
        "loop = asyncio.get_running_loop()\n"
        "event = asyncio.Event()\n"
        "loop.call_soon(event.set)\n"
        "await asyncio.wait_for(event.wait(), 5)\n"
        "async with asyncio.timeout(5):\n"
        "    await asyncio.sleep(0)\n"
        "return [type(loop).__module__.split('.')[0], threading.current_thread().name]"
    )
    outcome = await run(code)
    assert outcome.result[0] == "asyncio"
    assert outcome.result[1] != threading.current_thread().name


async def test_l092_print_to_another_file_is_not_captured(inject: Inject) -> None:
    """L-092: ``print(file=<other file>)`` writes there; sys.stdout/sys.stderr are captured."""
    sink = io.StringIO()
    inject(sink=sink)
    outcome = await run(
        lines(
            "import sys",
            "print('out', file=sys.stdout)",
            "print('other', 1, sep='+', file=sink, flush=True)",
            "print('err', file=sys.stderr)",
            "print('none', file=None)",
        )
    )
    assert outcome.logs == ("out", "err", "none")
    assert sink.getvalue() == "other+1\n"


async def test_l092_print_to_a_file_object_of_the_program() -> None:
    """L-092: output to a file the program opened itself is written there, not captured."""
    code = (
        "import io\nbuffer = io.StringIO()\nprint('kept', file=buffer)\nprint('shown')\n"
        "return buffer.getvalue()"
    )
    outcome = await run(code)
    assert outcome.logs == ("shown",)
    assert outcome.result == "kept\n"


async def test_l092_writing_to_sys_stdout_directly_is_not_captured(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """L-092 / §8.1: only ``print`` is captured; ``sys.stdout.write`` goes to the host."""
    outcome = await run("import sys\nsys.stdout.write('direct\\n')\nprint('printed')")
    assert outcome.logs == ("printed",)
    assert "direct" in capsys.readouterr().out


async def test_l092_wall_seconds() -> None:
    """L-092: ``wall_seconds=0.2`` with ``await asyncio.sleep(10)``: timeout, 0.2s."""
    with pytest.raises(CodeRunFailedError) as info:
        await run(
            "import asyncio\nawait asyncio.sleep(10)",
            limits=CodeRunLimits(wall_seconds=0.2),
        )
    assert (info.value.kind, info.value.detail) == ("timeout", "the program ran longer than 0.2s")


async def test_l092_wall_seconds_wins_over_how_the_program_ends() -> None:
    """A program that catches the cancellation and returns still times out."""
    code = lines(
        "import asyncio",
        "try:",
        "    await asyncio.sleep(10)",
        "except asyncio.CancelledError:",
        "    return 1",
    )
    with pytest.raises(CodeRunFailedError) as info:
        await run(code, limits=CodeRunLimits(wall_seconds=0.1))
    assert info.value.kind == "timeout"


async def test_l092_output_limit_reached_before_the_wall_time_stays_output_limit() -> None:
    """The first limit reached decides the outcome."""
    code = (
        "import asyncio\ntry:\n    print('x' * 20)\nexcept BaseException:\n    pass\n"
        "await asyncio.sleep(10)"
    )
    with pytest.raises(CodeRunFailedError) as info:
        await run(code, limits=CodeRunLimits(wall_seconds=0.1, output_bytes=10))
    assert (info.value.kind, info.value.logs) == ("output-limit", ("x" * 10,))


async def test_l092_output_limit_even_if_caught() -> None:
    """L-092: output over the limit fails the run even when the program catches the error."""
    code = "try:\n    print('y' * 50)\nexcept BaseException as e:\n    pass\nreturn 'caught'"
    with pytest.raises(CodeRunFailedError) as info:
        await run(code, limits=CodeRunLimits(output_bytes=20))
    assert info.value.kind == "output-limit"
    assert info.value.logs == ("y" * 20,)
    assert str(info.value).startswith(
        "code run failed (output-limit): the program wrote more than 20 bytes of output\n"
        "Captured output:\n"
    )


async def test_l092_cancelling_run_stops_an_awaiting_program_first(inject: Inject) -> None:
    """L-092, §7.1 item 4: the program has stopped before ``Cancelled`` reaches the caller."""
    seen: list[str] = []
    started = trio.Event()
    token = trio.lowlevel.current_trio_token()

    def note(text: str) -> None:
        seen.append(text)
        if text == "started":
            token.run_sync_soon(started.set)

    inject(note=note)
    code = (
        "import asyncio\nnote('started')\ntry:\n    await asyncio.sleep(100)\n"
        "except asyncio.CancelledError:\n    note('program cancelled')\n    raise"
    )

    async def go() -> None:
        try:
            await run(code)
        except trio.Cancelled:
            seen.append("run cancelled")
            raise

    async with trio.open_nursery() as nursery:
        nursery.start_soon(go)
        await started.wait()
        nursery.cancel_scope.cancel()
    assert seen == ["started", "program cancelled", "run cancelled"]


async def test_calls_overlap_and_reach_dispatch_in_the_program_order() -> None:
    """§7.1 item 1: one dispatch per call, in the program's order; calls overlap freely."""
    entered: list[int] = []
    all_in = trio.Event()
    count = 20

    async def dispatch(name: str, args: Any) -> JsonValue:
        assert threading.current_thread() is threading.main_thread()  # the caller's trio run
        entered.append(args["i"])
        if len(entered) == count:
            all_in.set()
        await all_in.wait()  # every call waits for the last: they must all be in flight
        return freeze_json(args["i"] * 10)

    code = lines(
        "import asyncio",
        f"return await asyncio.gather(*[tools.echo(i=i) for i in range({count})])",
    )
    outcome = await run(code, dispatch=dispatch)
    assert entered == list(range(count))
    assert outcome.result == tuple(i * 10 for i in range(count))


async def test_pending_dispatch_awaits_are_cancelled_when_the_program_ends(
    inject: Inject,
) -> None:
    """§7.1 item 3: a call still pending when the program returns has its await cancelled."""
    tools = CorpusTools()
    inject(dispatched=lambda: bool(tools.calls))
    code = lines(
        "import asyncio",
        "task = asyncio.create_task(tools.slow())",
        "while not dispatched():",
        "    await asyncio.sleep(0.001)",
        "return 'done'",
    )
    with trio.fail_after(30):  # generous: the run must not wait out the slow call's minute
        outcome = await run(code, tools=("slow",), dispatch=tools.dispatch)
    assert outcome.result == "done"
    assert tools.cancelled == ["slow"]


async def test_cancelling_run_cancels_an_awaited_call_and_the_program_sees_it(
    inject: Inject,
) -> None:
    """§7.1 item 4: the pending call's await is cancelled, the program stops, then Cancelled."""
    seen: list[str] = []
    in_dispatch = trio.Event()

    async def dispatch(name: str, args: object) -> JsonValue:
        in_dispatch.set()
        try:
            await trio.sleep_forever()
        finally:
            seen.append("dispatch cancelled")

    inject(note=seen.append)
    code = lines(
        "import asyncio",
        "try:",
        "    await tools.echo()",
        "except asyncio.CancelledError:",
        "    note('program cancelled')",
        "    raise",
    )
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(run, code, dispatch=dispatch))
            await in_dispatch.wait()
            scope.cancel()
    assert scope.cancelled_caught
    assert sorted(seen) == ["dispatch cancelled", "program cancelled"]


async def test_a_program_that_never_awaits_is_waited_for(inject: Inject) -> None:
    """§7.1 item 4, §8.1: a busy program cannot be stopped: run waits until it has ended."""
    seen: list[str] = []
    started = trio.Event()
    token = trio.lowlevel.current_trio_token()

    def note(text: str) -> None:
        seen.append(text)
        if text == "started":
            token.run_sync_soon(started.set)

    inject(note=note)
    code = lines("import time", "note('started')", "time.sleep(0.2)", "note('ended')")
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(run, code))
            await started.wait()
            scope.cancel()
    seen.append("run returned")
    assert scope.cancelled_caught
    assert seen == ["started", "ended", "run returned"]


async def test_a_program_that_blocks_past_its_wall_time_times_out() -> None:
    """§8.1: a program that never gave the loop a chance still ran longer than its limit."""
    with pytest.raises(CodeRunFailedError) as info:
        await run(
            lines("import time", "time.sleep(0.15)", "return 1"),
            limits=CodeRunLimits(wall_seconds=0.05),
        )
    assert (info.value.kind, info.value.detail) == ("timeout", "the program ran longer than 0.05s")


async def test_cancelled_before_the_program_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run cancelled while its program is being compiled never starts the program."""
    compiling, release = threading.Event(), threading.Event()
    original = program.compile_program

    def slow_compile(code: str) -> program.CompiledProgram:
        compiling.set()
        release.wait(30)
        return original(code)

    monkeypatch.setattr(program, "compile_program", slow_compile)
    tools = CorpusTools()
    scope = trio.CancelScope()

    async def go() -> None:
        with scope:
            await run("await tools.echo()", dispatch=tools.dispatch)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(go)
        await trio.to_thread.run_sync(compiling.wait)
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()  # the run has seen its cancellation
        release.set()
    assert scope.cancelled_caught
    assert tools.calls == []


async def test_a_cancelled_caller_never_starts_the_thread() -> None:
    """A run called in a cancelled scope raises Cancelled (one, not a group)."""
    tools = CorpusTools()
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await run("await tools.echo()", dispatch=tools.dispatch)
        except trio.Cancelled:
            seen = "cancelled"
            raise
    assert scope.cancelled_caught
    assert seen == "cancelled"
    assert tools.calls == []


@pytest.mark.parametrize("exception", ["KeyboardInterrupt", "SystemExit"])
async def test_an_interrupt_raised_in_a_program_task(exception: str) -> None:
    """asyncio lets SystemExit/KeyboardInterrupt of a task out of the loop: kind exception."""
    code = lines(
        "import asyncio",
        "async def child():",
        f"    raise {exception}('stop')",
        "task = asyncio.create_task(child())",
        "await asyncio.sleep(30)",
    )
    with trio.fail_after(20), pytest.raises(CodeRunFailedError) as info:
        await run(code)
    assert (info.value.kind, info.value.detail) == ("exception", f"{exception}: stop (line 3)")


async def test_a_dispatch_that_raises_something_else_reaches_the_program() -> None:
    """An exception other than ToolCallError from dispatch is raised in the program as is."""

    async def dispatch(name: str, args: object) -> JsonValue:
        raise RuntimeError("dispatch broke")

    code = lines("try:", "    await tools.echo()", "except RuntimeError as e:", "    return str(e)")
    outcome = await run(code, dispatch=dispatch)
    assert outcome.result == "dispatch broke"


async def test_the_output_limit_counts_utf8_bytes() -> None:
    """``output_bytes`` counts UTF-8 bytes; what fits is kept, never half a character."""
    with pytest.raises(CodeRunFailedError) as info:
        await run("print('é' * 6)", limits=CodeRunLimits(output_bytes=5))
    assert (info.value.kind, info.value.logs) == ("output-limit", ("éé",))


async def test_a_failed_call_is_the_dispatch_error() -> None:
    """The program's ToolCallError is dispatch's, with its tool name and message."""
    outcome = await run(
        lines(
            "try:",
            "    await tools.fail()",
            "except ToolCallError as e:",
            "    return [type(e).__module__, e.tool_name, e.message]",
        ),
        tools=("fail",),
    )
    assert outcome.result == ("dsh_tools._code_program", "fail", "the tool failed")


def test_language_and_protocol() -> None:
    """``language == "python"``; a valid code runtime for ``ToolRuntime(code_runtime=)``."""
    runtime = TrustedCodeRuntime()
    assert runtime.language == "python"
    assert is_valid_code_runtime(runtime)


async def test_a_dispatch_that_raises_a_base_exception_propagates_after_the_program() -> None:
    """A dispatch raising a BaseException (not Cancelled) stops the program and propagates."""

    class Boom(BaseException):
        pass

    async def dispatch(name: str, args: object) -> JsonValue:
        raise Boom

    code = lines(
        "import asyncio",
        "try:",
        "    await tools.echo()",
        "except asyncio.CancelledError:",
        "    pass",
    )
    with pytest.raises(BaseExceptionGroup) as info:
        await run(code, dispatch=dispatch)
    matched, rest = info.value.split(Boom)
    assert matched is not None
    assert rest is None


def test_an_interrupt_that_leaves_the_loop_is_the_program_exception(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In the thread: SystemExit/KeyboardInterrupt out of asyncio.run is kind exception.

    The end-to-end case is ``test_an_interrupt_raised_in_a_program_task``; coverage loses
    the worker thread's tracing once such an exception has crossed asyncio's loop, so this
    pins the branch in this thread.
    """

    def interrupted(main: Any) -> Any:
        main.close()
        raise SystemExit("out of the loop")

    monkeypatch.setattr(asyncio, "run", interrupted)
    run = _code_trusted._Run(
        "return 1",
        (),
        CorpusTools().dispatch,
        LIMITS,
        None,  # type: ignore[arg-type]  # the program never starts: no trio run needed
    )
    end = run.in_thread()
    assert (end.kind, end.detail) == ("exception", "SystemExit: out of the loop")


def test_a_call_outcome_for_a_program_that_stopped_waiting_is_dropped() -> None:
    """A call that completes after the program cancelled its await changes nothing."""
    loop = asyncio.new_event_loop()
    try:
        future = loop.create_future()
        future.cancel()
        _code_trusted._settle(future, None, 1)
        assert future.cancelled()
        failed = loop.create_future()
        _code_trusted._settle(failed, ValueError("x"), None)
        assert isinstance(failed.exception(), ValueError)
    finally:
        loop.close()


@given(maybe_json_values().map(plain))
@settings(max_examples=50)
async def test_l035_the_program_refuses_exactly_what_dispatch_would(value: object) -> None:
    """L-035: a binding given ``value`` dispatches it frozen as freeze_json freezes it, or
    raises ToolCallError with the text of the lane's own check, dispatching nothing."""
    tools = CorpusTools()
    original = program.program_globals

    def with_value(tools: object, tool_call_error: type, **extra: object) -> dict[str, Any]:
        return original(tools, tool_call_error, value=value, **extra)

    program.program_globals = with_value
    try:
        outcome = await TrustedCodeRuntime().run(
            lines(
                "try:",
                "    await tools.echo(value=value)",
                "except ToolCallError as e:",
                "    return str(e)",
            ),
            tools=("echo",),
            dispatch=tools.dispatch,
            limits=LIMITS,
        )
    finally:
        program.program_globals = original
    reason = freeze_text({"value": value})
    if reason is None:
        assert outcome.result is UNSET
        assert tools.calls == [("echo", freeze_json({"value": value}))]
    else:
        assert outcome.result == f"tool arguments must be lossless JSON ({reason})"
        assert tools.calls == []

"""TrustedCodeRuntime (code-mode §8.1): a real asyncio loop in a trio worker thread.

The program runs in another thread, so these tests use real (tiny) timings where the
program must wait, and never assert a duration beyond generous bounds.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

from dsh_tools import CodeRunFailedError
from dsh_tools import _code_program as program
from dsh_tools.code import CodeRunLimits, TrustedCodeRuntime

from .code_corpus import CORPUS, CodeCase, CorpusTools, cases_citing, check_case, lines

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

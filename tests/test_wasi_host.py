"""One run in the WASI sandbox, end to end: the guest's event loop, the wire protocol as the
host enforces it, the limits, and stopping the guest (code-mode §8.2.4–§8.2.8; L-097..L-101).

Every run is real: CPython on WASI under wasmtime, with the session's compiled module. A
program that writes to its file descriptor 1 directly speaks the protocol itself, which is
how these tests forge what a tampered guest could send.
"""

from __future__ import annotations

import math
import os
import time
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing
import wasmtime

from dsh_tools import CodeRunFailedError
from dsh_tools._wasi._artifact import new_engine
from dsh_tools._wasi._host import (
    FUEL_PER_SECOND,
    FUEL_START,
    LINE_ALLOWANCE,
    _Run,
    _start_guest,
    trap_failure,
)
from dsh_tools.code import CodeRunFailureKind, CodeRunLimits, CodeRunOutcome, ToolCallError

if TYPE_CHECKING:
    from pathlib import Path

    from dsh_tools import JsonValue
    from dsh_tools.code import WasiCodeRuntime

MiB = 1 << 20


@pytest.fixture
def wasi(wasi_cache_dir: Path) -> WasiCodeRuntime:
    from dsh_tools.code import WasiCodeRuntime

    return WasiCodeRuntime(cache_dir=wasi_cache_dir)


class Tools:
    """A dispatch that records calls: ``echo`` returns its arguments, ``fail`` fails,
    ``slow`` sleeps ``args["s"]`` seconds (forever by default)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.running = 0
        self.peak = 0
        self.cancelled = 0
        self.broken = 0
        self.all_broken = trio.Event()

    async def dispatch(self, name: str, args: object) -> JsonValue:
        self.calls.append((name, args))
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            if name == "fail":
                await trio.lowlevel.checkpoint()
                raise ToolCallError(name, "it failed")
            if name == "slow":
                assert isinstance(args, dict)
                await trio.sleep(args.get("s", math.inf))
            elif name == "broken":
                # Fails once ``together`` broken calls are running, all in one tick.
                assert isinstance(args, dict)
                self.broken += 1
                if self.broken == args.get("together", 1):
                    self.all_broken.set()
                await self.all_broken.wait()
                raise LookupError("dispatch broke")
            else:
                await trio.sleep(0.01)
            return {"name": name, "args": args}
        except trio.Cancelled:
            self.cancelled += 1
            raise
        finally:
            self.running -= 1


NAMES = ("broken", "echo", "fail", "slow")


async def run(
    wasi: WasiCodeRuntime, code: str, tools: Tools | None = None, **limits: Any
) -> CodeRunOutcome:
    dispatch = (tools or Tools()).dispatch
    return await wasi.run(code, tools=NAMES, dispatch=dispatch, limits=CodeRunLimits(**limits))


async def fail(
    wasi: WasiCodeRuntime, code: str, tools: Tools | None = None, **limits: Any
) -> CodeRunFailedError:
    with pytest.raises(CodeRunFailedError) as info:
        await run(wasi, code, tools, **limits)
    return info.value


def forge(*lines: str, then: str = "import os\nos._exit(0)") -> str:
    """A program that writes ``lines`` to the host itself, then ``then``."""
    writes = "".join(f"os.write(1, {line!r}.encode() + b'\\n')\n" for line in lines)
    return f"import os\n{writes}{then}"


# -- results, logs, tool calls ------------------------------------------------------------


async def test_results_and_logs(wasi: WasiCodeRuntime) -> None:
    assert await run(wasi, "return 1") == CodeRunOutcome(result=1)
    assert await run(wasi, "pass") == CodeRunOutcome()
    code = "import sys\nprint('a')\nprint('b\\nc')\nsys.stderr.write('e\\n')\nreturn {'k': [1]}"
    assert await run(wasi, code) == CodeRunOutcome(logs=("a", "b", "c", "e"), result={"k": [1]})


async def test_long_output_arrives_whole_across_log_messages(wasi: WasiCodeRuntime) -> None:
    outcome = await run(wasi, "for i in range(3000):\n    print(i, 'é' * 3)")
    assert outcome.logs == tuple(f"{i} ééé" for i in range(3000))


async def test_tool_calls_in_program_order(wasi: WasiCodeRuntime) -> None:
    tools = Tools()
    code = (
        "a = await tools.echo(x=1)\n"
        "b = await tools['echo']({'y': [2]})\n"
        "try:\n"
        "    await tools.fail()\n"
        "except ToolCallError as e:\n"
        "    c = [type(e).__name__, e.tool_name, str(e)]\n"
        "return [a, b, c]"
    )
    outcome = await run(wasi, code, tools)
    assert outcome.result == (
        {"name": "echo", "args": {"x": 1}},
        {"name": "echo", "args": {"y": (2,)}},
        ("ToolCallError", "fail", "it failed"),
    )
    assert tools.calls == [("echo", {"x": 1}), ("echo", {"y": [2]}), ("fail", {})]


async def test_an_uncaught_failed_call_is_an_exception(wasi: WasiCodeRuntime) -> None:
    error = await fail(wasi, "print('before')\nawait tools.fail()")
    assert error.kind is CodeRunFailureKind.EXCEPTION
    assert error.detail == "ToolCallError: it failed (line 2)"
    assert error.logs == ("before",)


async def test_syntax_and_exception_details_come_from_the_guest(wasi: WasiCodeRuntime) -> None:
    error = await fail(wasi, "x = (")
    assert error.kind is CodeRunFailureKind.SYNTAX
    assert str(error.detail).startswith("SyntaxError: ")
    error = await fail(wasi, "\n1 / 0")
    assert error.detail == "ZeroDivisionError: division by zero (line 2)"


async def test_l097_gathered_calls_overlap_on_the_host(wasi: WasiCodeRuntime) -> None:
    """L-097: five gathered calls run at the same time on the host (peak 5)."""
    tools = Tools()
    code = (
        "import asyncio\n"
        "r = await asyncio.gather(*[tools.slow(s=0.2, i=i) for i in range(5)])\n"
        "return [x['args']['i'] for x in r]"
    )
    outcome = await run(wasi, code, tools)
    assert outcome.result == (0, 1, 2, 3, 4)
    assert tools.peak == 5
    assert [args for _, args in tools.calls] == [{"s": 0.2, "i": i} for i in range(5)]


async def test_l097_asyncio_inside_the_sandbox(wasi: WasiCodeRuntime) -> None:
    """L-097: create_task, wait_for timing out a slow call, sleep lasting its time on the
    host, Semaphore and Queue."""
    code = (
        "import asyncio, time\n"
        "t = asyncio.create_task(tools.echo(n=1))\n"
        "try:\n"
        "    await asyncio.wait_for(tools.slow(s=5), 0.05)\n"
        "    timed_out = False\n"
        "except TimeoutError:\n"
        "    timed_out = True\n"
        "sem = asyncio.Semaphore(1)\n"
        "async with sem:\n"
        "    pass\n"
        "q = asyncio.Queue()\n"
        "q.put_nowait(7)\n"
        "start = time.monotonic()\n"
        "await asyncio.sleep(0.3)\n"
        "async with asyncio.timeout(10):\n"
        "    got = await q.get()\n"
        "return [(await t)['args'], timed_out, got, time.monotonic() - start >= 0.3]"
    )
    began = time.monotonic()
    outcome = await run(wasi, code)
    assert outcome.result == ({"n": 1}, True, 7, True)
    assert time.monotonic() - began >= 0.3


async def test_l097_no_asyncio_import_no_asyncio(wasi: WasiCodeRuntime) -> None:
    """L-097: a program without an asyncio import statement never imports asyncio."""
    code = "import sys\nr = await tools.echo()\nreturn ['asyncio' in sys.modules, r['name']]"
    assert (await run(wasi, code)).result == (False, "echo")
    assert (
        await run(wasi, "import asyncio.queues\nimport sys\nreturn 'asyncio' in sys.modules")
    ) == (CodeRunOutcome(result=True))


async def test_l098_sandbox_specifics(wasi: WasiCodeRuntime) -> None:
    """L-098: no sleeping, no waiting on nothing, an empty stdin, no nested asyncio.run."""
    error = await fail(wasi, "import time\ntime.sleep(1)")
    assert error.detail == "OSError: [Errno 58] Not supported (line 2)"
    error = await fail(wasi, "import asyncio\nawait asyncio.Event().wait()")
    assert error.kind is CodeRunFailureKind.EXCEPTION
    assert error.detail == (
        "RuntimeError: the program is waiting, but no tool call or timer is pending"
    )
    assert (await run(wasi, "import sys\nreturn sys.stdin.read()")).result == ""
    code = (
        "import asyncio\n"
        "async def f():\n"
        "    return 1\n"
        "c = f()\n"
        "try:\n"
        "    asyncio.run(c)\n"
        "except RuntimeError as e:\n"
        "    c.close()\n"
        "    return type(e).__name__"
    )
    assert (await run(wasi, code)).result == "RuntimeError"


async def test_a_program_awaiting_something_else_fails(wasi: WasiCodeRuntime) -> None:
    code = "class Odd:\n    def __await__(self):\n        yield 1\nawait Odd()"
    error = await fail(wasi, code)
    assert error.detail == "RuntimeError: the program awaited 1 (line 3)"


# -- limits --------------------------------------------------------------------------------


async def test_l099_cpu(wasi: WasiCodeRuntime) -> None:
    """L-099: a busy loop with ``cpu_seconds=0.5`` runs out of fuel."""
    began = time.monotonic()
    error = await fail(wasi, "while True:\n    pass", cpu_seconds=0.5)
    assert error.kind is CodeRunFailureKind.TIMEOUT
    assert error.detail == "the program used more than 0.5s of CPU time"
    assert time.monotonic() - began < 15
    assert FUEL_START + math.ceil(0.5 * FUEL_PER_SECOND) == 7_500_000_000


async def test_l099_wall_time_with_a_call_pending(wasi: WasiCodeRuntime) -> None:
    """L-099: the wall limit stops a program waiting on a call; the pending dispatch is
    cancelled once the program has ended."""
    tools = Tools()
    began = time.monotonic()
    error = await fail(wasi, "print('x')\nawait tools.slow()", tools, wall_seconds=1)
    assert time.monotonic() - began < 3
    assert error.detail == "the program ran longer than 1.0s"
    assert error.logs == ("x",)
    assert tools.cancelled == 1


async def test_l099_memory(wasi: WasiCodeRuntime) -> None:
    """L-099: a memory bomb is kind memory; a caught MemoryError lets the program go on."""
    code = "x = []\nwhile True:\n    x.append(' ' * 10**6)"
    error = await fail(wasi, code, memory_bytes=64 * MiB)
    assert error.kind is CodeRunFailureKind.MEMORY
    assert error.detail == "the program ran out of memory (limit 67108864 bytes)"
    code = "try:\n    bytearray(10**9)\nexcept MemoryError as e:\n    return type(e).__name__"
    assert (await run(wasi, code, memory_bytes=64 * MiB)).result == "MemoryError"


async def test_a_memory_limit_below_the_interpreters_own_memory(wasi: WasiCodeRuntime) -> None:
    error = await fail(wasi, "return 1", memory_bytes=MiB)
    assert error.kind is CodeRunFailureKind.MEMORY
    assert error.detail == "the program ran out of memory (limit 1048576 bytes)"


@pytest.mark.parametrize("caught", [False, True])
async def test_l099_output(wasi: WasiCodeRuntime, caught: bool) -> None:
    """L-099: an output flood is kind output-limit, caught or not, with logs within it."""
    flood = "while True:\n    print('x' * 1000)"
    if caught:
        flood = f"try:\n    {flood.replace(chr(10), chr(10) + '    ')}\nexcept BaseException:\n"
        flood += "    pass\nreturn 'survived'"
    error = await fail(wasi, flood, output_bytes=100_000)
    assert error.kind is CodeRunFailureKind.OUTPUT_LIMIT
    assert error.detail == "the program wrote more than 100000 bytes of output"
    assert error.logs
    assert len("\n".join(error.logs).encode()) <= 100_000


async def test_a_forged_log_over_the_limit_stops_the_guest(wasi: WasiCodeRuntime) -> None:
    """The host counts the log text itself: a guest that lies about its output is stopped,
    and the logs are cut at the limit, on a character boundary."""
    line = '{"op": "log", "text": "' + "é" * 600 + '"}'
    error = await fail(wasi, forge(line, then="while True:\n    pass"), output_bytes=1001)
    assert error.detail == "the program wrote more than 1001 bytes of output"
    assert error.logs == ("é" * 500,)


async def test_one_huge_message_is_refused(wasi: WasiCodeRuntime) -> None:
    """§9 #18: bytes with no newline past ``output_bytes + 16 MiB`` stop the guest."""
    began = time.monotonic()
    code = "import os\nwhile True:\n    os.write(1, b'x' * 65536)"
    error = await fail(wasi, code, output_bytes=100_000)
    assert (
        error.detail == f"the program sent a message larger than {100_000 + LINE_ALLOWANCE} bytes"
    )
    assert time.monotonic() - began < 15


async def test_stderr_is_read_and_discarded(wasi: WasiCodeRuntime) -> None:
    code = "import os\nfor i in range(300):\n    os.write(2, b'y' * 65536)\nreturn 'done'"
    assert await run(wasi, code) == CodeRunOutcome(result="done")


# -- the protocol, as the host enforces it -----------------------------------------------------


@pytest.mark.parametrize(
    "lines",
    [
        ["garbage"],
        ['{"op": "wake", "id": 1, "seconds": -1}'],
        ['{"op": "call", "id": 1, "name": "echo", "args": {}}'] * 2,  # a duplicate id
        ['{"op": "done", "status": "ok"}', '{"op": "log", "text": "late"}'],
        ['{"op": "done", "status": "error", "kind": "timeout", "detail": "x"}'],
    ],
)
async def test_protocol_violations_are_internal(wasi: WasiCodeRuntime, lines: list[str]) -> None:
    error = await fail(wasi, forge(*lines, then="while True:\n    pass"))
    assert error.kind is CodeRunFailureKind.INTERNAL
    assert error.detail == "the sandbox broke the protocol"


async def test_forged_done_messages(wasi: WasiCodeRuntime) -> None:
    """The host checks a result again, and words memory and output failures itself."""
    error = await fail(wasi, forge('{"op": "done", "status": "ok", "result": [-0.0]}'))
    assert error.kind is CodeRunFailureKind.RESULT
    assert error.detail == "the program returned a value that is not lossless JSON"
    done = '{"op": "done", "status": "error", "kind": "%s", "detail": "guest words"}'
    error = await fail(wasi, forge(done % "memory"), memory_bytes=64 * MiB)
    assert error.detail == "the program ran out of memory (limit 67108864 bytes)"
    error = await fail(wasi, forge(done % "output-limit"), output_bytes=5)
    assert error.detail == "the program wrote more than 5 bytes of output"
    error = await fail(wasi, forge(done % "exception"))
    assert error.detail == "guest words"


async def test_a_forged_call_naming_an_unbound_tool_is_a_protocol_violation(
    wasi: WasiCodeRuntime,
) -> None:
    """L-100 (security row 25): a tampered guest can write any call line, but the host
    never dispatches a name it did not bind: the run fails as a broken protocol."""
    tools = Tools()
    reply = "import sys\nline = sys.__stdin__.buffer.readline()\nreturn line.decode()"
    call = '{"op": "call", "id": 99, "name": "not-bound", "args": {"a": 1}}'
    with pytest.raises(CodeRunFailedError) as caught:
        await run(wasi, forge(call, then=reply), tools)
    assert tools.calls == []
    assert caught.value.kind is CodeRunFailureKind.INTERNAL
    assert caught.value.detail == "the sandbox broke the protocol"


async def test_a_dispatch_that_breaks_its_contract_is_internal(wasi: WasiCodeRuntime) -> None:
    error = await fail(wasi, "await tools.broken()")
    assert error.kind is CodeRunFailureKind.INTERNAL
    assert error.detail == "dispatch broke"
    # Two at once: the first decision stands, and the guest is stopped once.
    code = "import asyncio\nb = tools.broken\nawait asyncio.gather(b(together=2), b(together=2))"
    error = await fail(wasi, code)
    assert error.detail == "dispatch broke"


async def test_endings_without_done(wasi: WasiCodeRuntime) -> None:
    error = await fail(wasi, "import os\nos._exit(0)")
    assert error.detail == "the sandbox stopped without a result"
    # Output is sent every 4096 characters: what was sent before the end is kept.
    error = await fail(wasi, "import os\nprint('w' * 5000)\nos.abort()")
    assert error.detail == "the sandbox stopped with a trap: UNREACHABLE"
    assert error.logs == ("w" * 5000,)


@pytest.mark.parametrize("step", ["set_wasi", "define_wasi"])
async def test_a_sandbox_that_cannot_be_set_up_is_internal(
    wasi: WasiCodeRuntime, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    """Before or after wasmtime took its own copies of the guest's pipe ends, a setup error
    is kind internal with wasmtime's message, and the run returns (the host's pipe ends
    see end-of-file)."""

    def refuse(*args: object) -> None:
        raise wasmtime.WasmtimeError("no WASI today")

    owner = wasmtime.Store if step == "set_wasi" else wasmtime.Linker
    monkeypatch.setattr(owner, step, refuse)
    error = await fail(wasi, "return 1")
    assert error.kind is CodeRunFailureKind.INTERNAL
    assert error.detail == "no WASI today"


async def test_a_guest_stopped_before_it_starts_never_runs(wasi: WasiCodeRuntime) -> None:
    """A stop that comes before ``_start`` (the epoch raised before the deadline was set)
    is honoured by not starting; the guest's pipe ends are closed either way."""
    await wasi.prepare()
    compiled = wasi._compiled  # the loaded module, to drive one guest thread by hand
    assert compiled is not None
    engine = new_engine()
    fds = [os.pipe() for _ in range(3)]
    async with trio.open_nursery() as nursery:
        stdin = trio.lowlevel.FdStream(fds[0][1])
        run = _Run(CodeRunLimits(), engine, stdin, Tools().dispatch, nursery, ())
        run.stop()
        guest_ends = (fds[0][0], fds[1][1], fds[2][1])
        module = compiled.instantiate_in(engine)
        assert _start_guest(run, module, ["python", "-c", "pass"], guest_ends) is None
    for fd in guest_ends:
        with pytest.raises(OSError, match="Bad file descriptor"):
            os.fstat(fd)
    for fd in (fds[1][0], fds[2][0]):
        assert os.read(fd, 10) == b""  # nothing was written, and the write ends are closed
        os.close(fd)


def test_trap_failures() -> None:
    limits = CodeRunLimits(cpu_seconds=2, memory_bytes=4096)
    assert trap_failure("OUT_OF_FUEL", limits) == (
        "timeout",
        "the program used more than 2.0s of CPU time",
    )
    assert trap_failure("STACK_OVERFLOW", limits) == ("memory", "the program exhausted its stack")
    assert trap_failure("MEMORY_LIMIT", limits) == (
        "memory",
        "the program ran out of memory (limit 4096 bytes)",
    )
    assert trap_failure("INTERRUPT", limits) == (
        "internal",
        "the sandbox stopped with a trap: INTERRUPT",
    )
    assert trap_failure(None, limits) == ("internal", "the sandbox stopped without a result")


# -- stopping ------------------------------------------------------------------------------------

STUCK = {
    "busy": (
        "while True:\n"
        "    try:\n"
        "        while True:\n"
        "            pass\n"
        "    except BaseException:\n"
        "        pass"
    ),
    "reply": "await tools.slow()",
    "sleep": "import asyncio\nawait asyncio.sleep(100)",
    "reading": "import sys\nsys.__stdin__.buffer.read()",
}


@pytest.mark.parametrize("stuck", sorted(STUCK))
async def test_l101_cancellation_stops_the_guest(wasi: WasiCodeRuntime, stuck: str) -> None:
    """L-101: cancelled after 0.5 s, ``run`` raises Cancelled within 1 s, with its thread
    returned (``run`` never abandons it); a pending call's dispatch is cancelled too."""
    await wasi.prepare()
    tools = Tools()
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, wasi, STUCK[stuck], tools)
            await trio.sleep(0.5)
            cancelled_at = time.monotonic()
            scope.cancel()
    assert scope.cancelled_caught
    assert time.monotonic() - cancelled_at < 1.0
    if stuck == "reply":
        assert tools.cancelled == 1


async def test_l101_a_second_run_goes_on_while_one_is_cancelled(wasi: WasiCodeRuntime) -> None:
    """L-101 / §9 #26: runs are independent: cancelling one stops only its own guest."""
    await wasi.prepare()
    results: list[CodeRunOutcome] = []

    async def survivor() -> None:
        results.append(await run(wasi, "import asyncio\nawait asyncio.sleep(1)\nreturn 'ok'"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(survivor)
        with trio.move_on_after(0.5) as scope:
            await run(wasi, STUCK["busy"])
    assert scope.cancelled_caught
    assert results == [CodeRunOutcome(result="ok")]


async def test_system_exit_escaping_a_task_is_an_exception(wasi: WasiCodeRuntime) -> None:
    """asyncio lets SystemExit out of a task and out of the loop; the program still ends
    with kind exception, not a dead sandbox."""
    code = (
        "import asyncio, sys\n"
        "async def leave():\n"
        "    sys.exit(3)\n"
        "asyncio.create_task(leave())\n"
        "await asyncio.sleep(1)"
    )
    error = await fail(wasi, code)
    assert error.kind is CodeRunFailureKind.EXCEPTION
    assert error.detail == "SystemExit: 3 (line 3)"


async def test_a_run_does_not_hold_a_token_of_trios_default_thread_limiter(
    wasi: WasiCodeRuntime,
) -> None:
    """A program holds its worker thread for its whole run: with every token of trio's
    default limiter taken, runs still start (and so do trio's own worker threads once
    the tokens come back)."""
    await wasi.prepare()
    limiter = trio.to_thread.current_default_thread_limiter()
    holders = [object() for _ in range(int(limiter.total_tokens))]
    for holder in holders:
        limiter.acquire_on_behalf_of_nowait(holder)
    try:
        with trio.fail_after(60):
            assert (await run(wasi, "return 5")).result == 5
    finally:
        for holder in holders:
            limiter.release_on_behalf_of(holder)

"""L-100: the WASI sandbox's security requirements (code-mode §9, rows 1–26).

Each test runs the row's program under ``WasiCodeRuntime`` with default limits unless the row
states others, asserts exactly the stated outcome, and then checks the host process through
:class:`~tests.wasi_helpers.HostWatch`: no file created or opened in the test's own folder
(which holds a secret file the programs also try to read), no file in the system temp folder
or the working directory, no socket (a listener on 127.0.0.1 that the programs try to reach
counts connections), no leaked pipe, no child process, no environment variable read (a
secret variable is set first and must appear nowhere in the outcome), no thread left busy,
and the run returned within the row's bound.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio

from dsh_tools import (
    ABORTED,
    CODE_RUN_FAILED,
    RUN_CODE_NAME,
    UNSET,
    CodeDispatch,
    CodeDispatchStart,
    FrozenDict,
    ToolRuntime,
)
from dsh_tools.code import CodeRunFailureKind, CodeRunLimits, WasiCodeRuntime

from .helpers import raw_tool, run
from .wasi_helpers import (
    HostWatch,
    ToolHost,
    busy_threads,
    failure,
    inside,
    run_program,
    watching,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from dsh_tools.code import CodeRunOutcome

MIB = 1 << 20


@pytest.fixture
async def runtime(wasi_cache_dir: Path) -> WasiCodeRuntime:
    """A runtime loaded from the session's cache (loaded here, so that no timed run of a
    test includes the session's one compile)."""
    loaded = WasiCodeRuntime(cache_dir=wasi_cache_dir)
    await loaded.prepare()
    return loaded


@pytest.fixture
async def watch(tmp_path: Path) -> AsyncIterator[HostWatch]:
    # Set up inside the test's trio run, so the run's own descriptors are in the snapshot.
    with watching(tmp_path / "host") as watch:
        yield watch


async def _inside(
    runtime: WasiCodeRuntime, watch: HostWatch, *statements: str
) -> tuple[object, ...]:
    outcome = await run_program(runtime, "import os\n" + inside(*statements))
    watch.check(outcome)
    assert outcome.logs == ()
    assert isinstance(outcome.result, tuple)
    return outcome.result


async def test_l100_row01_no_host_file_is_readable(
    runtime: WasiCodeRuntime, watch: HostWatch
) -> None:
    """L-100 row 1: ``open("/etc/passwd").read()`` → FileNotFoundError inside; the test's
    secret file cannot be opened either, and the kernel saw no open of it."""
    assert await _inside(
        runtime,
        watch,
        'open("/etc/passwd").read()',
        f"open({str(watch.secret_path)!r}).read()",
    ) == ("FileNotFoundError", "FileNotFoundError")


async def test_l100_row02_no_host_file_is_writable(
    runtime: WasiCodeRuntime, watch: HostWatch
) -> None:
    """L-100 row 2: writing a host path → FileNotFoundError inside; the file does not exist."""
    assert await _inside(
        runtime,
        watch,
        f'open({str(watch.forbidden_path)!r}, "w").write("x")',
        f'open({str(watch.tmp_marker_path)!r}, "w").write("x")',
        'open("x", "w").write("x")',
    ) == ("FileNotFoundError", "FileNotFoundError", "FileNotFoundError")
    assert not watch.forbidden_path.exists()


async def test_l100_row03_no_directory_is_listable(
    runtime: WasiCodeRuntime, watch: HostWatch
) -> None:
    """L-100 row 3: ``os.listdir("/")``, ``os.listdir(".")`` → FileNotFoundError inside."""
    assert await _inside(
        runtime,
        watch,
        'os.listdir("/")',
        'os.listdir(".")',
        f"os.listdir({str(watch.folder)!r})",
    ) == ("FileNotFoundError", "FileNotFoundError", "FileNotFoundError")


async def test_l100_row04_no_escape_from_the_stdlib_folder(
    runtime: WasiCodeRuntime, watch: HostWatch
) -> None:
    """L-100 row 4: ``..`` out of the embedded stdlib → NotADirectoryError or FileNotFoundError."""
    up = "/usr/local/lib/python3.12/../../../.."
    names = await _inside(
        runtime,
        watch,
        f'os.stat("{up}/etc/passwd")',
        f"os.stat({up + str(watch.secret_path)!r})",
        f"open({up + str(watch.secret_path)!r}).read()",
    )
    assert all(name in {"NotADirectoryError", "FileNotFoundError"} for name in names), names


async def test_l100_row05_no_socket(runtime: WasiCodeRuntime, watch: HostWatch) -> None:
    """L-100 row 5: ``socket.socket(); socket.create_connection(("127.0.0.1", 22))`` →
    OSError inside; a connection to the test's own listener on 127.0.0.1 fails too (the
    listener saw no connection)."""
    names = await _inside(
        runtime,
        watch,
        'import socket; socket.socket(); socket.create_connection(("127.0.0.1", 22))',
        f'import socket; socket.create_connection(("127.0.0.1", {watch.port}))',
    )
    assert names[0] == "OSError"
    assert names[1] != "no exception"


async def test_l100_row06_no_subprocess(runtime: WasiCodeRuntime, watch: HostWatch) -> None:
    """L-100 row 6: ``subprocess.run(["ls"])`` → OSError inside; no command ran."""
    names = await _inside(
        runtime,
        watch,
        'import subprocess; subprocess.run(["ls"])',
        f'import subprocess; subprocess.run(["touch", {str(watch.forbidden_path)!r}])',
    )
    assert names == ("OSError", "OSError")
    assert not watch.forbidden_path.exists()


async def test_l100_row07_no_system_no_fork(runtime: WasiCodeRuntime, watch: HostWatch) -> None:
    """L-100 row 7: ``os.system("touch <host path>")``, ``os.fork()`` → AttributeError
    inside; the host file does not exist."""
    names = await _inside(
        runtime,
        watch,
        f'os.system("touch {watch.forbidden_path}")',
        "os.fork()",
    )
    assert names == ("AttributeError", "AttributeError")
    assert not watch.forbidden_path.exists()


async def test_l100_row08_no_native_code(runtime: WasiCodeRuntime, watch: HostWatch) -> None:
    """L-100 row 8: ``import ctypes`` → ModuleNotFoundError inside."""
    assert await _inside(runtime, watch, "import ctypes") == ("ModuleNotFoundError",)


async def test_l100_row09_no_environment(runtime: WasiCodeRuntime, watch: HostWatch) -> None:
    """L-100 row 9: ``dict(os.environ)`` returns ``{}`` although the host set a secret
    variable first."""
    outcome = await run_program(runtime, "import os\nreturn dict(os.environ)")
    watch.check(outcome)
    assert outcome.result == FrozenDict()
    outcome = await run_program(
        runtime, f"import os\nreturn [os.environ.get({watch.env_name!r}), os.getenv('HOME')]"
    )
    watch.check(outcome)
    assert outcome.result == (None, None)


async def test_l100_row10_no_threads(runtime: WasiCodeRuntime, watch: HostWatch) -> None:
    """L-100 row 10: ``threading.Thread(target=print).start()`` → RuntimeError inside."""
    assert await _inside(
        runtime, watch, "import threading; threading.Thread(target=print).start()"
    ) == ("RuntimeError",)


async def test_l100_row11_no_blocking_sleep(runtime: WasiCodeRuntime, watch: HostWatch) -> None:
    """L-100 row 11, L-098: ``time.sleep(100)`` → OSError inside (at once, not after 100 s)."""
    with trio.fail_after(30):
        assert await _inside(runtime, watch, "import time; time.sleep(100)") == ("OSError",)


async def test_l100_row12_cpu_limit(runtime: WasiCodeRuntime, watch: HostWatch) -> None:
    """L-100 row 12, L-099: ``while True: pass`` with ``cpu_seconds=0.5`` → timeout (CPU text),
    within 15 s."""
    start = trio.current_time()
    error = await failure(runtime, "while True:\n    pass", limits=CodeRunLimits(cpu_seconds=0.5))
    assert trio.current_time() - start < 15
    assert (error.code, error.kind) == (CODE_RUN_FAILED, CodeRunFailureKind.TIMEOUT)
    assert error.detail == "the program used more than 0.5s of CPU time"
    watch.check(error)
    watch.assert_no_busy_thread()


async def test_l100_row13_wall_limit(runtime: WasiCodeRuntime, watch: HostWatch) -> None:
    """L-100 row 13, L-099: ``await asyncio.sleep(100)`` with ``wall_seconds=1`` → timeout (wall
    text) within 3 s."""
    start = trio.current_time()
    error = await failure(
        runtime, "import asyncio\nawait asyncio.sleep(100)", limits=CodeRunLimits(wall_seconds=1)
    )
    assert trio.current_time() - start < 3
    assert error.kind is CodeRunFailureKind.TIMEOUT
    assert error.detail == "the program ran longer than 1.0s"
    watch.check(error)


async def test_l100_row14_memory_bomb(runtime: WasiCodeRuntime, watch: HostWatch) -> None:
    """L-100 row 14, L-099: appending megabyte strings forever with 64 MiB → kind memory."""
    error = await failure(
        runtime,
        'x = []\nwhile True:\n    x.append(" " * 10**6)',
        limits=CodeRunLimits(memory_bytes=64 * MIB),
    )
    assert error.kind is CodeRunFailureKind.MEMORY
    assert error.detail == "the program ran out of memory (limit 67108864 bytes)"
    watch.check(error)


async def test_l100_row15_caught_memory_error(runtime: WasiCodeRuntime, watch: HostWatch) -> None:
    """L-100 row 15, L-099: ``bytearray(10**9)`` with 64 MiB, caught → MemoryError inside."""
    outcome = await run_program(
        runtime, inside("bytearray(10**9)"), limits=CodeRunLimits(memory_bytes=64 * MIB)
    )
    watch.check(outcome)
    assert outcome.result == ("MemoryError",)


def _log_bytes(logs: tuple[str, ...]) -> int:
    return len("\n".join(logs).encode())


async def test_l100_row16_output_flood(runtime: WasiCodeRuntime, watch: HostWatch) -> None:
    """L-100 row 16, L-099: printing forever with ``output_bytes=100000`` → output-limit; the
    logs are non-empty and within the limit."""
    error = await failure(
        runtime, 'while True:\n    print("x" * 1000)', limits=CodeRunLimits(output_bytes=100_000)
    )
    assert error.kind is CodeRunFailureKind.OUTPUT_LIMIT
    assert error.detail == "the program wrote more than 100000 bytes of output"
    assert error.logs
    assert set("".join(error.logs)) == {"x"}
    assert _log_bytes(error.logs) <= 100_000
    watch.check(error)


async def test_l100_row17_output_flood_caught(runtime: WasiCodeRuntime, watch: HostWatch) -> None:
    """L-100 row 17: the flood inside ``try: … except BaseException: pass`` then
    ``return "survived"`` → still output-limit."""
    code = 'try:\n    while True:\n        print("x" * 1000)\nexcept BaseException:\n    pass\n'
    error = await failure(
        runtime, code + 'return "survived"', limits=CodeRunLimits(output_bytes=100_000)
    )
    assert error.kind is CodeRunFailureKind.OUTPUT_LIMIT
    assert error.detail == "the program wrote more than 100000 bytes of output"
    assert _log_bytes(error.logs) <= 100_000
    watch.check(error)


async def test_l100_row18_raw_stdout_flood(runtime: WasiCodeRuntime, watch: HostWatch) -> None:
    """L-100 row 18: ``os.write(1, b"x" * 65536)`` in a loop with no newline → output-limit,
    the message-size text, within 15 s."""
    start = trio.current_time()
    error = await failure(
        runtime,
        'import os\nwhile True:\n    os.write(1, b"x" * 65536)',
        limits=CodeRunLimits(output_bytes=100_000),
    )
    assert trio.current_time() - start < 15
    assert error.kind is CodeRunFailureKind.OUTPUT_LIMIT
    assert error.detail == "the program sent a message larger than 16877216 bytes"
    watch.check(error)
    watch.assert_no_busy_thread()


async def test_l100_row19_garbage_on_stdout(runtime: WasiCodeRuntime, watch: HostWatch) -> None:
    """L-100 row 19: ``os.write(1, b"garbage\\n")`` → internal, the protocol text."""
    error = await failure(runtime, 'import os\nos.write(1, b"garbage\\n")\nreturn 1')
    assert (error.kind, error.detail) == (
        CodeRunFailureKind.INTERNAL,
        "the sandbox broke the protocol",
    )
    watch.check(error)


async def test_l100_row20_stderr_is_drained(runtime: WasiCodeRuntime, watch: HostWatch) -> None:
    """L-100 row 20: 2000 × 64 KiB to descriptor 2, then ``return "done"`` → succeeds."""
    outcome = await run_program(
        runtime, 'import os\nfor _ in range(2000):\n    os.write(2, b"y" * 65536)\nreturn "done"'
    )
    assert outcome.result == "done"
    assert outcome.logs == ()
    watch.check(outcome)


async def test_l100_row21_recursion(runtime: WasiCodeRuntime, watch: HostWatch) -> None:
    """L-100 row 21: unbounded recursion → exception, ``RecursionError: maximum recursion
    depth exceeded (line 1)``."""
    error = await failure(runtime, "def f(n): return f(n + 1)\nf(0)")
    assert (error.kind, error.detail) == (
        CodeRunFailureKind.EXCEPTION,
        "RecursionError: maximum recursion depth exceeded (line 1)",
    )
    watch.check(error)


async def test_l100_row22_deep_recursion(runtime: WasiCodeRuntime, watch: HostWatch) -> None:
    """L-100 row 22: the same after ``sys.setrecursionlimit(10**6)`` → RecursionError or the
    stack text; never a host crash (this test process goes on)."""
    error = await failure(
        runtime, "import sys\nsys.setrecursionlimit(10**6)\ndef f(n): return f(n + 1)\nf(0)"
    )
    assert (error.kind, error.detail.split(":")[0] if error.detail else None) in {
        (CodeRunFailureKind.EXCEPTION, "RecursionError"),
        (CodeRunFailureKind.MEMORY, "the program exhausted its stack"),
    }
    watch.check(error)
    # The host still runs programs.
    assert (await run_program(runtime, "return 2")).result == 2


_CATCH_ALL_LOOP = """\
await tools.ready()
while True:
    try:
        while True:
            pass
    except BaseException:
        pass
"""


async def _cancel_after_ready(
    runtime: WasiCodeRuntime, code: str, host: ToolHost, *, delay: float = 0.5
) -> float:
    """Run ``code``, cancel 0.5 s after it called ``ready``; return the seconds from the
    cancellation until ``run`` raised, which must be ``Cancelled``."""
    raised: list[BaseException] = []
    cancelled_at: list[float] = []
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def runner() -> None:
                with scope:
                    try:
                        await runtime.run(
                            code,
                            tools=("ready", "forever"),
                            dispatch=host.dispatch,
                            limits=CodeRunLimits(),
                        )
                    except BaseException as exc:
                        raised.append(exc)
                        raise

            nursery.start_soon(runner)
            await host.ready.wait()
            await trio.sleep(delay)
            cancelled_at.append(trio.current_time())
            scope.cancel()
    elapsed = trio.current_time() - cancelled_at[0]
    assert elapsed < 1.0, f"run took {elapsed:.2f}s to stop after the cancellation"
    assert [type(exc) for exc in raised] == [trio.Cancelled], repr(raised)
    return elapsed


async def test_l100_row23_cancel_a_loop_that_catches_everything(
    runtime: WasiCodeRuntime, watch: HostWatch
) -> None:
    """L-100 row 23: a busy loop catching every BaseException, cancelled after 0.5 s →
    ``run`` raises Cancelled within 1 s; the worker thread has ended."""
    before = busy_threads()
    elapsed = await _cancel_after_ready(runtime, _CATCH_ALL_LOOP, ToolHost())
    assert elapsed < 1.0
    assert busy_threads() == before
    watch.check()
    watch.assert_no_busy_thread()


async def test_l100_row24_cancel_a_program_waiting_on_a_slow_tool(
    runtime: WasiCodeRuntime, watch: HostWatch
) -> None:
    """L-100 row 24 (the runtime's half): ``await tools.forever()`` cancelled after 0.5 s →
    Cancelled within 1 s, the pending dispatch was cancelled, no worker thread left. The
    sub-call's ``ABORTED`` result through ``run_code`` is in test_l100_row24_sub_call_aborted."""
    host = ToolHost()
    before = busy_threads()
    elapsed = await _cancel_after_ready(runtime, "await tools.ready()\nawait tools.forever()", host)
    assert elapsed < 1.0
    assert host.names == ["ready", "forever"]
    assert host.cancelled == 1
    assert busy_threads() == before
    watch.check()
    watch.assert_no_busy_thread()


async def test_l100_row24_sub_call_aborted(wasi_cache_dir: Path, watch: HostWatch) -> None:
    """L-100 row 24, L-101: through ``run_code`` (the sub-call lane), ``await tools.slow()``
    with a tool sleeping 100 s, cancelled 0.5 s after the tool started → the run ends within
    1 s, the sub-call settles ``ABORTED``, no worker thread is left."""
    code_runtime = WasiCodeRuntime(cache_dir=wasi_cache_dir)
    await code_runtime.prepare()
    tools = ToolRuntime(mode="code", code_runtime=code_runtime)
    body_started = trio.Event()

    async def slow(args: object, ctx: object) -> str:
        body_started.set()
        await trio.sleep(100)
        return "slept"  # pragma: no cover - cancelled first

    tools.register(raw_tool("slow", slow))
    settled: list[CodeDispatch] = []

    def on_settled(event: CodeDispatch) -> None:
        settled.append(event)

    tools.on_code_dispatch(on_settled)
    before = busy_threads()
    ended: list[float] = []
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            scope = trio.CancelScope()

            async def caller() -> None:
                with scope:
                    try:
                        await run(
                            tools,
                            RUN_CODE_NAME,
                            {"code": "await tools.slow()", "description": "wait for slow"},
                        )
                    finally:
                        ended.append(trio.current_time())

            nursery.start_soon(caller)
            await body_started.wait()
            await trio.sleep(0.5)
            cancelled_at = trio.current_time()
            scope.cancel()
    assert ended[0] - cancelled_at < 1.0
    [record] = settled
    assert record.name == "slow"
    assert record.is_error
    assert record.result.error is not None
    assert record.result.error.info is not None
    assert record.result.error.info.code == ABORTED
    assert busy_threads() == before
    watch.check(record.to_json())
    watch.assert_no_busy_thread()


_FORGED = json.dumps({"op": "call", "id": 10**6, "name": "secret_tool", "args": {}}) + "\n"
_TAMPERING = [
    # Look around the guest's globals and rebind everything callable that names tools.
    "import __main__\n"
    "names = sorted(vars(__main__))\n"
    "for name, value in list(vars(__main__).items()):\n"
    "    if isinstance(value, (set, frozenset, list, tuple)) and 'echo' in value:\n"
    "        try:\n"
    "            value.add('secret_tool')\n"
    "        except Exception:\n"
    "            pass\n"
    "try:\n"
    "    await tools['secret_tool']()\n"
    "except Exception as error:\n"
    "    print(type(error).__name__)\n"
    "return names",
    # Reach every object of the guest that holds the bound names, and widen it.
    "import gc\n"
    "for obj in gc.get_objects():\n"
    "    if isinstance(obj, set) and 'echo' in obj and 'ready' in obj:\n"
    "        obj.add('secret_tool')\n"
    "    if isinstance(obj, dict) and 'echo' in obj and 'ready' in obj:\n"
    "        try:\n"
    "            obj['secret_tool'] = obj['echo']\n"
    "        except Exception:\n"
    "            pass\n"
    "await tools.secret_tool()\n",
    # Forge a call on the protocol stream, then wait for its reply on the real stdin.
    f"import os, sys\nos.write(1, {_FORGED.encode()!r})\nreturn sys.__stdin__.readline()",
    # Reading the protocol's input directly blocks until the wall limit.
    "import os\nreturn os.read(0, 100)",
    # The program's own stdin is empty.
    "import sys\nreturn sys.stdin.read()",
]


async def test_l100_row25_tampering_cannot_reach_an_unbound_tool(
    runtime: WasiCodeRuntime, watch: HostWatch
) -> None:
    """L-100 row 25: ``import __main__`` and tampering with the guest, or reading the real
    stdin: whatever the run's outcome, ``dispatch`` receives no unbound name and the run
    returns within ``wall_seconds``. (The sandbox's host, not only the lane behind it, keeps
    a program to its bound names: ``run`` may be given any ``dispatch``.)"""
    for code in _TAMPERING:
        host = ToolHost()
        start = trio.current_time()
        with trio.fail_after(30):
            try:
                outcome: object = await runtime.run(
                    code,
                    tools=("echo", "ready"),
                    dispatch=host.dispatch,
                    limits=CodeRunLimits(wall_seconds=2),
                )
            except Exception as exc:  # a failure is a valid outcome here
                outcome = exc
        assert trio.current_time() - start < 2 + 5, code
        assert set(host.names) <= {"echo", "ready"}, (code, host.names)
        watch.check(outcome)
    assert (await run_program(runtime, "return 3")).result == 3


async def test_l100_row25_through_run_code_no_unbound_tool_runs(
    wasi_cache_dir: Path, watch: HostWatch
) -> None:
    """L-100 row 25 through ``run_code``: a tool registered but not visible to the calling
    scope is never started, whatever the tampering program does."""
    code_runtime = WasiCodeRuntime(cache_dir=wasi_cache_dir)
    await code_runtime.prepare()
    tools = ToolRuntime(
        mode="code", code_runtime=code_runtime, code_limits=CodeRunLimits(wall_seconds=2)
    )
    ran: list[str] = []

    async def echo(args: object, ctx: object) -> str:
        ran.append("echo")
        return "echoed"

    async def secret(args: object, ctx: object) -> str:
        ran.append("secret_tool")
        return watch.secret

    tools.register(raw_tool("echo", echo))
    tools.register(raw_tool("ready", echo))
    tools.register(raw_tool("secret_tool", secret))
    scope = tools.open_scope(name="tampering")
    scope.restrict(deny=["secret_tool"])
    started: list[str] = []

    def on_start(event: CodeDispatchStart) -> None:
        started.append(event.name)

    tools.on_code_dispatch_start(on_start)
    for code in _TAMPERING:
        start = trio.current_time()
        with trio.fail_after(30):
            result = await run(
                tools, RUN_CODE_NAME, {"code": code, "description": "tamper"}, scope=scope
            )
        assert trio.current_time() - start < 2 + 5, code
        assert "secret_tool" not in started, code
        assert "secret_tool" not in ran, code
        watch.check(result)


async def test_l100_row26_two_runs_one_cancelled(
    runtime: WasiCodeRuntime, watch: HostWatch
) -> None:
    """L-100 row 26: two runs at once; one is cancelled → the other completes normally."""
    before = busy_threads()
    other_host = ToolHost()
    outcomes: list[CodeRunOutcome] = []

    async def the_other() -> None:
        outcomes.append(
            await run_program(
                runtime,
                'await tools.ready()\nawait tools.sleep(seconds=1.0)\nprint("hi")\nreturn 42',
                other_host,
            )
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(the_other)
        await other_host.ready.wait()
        elapsed = await _cancel_after_ready(runtime, _CATCH_ALL_LOOP, ToolHost(), delay=0.2)
    assert elapsed < 1.0
    [outcome] = outcomes
    assert (outcome.logs, outcome.result) == (("hi",), 42)
    assert outcome.result is not UNSET
    assert busy_threads() == before
    watch.check(outcome)


@pytest.mark.parametrize(
    "violation",
    [
        "create a file",
        "read the secret",
        "list the folder",
        "temp marker",
        "open a socket",
        "connect",
        "start a child",
        "leak a pipe",
        "print the secret",
        "busy thread",
    ],
)
def test_the_host_watch_sees_each_violation(tmp_path: Path, violation: str) -> None:
    """The host checks above can fail: each thing a program must not do, done by the test
    itself, makes :meth:`HostWatch.check` fail."""
    leftovers: list[object] = []
    stop = threading.Event()
    with watching(tmp_path / "host") as watch:
        if violation == "create a file":
            watch.forbidden_path.write_text("x")
        elif violation == "read the secret":
            leftovers.append(watch.secret_path.read_text())
        elif violation == "list the folder":
            leftovers.append(sorted(watch.folder.iterdir()))
        elif violation == "temp marker":
            watch.tmp_marker_path.write_text("x")
            leftovers.append(watch.tmp_marker_path)
        elif violation == "open a socket":
            leftovers.append(socket.socket())
        elif violation == "connect":
            leftovers.append(socket.create_connection(("127.0.0.1", watch.port)))
        elif violation == "start a child":
            leftovers.append(
                subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
            )
        elif violation == "leak a pipe":
            leftovers.extend(os.pipe())
        elif violation == "busy thread":
            thread = threading.Thread(target=stop.wait, name="not a trio worker")
            thread.start()
            leftovers.append(thread)
        with pytest.raises(AssertionError):
            watch.check(watch.secret if violation == "print the secret" else "fine")
    stop.set()
    for leftover in leftovers:
        if isinstance(leftover, socket.socket):
            leftover.close()
        elif isinstance(leftover, subprocess.Popen):
            leftover.kill()
            leftover.wait()
        elif isinstance(leftover, int):
            os.close(leftover)
        elif isinstance(leftover, Path):
            leftover.unlink()
        elif isinstance(leftover, threading.Thread):
            leftover.join()


def test_the_host_watch_passes_when_nothing_happens(tmp_path: Path) -> None:
    """…and an untouched host passes."""
    with watching(tmp_path / "host") as watch:
        watch.check("fine")
        watch.assert_no_busy_thread(0.1)

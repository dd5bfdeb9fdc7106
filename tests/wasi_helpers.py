"""Shared pieces of the WASI sandbox tests: a small tool host and a watch on the host process.

:class:`ToolHost` is the ``dispatch`` a test hands to ``WasiCodeRuntime.run``: a handful of
tools that echo, sleep, fail or park, recording every call (and the peak of overlapping
calls). :class:`HostWatch` snapshots what a sandboxed program must not touch in the host
process — files and reads in the test's own folder (inotify on Linux), sockets, pipes, child
processes, busy threads, the environment — and :meth:`HostWatch.check` asserts that nothing
changed and that no secret reached the program's output.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs
import pytest
import trio

from dsh_tools import CodeRunFailedError
from dsh_tools.code import CodeRunLimits, CodeRunOutcome, ToolCallError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from dsh_tools.code import WasiCodeRuntime

__all__ = [
    "DEFAULT_TOOLS",
    "HostWatch",
    "ToolHost",
    "busy_threads",
    "failure",
    "inside",
    "run_program",
]

#: The tools a :class:`ToolHost` serves, bound in most runs.
DEFAULT_TOOLS: Final = ("echo", "sleep", "fail", "forever", "ready", "mark")


@attrs.define(eq=False)
class ToolHost:
    """A trio ``dispatch`` over a few test tools, recording what the program asked for.

    ``echo`` returns its arguments; ``sleep`` sleeps ``seconds`` then returns them; ``fail``
    raises :class:`ToolCallError`; ``forever`` parks until cancelled; ``ready`` sets
    :attr:`ready` (a program announces it is running); ``mark`` records the host time.
    """

    calls: list[tuple[str, object]] = attrs.field(factory=list)
    marks: list[float] = attrs.field(factory=list)
    ready: trio.Event = attrs.field(factory=trio.Event)
    active: int = 0
    peak: int = 0
    cancelled: int = 0

    async def dispatch(self, name: str, args: object) -> Any:
        """Serve one tool call of the program."""
        self.calls.append((name, args))
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            return await self._serve(name, args)
        except trio.Cancelled:
            self.cancelled += 1
            raise
        finally:
            self.active -= 1

    async def _serve(self, name: str, args: object) -> Any:
        if name == "echo":
            return args
        if name == "sleep":
            assert isinstance(args, dict)
            await trio.sleep(float(args["seconds"]))
            return args
        if name == "fail":
            raise ToolCallError(name, "the tool failed on purpose")
        if name == "forever":
            await trio.sleep_forever()
        if name == "ready":
            self.ready.set()
            return None
        if name == "mark":
            self.marks.append(trio.current_time())
            return len(self.marks)
        raise ToolCallError(name, f"no tool named {name!r} on this host")

    @property
    def names(self) -> list[str]:
        """The names of the calls made, in order."""
        return [name for name, _ in self.calls]


def inside(*statements: str) -> str:
    """A program that runs each statement, catching what it raises; returns the class names.

    The result is a list with one entry per statement: the class name of the exception it
    raised, or ``"no exception"``.
    """
    lines = ["names = []"]
    for statement in statements:
        lines += [
            "try:",
            f"    {statement}",
            "    names.append('no exception')",
            "except BaseException as error:",
            "    names.append(type(error).__name__)",
        ]
    lines.append("return names")
    return "\n".join(lines)


async def run_program(
    runtime: WasiCodeRuntime,
    code: str,
    host: ToolHost | None = None,
    *,
    limits: CodeRunLimits | None = None,
    tools: tuple[str, ...] = DEFAULT_TOOLS,
    bound: float = 60.0,
) -> CodeRunOutcome:
    """Run ``code``; fail the test rather than hang if the run takes longer than ``bound``."""
    host = host if host is not None else ToolHost()
    with trio.fail_after(bound):
        return await runtime.run(
            code, tools=tools, dispatch=host.dispatch, limits=limits or CodeRunLimits()
        )


async def failure(
    runtime: WasiCodeRuntime,
    code: str,
    host: ToolHost | None = None,
    *,
    limits: CodeRunLimits | None = None,
    bound: float = 60.0,
) -> CodeRunFailedError:
    """Run ``code``, which must fail; return the ``CodeRunFailedError``."""
    with pytest.raises(CodeRunFailedError) as caught:
        await run_program(runtime, code, host, limits=limits, bound=bound)
    return caught.value


def busy_threads() -> set[threading.Thread]:
    """The threads other than the main one that are not idle trio workers.

    A trio worker thread carries its default name ``Trio thread <n>`` only while it waits in
    trio's cache; while it runs a job it carries the job's name.
    """
    return {
        thread
        for thread in threading.enumerate()
        if thread is not threading.main_thread()
        and not (thread.name.startswith("Trio thread ") and thread.daemon)
    }


#: The snapshot entry that counts the process's open sockets and pipes.
DESCRIPTORS = "open sockets and pipes"


def _grew(key: str, before: object, after: object) -> bool:
    """Whether a snapshot entry changed; descriptors count only when more are open."""
    if key == DESCRIPTORS and isinstance(before, dict) and isinstance(after, dict):
        return any(count > before.get(kind, 0) for kind, count in after.items())
    return before != after


def _fd_kinds() -> dict[str, int]:
    kinds: dict[str, int] = {}
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            target = os.readlink(f"/proc/self/fd/{fd}")
            kind = target.split(":", 1)[0] if target.startswith(("socket:", "pipe:")) else "file"
            kinds[kind] = kinds.get(kind, 0) + 1
    return kinds


def _children() -> set[int]:
    pids: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):
            text = Path(f"/proc/self/task/{task}/children").read_text(encoding="ascii")
            pids.update(int(pid) for pid in text.split())
    return pids


def _thread_cpu_ticks() -> dict[str, int]:
    ticks: dict[str, int] = {}
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/self/task/{task}/stat").read_text(encoding="ascii")
            fields = stat.rsplit(")", 1)[1].split()
            ticks[task] = int(fields[11]) + int(fields[12])  # utime + stime
    return ticks


def _tree(root: Path) -> dict[str, tuple[int, float]]:
    return {
        str(path.relative_to(root)): (path.stat().st_size, path.stat().st_mtime)
        for path in sorted(root.rglob("*"))
    }


_IN_ACCESS: Final = 0x001
_IN_MODIFY: Final = 0x002
_IN_OPEN: Final = 0x020
_IN_CREATE: Final = 0x100
_IN_NONBLOCK: Final = os.O_NONBLOCK
_IN_CLOEXEC: Final = 0o2000000
_EVENT: Final = struct.Struct("iIII")


class _Inotify:
    """Opens, reads and creations of files in one folder, seen by the kernel (Linux)."""

    def __init__(self, folder: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._fd: int = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if self._fd < 0:  # pragma: no cover - inotify exhausted on this machine
            raise OSError(ctypes.get_errno(), "inotify_init1")
        mask = _IN_ACCESS | _IN_MODIFY | _IN_OPEN | _IN_CREATE
        if libc.inotify_add_watch(self._fd, os.fsencode(folder), mask) < 0:
            os.close(self._fd)  # pragma: no cover - see above
            raise OSError(ctypes.get_errno(), "inotify_add_watch")  # pragma: no cover

    def events(self) -> list[tuple[int, str]]:
        """(mask, file name) of the events since the last call; ``""`` names the folder."""
        found: list[tuple[int, str]] = []
        while True:
            try:
                data = os.read(self._fd, 65536)
            except BlockingIOError:
                return found
            offset = 0
            while offset < len(data):
                _, mask, _, length = _EVENT.unpack_from(data, offset)
                offset += _EVENT.size
                name = data[offset : offset + length].rstrip(b"\0").decode()
                offset += length
                found.append((mask, name))

    def close(self) -> None:
        os.close(self._fd)


@attrs.define(eq=False)
class HostWatch:
    """What a sandboxed program must leave alone, snapshotted before the run.

    The test's own folder holds a secret file (whose opening the kernel reports through
    inotify); the environment holds a secret variable; a TCP listener on 127.0.0.1 counts
    connections. :meth:`check` compares the host with the snapshot.
    """

    folder: Path
    secret: str = attrs.field(factory=lambda: "secret-" + secrets.token_hex(16))
    env_name: str = attrs.field(factory=lambda: "DSH_TRIO_TEST_SECRET_" + secrets.token_hex(4))
    marker: str = attrs.field(factory=lambda: "dsh-trio-wasi-" + secrets.token_hex(8))
    listener: socket.socket = attrs.field(init=False)
    _before: dict[str, object] = attrs.field(init=False, factory=dict)
    _inotify: _Inotify | None = attrs.field(init=False, default=None)

    @property
    def secret_path(self) -> Path:
        """A host file holding :attr:`secret`."""
        return self.folder / "secret.txt"

    @property
    def forbidden_path(self) -> Path:
        """A host path inside the test's folder that no program may create."""
        return self.folder / "created-by-the-program"

    @property
    def tmp_marker_path(self) -> Path:
        """A path in the system temp folder that no program may create."""
        return Path(tempfile.gettempdir()) / self.marker

    @property
    def port(self) -> int:
        """The port of the test's listener on 127.0.0.1."""
        port: int = self.listener.getsockname()[1]
        return port

    def __attrs_post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.secret_path.write_text(self.secret, encoding="utf-8")
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.listener.setblocking(False)
        os.environ[self.env_name] = self.secret
        self._before = self._snapshot()
        if sys.platform == "linux":
            self._inotify = _Inotify(self.folder)

    def _snapshot(self) -> dict[str, object]:
        return {
            "files in the test's folder": _tree(self.folder),
            "files in the working directory": sorted(os.listdir(".")),
            DESCRIPTORS: {k: v for k, v in _fd_kinds().items() if k in {"socket", "pipe"}},
            "child processes": _children(),
            "busy threads": busy_threads(),
        }

    def check(self, *texts: object) -> None:
        """Assert the host is as it was, and that no secret appears in ``texts``.

        wasmtime reads a guest's stdin in a background thread of its own, which closes its
        copy of the pipe only once that read returns, just after the run: the descriptors
        get up to two seconds to go back to what they were; a leaked one never does. Fewer
        descriptors than before is no change of the program's: an earlier test's pipe copy
        closing late does that, and a guest cannot close the host's descriptors.
        """
        events = self._inotify.events() if self._inotify is not None else []
        assert events == [], f"the program touched the test's folder: {events}"
        deadline = time.monotonic() + 2.0
        while True:
            after = self._snapshot()
            if self._inotify is not None:
                self._inotify.events()  # the snapshot's own listing of the folder
            changed = {k: (v, after[k]) for k, v in self._before.items() if _grew(k, v, after[k])}
            if not changed or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert changed == {}, f"the host changed (before, after): {changed}"
        assert not self.tmp_marker_path.exists()
        with pytest.raises(BlockingIOError):
            self.listener.accept()  # nobody connected
        for text in texts:
            assert self.secret not in repr(text)
        assert os.environ[self.env_name] == self.secret

    def assert_no_busy_thread(self, seconds: float = 0.3) -> None:
        """No thread of this process keeps using CPU (a guest left running would)."""
        first = _thread_cpu_ticks()
        time.sleep(seconds)
        second = _thread_cpu_ticks()
        me = str(threading.get_native_id())
        spinning = {
            task: second[task] - first[task]
            for task in second.keys() & first.keys()
            if task != me and second[task] - first[task] > seconds * 100 / 4
        }
        assert spinning == {}, f"threads still busy after the run: {spinning}"

    def close(self) -> None:
        """Stop watching; remove the secret variable."""
        if self._inotify is not None:
            self._inotify.close()
        self.listener.close()
        os.environ.pop(self.env_name, None)


@contextlib.contextmanager
def watching(folder: Path) -> Iterator[HostWatch]:
    """A :class:`HostWatch` on ``folder``, closed afterwards."""
    watch = HostWatch(folder)
    try:
        yield watch
    finally:
        watch.close()

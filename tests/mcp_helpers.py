"""Shared helpers for the tests of ``dsh_tools.mcp``: the test servers and what they saw.

The servers are real MCP servers written with the ``mcp`` SDK (``tests/data/``), started
by the tests over stdio or streamable HTTP on 127.0.0.1, and stopped by them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import trio
from mcp import StdioServerParameters

if TYPE_CHECKING:
    from collections.abc import Iterator

DATA = Path(__file__).resolve().parent / "data"
DEMO = DATA / "mcp_demo_server.py"
LOWLEVEL = DATA / "mcp_lowlevel_server.py"
DEMO_TOOLS = [
    "add", "write_note", "slow", "boom", "img", "point", "crash", "mutate", "signal", "weird",
]  # fmt: skip
#: Bound on every wait for another process (a server starting, a cancellation arriving).
PROCESS_WAIT = 20.0


def stdio(script: Path, events: Path | None = None, **env: str) -> StdioServerParameters:
    """Parameters that start ``script`` with this interpreter, writing events to ``events``."""
    extra = dict(env)
    if events is not None:
        extra["DEMO_EVENTS"] = str(events)
    return StdioServerParameters(command=sys.executable, args=[str(script)], env=extra)


class Events:
    """The lines a demo server appended to its events file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.start = 0

    def lines(self) -> list[str]:
        """Every line written since :meth:`mark`."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        return text.splitlines()[self.start :]

    def mark(self) -> None:
        """Forget the lines written so far."""
        self.start += len(self.lines())

    async def wait_for(self, line: str) -> list[str]:
        """Wait (bounded) until ``line`` has been written; return the lines so far."""
        with trio.fail_after(PROCESS_WAIT):
            while line not in self.lines():
                await trio.sleep(0.01)  # another process writes it: poll
        return self.lines()


def server_pid(events: Events) -> int:
    """The process id the server wrote at start."""
    everything = events.path.read_text(encoding="utf-8").splitlines()
    return int(next(line for line in everything if line.startswith("pid "))[4:])


def process_gone(pid: int) -> bool:
    """Whether no process ``pid`` exists any more (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().split(") ", 1)[1].startswith("Z")
    except FileNotFoundError:
        return True


class HttpDemo:
    """A demo server process serving streamable HTTP on 127.0.0.1 (an ephemeral port)."""

    def __init__(self, workdir: Path) -> None:
        self.events = Events(workdir / "events.txt")
        port_file = workdir / "port"
        env = dict(os.environ, DEMO_EVENTS=str(self.events.path))
        self.process = subprocess.Popen(
            [sys.executable, str(DEMO), "--http", str(port_file)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + PROCESS_WAIT
        while not port_file.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the HTTP demo server did not start")
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{port_file.read_text(encoding='utf-8')}/mcp"

    def stop(self) -> None:
        """Stop the process (terminate, then kill if it does not exit in time)."""
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - only a wedged server
            self.process.kill()
            self.process.wait()


def http_demo(workdir: Path) -> Iterator[HttpDemo]:
    """Run a demo HTTP server for the duration of a fixture."""
    server = HttpDemo(workdir)
    try:
        yield server
    finally:
        server.stop()

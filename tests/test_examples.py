"""The shipped example tools (``dsh_tools.examples``) and the quickstart script."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsh_tools import ExecutionMode, ToolCall, ToolResult, ToolRuntime
from dsh_tools.examples import file_tools

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def runtime(tmp_path: Path) -> ToolRuntime:
    runtime = ToolRuntime()
    for definition in file_tools(tmp_path / "ws"):
        runtime.register(definition)
    return runtime


async def run(runtime: ToolRuntime, name: str, **arguments: object) -> ToolResult:
    return await runtime.execute(ToolCall(call_id="c", name=name, arguments=arguments))


def test_reads_are_parallel_safe_and_writes_exclusive(runtime: ToolRuntime) -> None:
    modes = {
        schema.name: runtime.execution_mode(ToolCall(call_id="c", name=schema.name))
        for schema in runtime.schemas()
    }
    assert modes == {
        "list_dir": ExecutionMode.PARALLEL,
        "read_file": ExecutionMode.PARALLEL,
        "stat": ExecutionMode.PARALLEL,
        "write_file": ExecutionMode.EXCLUSIVE,
        "delete_file": ExecutionMode.EXCLUSIVE,
    }


async def test_write_read_list_stat_delete_round_trip(runtime: ToolRuntime) -> None:
    written = await run(runtime, "write_file", path="d/a.txt", content="héllo")
    assert written.value == {"path": "d/a.txt", "bytes_written": 6, "mode": "overwrite"}
    await run(runtime, "write_file", path="d/a.txt", content="!", mode="append")
    assert (await run(runtime, "read_file", path="d/a.txt")).value == "héllo!"
    assert (await run(runtime, "read_file", path="d/a.txt", max_bytes=2)).value == "h\ufffd"
    assert (await run(runtime, "list_dir")).value == ("d/",)
    directory = (await run(runtime, "stat", path="d")).value
    assert (directory["path"], directory["kind"]) == ("d", "directory")
    assert (await run(runtime, "stat", path="d/a.txt")).value == {
        "path": "d/a.txt",
        "kind": "file",
        "size": 7,
    }
    assert (await run(runtime, "delete_file", path="d/a.txt")).value == "deleted d/a.txt"
    assert (await run(runtime, "list_dir", path="d")).value == ()


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "d/../../x"])
async def test_paths_outside_the_workspace_fail_with_a_stable_code(
    runtime: ToolRuntime, path: str
) -> None:
    result = await run(runtime, "read_file", path=path)
    assert result.error is not None
    assert result.error.message == f'path "{path}" is outside the workspace'
    assert result.error.info is not None
    assert result.error.info.code == "PATH_OUTSIDE_WORKSPACE"


async def test_symlink_out_of_the_workspace_is_refused(
    runtime: ToolRuntime, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("s")
    (tmp_path / "ws" / "link").symlink_to(tmp_path / "secret.txt")
    result = await run(runtime, "read_file", path="link")
    assert result.error is not None
    assert result.error.message == 'path "link" is outside the workspace'


async def test_os_errors_name_the_workspace_path_not_the_host_path(
    runtime: ToolRuntime, tmp_path: Path
) -> None:
    for name in ("read_file", "stat", "delete_file", "list_dir"):
        result = await run(runtime, name, path="missing")
        assert result.error is not None
        assert result.error.message == 'No such file or directory: "missing"', name
        assert str(tmp_path) not in result.error.message
    await run(runtime, "write_file", path="f", content="x")
    result = await run(runtime, "write_file", path="f/child", content="x")
    assert result.error is not None
    assert result.error.info is not None
    assert result.error.info.code == "FILE_ERROR"


async def test_bad_model_arguments_are_readable(runtime: ToolRuntime) -> None:
    result = await run(runtime, "write_file", path=3, mode="truncate")
    assert result.error is not None
    assert result.error.message == (
        'invalid arguments: missing required property "content"; "path" must be a string; '
        '"mode" must be one of ["overwrite","append"]'
    )
    negative = await run(runtime, "read_file", path="x", max_bytes=-1)
    assert negative.error is not None
    assert negative.error.message == "max_bytes must not be negative"


def test_quickstart_runs_and_shows_every_outcome() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    out = proc.stdout
    for expected in [
        '"text": "remember the milk"',
        'Error: \\"key.secret\\" is a secret',
        "Error: this agent is read-only",
        "PATH_OUTSIDE_WORKSPACE",
        "INVALID_ARGS",
        'Error: unknown tool \\"slow\\"',
        "TOOL_TIMEOUT",
        '"code": "ABORTED"',
        "ABORTED_BEFORE_DISPATCH",
    ]:
        assert expected in out, expected


TURN_EXAMPLE = ROOT / "examples" / "turn_timeout_and_ctrl_c.py"


def test_readme_shows_the_turn_example_exactly() -> None:
    """The README's "Bounding a turn and Ctrl-C" block is the example file, character for
    character, so the snippet a reader copies is the one the next test runs."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Bounding a turn and Ctrl-C\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```python\n", 1)[1].split("```\n", 1)[0]
    assert block == TURN_EXAMPLE.read_text(encoding="utf-8")
    assert "trio.move_on_after" in section
    assert "`batch.outcome` stays `None`" in section


def test_turn_example_times_out_and_aborts_on_ctrl_c() -> None:
    """The turn example, run as a user would: part 1 ends by its ``timeout=``, part 2 by a
    real SIGINT sent once it says it is running. Finished work is kept both times and the
    aborted call's text names the reason (a real process and signal: real time)."""
    with subprocess.Popen(
        [sys.executable, str(TURN_EXAMPLE)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        first = second = ""
        try:
            for line in proc.stdout:
                if first.endswith("running; press Ctrl-C to abort the turn\n"):
                    second += line
                    continue
                first += line
                if line.startswith("running; press Ctrl-C"):
                    # The fast lookup (0.05 s) has long finished; the crawl (60 s) has not.
                    time.sleep(1)
                    proc.send_signal(signal.SIGINT)
            proc.wait(timeout=30)
            err = proc.stderr.read()
        finally:
            proc.kill()
    assert proc.returncode == 0, err
    assert "'text': 'notes on trio'" in first
    assert "'message': 'tool call aborted: batch timeout after 0.5 s'" in first
    assert "'code': 'ABORTED'" in first
    assert "abort reason: batch timeout after 0.5 s\n" in first
    assert "'text': 'notes on trio'" in second
    assert "'message': 'tool call aborted: user pressed Ctrl-C'" in second
    assert second.endswith("abort reason: user pressed Ctrl-C\n")
    assert err == ""

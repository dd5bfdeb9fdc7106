"""The shipped example tools (``dsh_tools.examples``) and the quickstart script."""

from __future__ import annotations

import subprocess
import sys
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

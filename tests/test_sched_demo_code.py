"""``python -m dsh_sched demo --code-mode``: one ``run_code`` program over the example tools.

The scripted model sends one ``run_code`` call. Its program gathers three parallel-safe
reads, catches a failing read as ``ToolCallError``, makes an exclusive write and lists the
workspace. Checked here: the sub-calls are shown live under their ``run_code`` call, drawn
as rows nested under its row in the timeline, start and commit in the program's order (the
write alone, as a barrier of the run's own sub-calls), and the model receives the durable
content of the run (code-mode §3.2, §5.3, §5.4).

The scripted runtime plays the program in the trio task, so the virtual clock pins every
time; the trusted runtime runs the real program text (in a worker thread).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

import dsh_sched.__main__ as cli
from dsh_sched import read_session_log
from dsh_sched._demo import PlainConsole, run_demo
from dsh_sched._demo._script import CODE_PROGRAM, default_code_runtime, demo_code_calls
from dsh_sched.testing import TimelineRow, check_trace, timeline_rows
from dsh_tools import ExecutionMode, thaw_json
from dsh_tools.code import (
    CodeRunLimits,
    CodeRunOutcome,
    ToolCallError,
    TrustedCodeRuntime,
    WasiCodeRuntime,
)
from dsh_tools.testing import ScriptedCodeRuntime

if TYPE_CHECKING:
    from pathlib import Path

    from dsh_sched._demo import DemoReport
    from dsh_tools.code import Dispatch

SVG = "{http://www.w3.org/2000/svg}"
SUB_NAMES = ["read_file", "read_file", "fetch_url", "read_file", "write_file", "list_dir"]
MISSING = 'No such file or directory: "missing.txt"'


async def play_the_program(
    dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits
) -> CodeRunOutcome:
    """What CODE_PROGRAM does, played in the trio task (deterministic on the virtual clock)."""
    values: list[Any] = [None, None, None]

    async def one(
        slot: int, name: str, args: dict[str, str], *, task_status: trio.TaskStatus[None]
    ) -> None:
        task_status.started()
        # dispatch accepts the call before its first checkpoint, so the calls are accepted
        # in the order they are started, as asyncio.gather submits them in the program.
        values[slot] = await dispatch(name, args)

    async with trio.open_nursery() as nursery:
        await nursery.start(one, 0, "read_file", {"path": "notes.md"})
        await nursery.start(one, 1, "read_file", {"path": "data/config.json"})
        await nursery.start(one, 2, "fetch_url", {"url": "https://example.org/changelog"})
    notes, config, changelog = values
    logs = [f"notes.md has {len(notes.splitlines())} lines; the changelog says: {changelog}"]
    try:
        await dispatch("read_file", {"path": "missing.txt"})
    except ToolCallError as error:
        logs.append(f"{error.tool_name} failed: {error}")
    receipt = await dispatch(
        "write_file", {"path": "summary.md", "content": f"# Summary\n\n{changelog}\n"}
    )
    files = await dispatch("list_dir", {"path": "."})
    result = {
        "written": thaw_json(receipt),
        "files": thaw_json(files),
        "max_parallel": json.loads(config)["max_parallel"],
    }
    return CodeRunOutcome(logs=logs, result=result)


async def code_demo(tmp_path: Path, code_runtime: Any) -> tuple[DemoReport, str]:
    stream = io.StringIO()
    report = await run_demo(
        out_dir=tmp_path / "out",
        workspace=tmp_path / "ws",
        console=PlainConsole(stream),
        code_mode=True,
        code_runtime=code_runtime,
    )
    return report, stream.getvalue()


EXPECTED_TEXT = "\n".join(
    [
        "notes.md has 4 lines; the changelog says: changelog: 0.1.0 ships the batch scheduler",
        f"read_file failed: {MISSING}",
        "{",
        '  "written": {',
        '    "path": "summary.md",',
        '    "bytes_written": 54,',
        '    "mode": "overwrite"',
        "  },",
        '  "files": [',
        '    "data/",',
        '    "notes.md",',
        '    "secrets.env",',
        '    "summary.md"',
        "  ],",
        '  "max_parallel": 10',
        "}",
    ]
)


def sub_rows(report: DemoReport) -> list[TimelineRow]:
    return [row for row in report.rows if row.parent_call_id is not None]


async def test_the_sub_calls_run_in_the_programs_order_on_the_virtual_clock(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    scripted = ScriptedCodeRuntime(play_the_program)
    report, _ = await code_demo(tmp_path, scripted)
    assert scripted.codes == [CODE_PROGRAM]
    (committed,) = report.outcome.results
    assert committed.call.name == "run_code"
    assert not committed.result.is_error
    assert "\n".join(block.to_json()["text"] for block in committed.result.content) == (
        EXPECTED_TEXT
    )
    # One row for run_code, then its six sub-calls nested under it, in the order they started.
    assert [row.call_id for row in report.rows] == [
        "call_00",
        *(f"call_00:code:{n}" for n in range(1, 7)),
    ]
    subs = sub_rows(report)
    assert [row.name for row in subs] == SUB_NAMES
    assert {row.index for row in report.rows} == {0}
    assert {row.parent_call_id for row in subs} == {"call_00"}
    assert [row.mode for row in subs] == [
        ExecutionMode.PARALLEL,
        ExecutionMode.PARALLEL,
        ExecutionMode.PARALLEL,
        ExecutionMode.PARALLEL,
        ExecutionMode.EXCLUSIVE,
        ExecutionMode.PARALLEL,
    ]
    assert [row.status for row in subs] == ["ok", "ok", "ok", "error", "ok", "ok"]
    assert subs[3].summary == f"Error: {MISSING}"
    # The three gathered calls start together; fetch_url is the slow one (1.2 s).
    assert [row.started for row in subs[:3]] == [0.0, 0.0, 0.0]
    fetch = subs[2]
    assert fetch.body is not None
    assert fetch.body[1] == pytest.approx(1.2)
    # Commits follow acceptance order, and nothing starts while the write holds the run.
    commits = [row.committed for row in subs]
    assert all(c is not None for c in commits)
    assert commits == sorted(commits)  # type: ignore[type-var]
    write = subs[4]
    assert write.body is not None
    assert write.committed is not None
    for other in subs:
        if other is not write and other.body is not None:
            assert other.body[1] <= write.body[0] or other.body[0] >= write.committed
    # The run_code row shows the program's description, and its run as its body: from
    # before the first sub-call started to after the last one committed.
    assert report.rows[0].arguments == "program: Read the notes, fetch, write a summary"
    run = report.rows[0].body
    assert run is not None
    assert run[0] <= subs[0].started
    assert subs[-1].committed is not None
    assert run[1] >= subs[-1].committed
    # The run_code call's own row commits after its last sub-call.
    assert report.rows[0].committed is not None
    assert subs[-1].committed is not None
    assert report.rows[0].committed >= subs[-1].committed
    # The batch itself still keeps every promise of the scheduler's trace.
    check_trace(report.events, max_parallel=10, outcome=report.outcome)
    assert timeline_rows(report.events, origin=0.0) == report.rows
    # The session log holds the model's one call: sub-calls are not model calls.
    logged = read_session_log(report.session_log)
    assert [entry.name for entry in logged] == ["run_code"]


async def test_the_console_shows_sub_calls_live_and_the_models_text(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    report, text = await code_demo(tmp_path, ScriptedCodeRuntime(play_the_program))
    lines = text.splitlines()
    assert lines[0] == (
        "dsh_sched demo: one run_code program (Code Mode) from the scripted model, max_parallel=10"
    )
    assert (
        "  0.000s  #0  ↳ fetch_url call_00:code:3 started  parallel  "
        '{"url": "https://example.org/changelog"}' in lines
    )
    # The failing read starts once the gather is over, when fetch_url has committed.
    assert any(
        line.endswith(f"#0  ↳ read_file call_00:code:4 committed: error ({MISSING})")
        for line in lines
    )
    assert any("↳ write_file call_00:code:5 started  exclusive" in line for line in lines)
    start = lines.index("What the model receives for call_00 (run_code's content):")
    assert lines[start + 1 : start + 1 + len(EXPECTED_TEXT.splitlines())] == [
        "  " + line for line in EXPECTED_TEXT.splitlines()
    ]
    assert lines[-3].startswith("1 call in ")
    # Bodies: the sub-calls' (the run_code row's span, the program's run, is not added).
    subs = [row for row in report.rows if row.parent_call_id is not None]
    busy = sum(row.body[1] - row.body[0] for row in subs if row.body is not None)
    assert f"(bodies ran {busy:.2f} s in total, max_parallel=10)" in lines[-3]
    assert "; 6 Code Mode sub-calls; 1 context message delivered" in lines[-3]


async def test_the_timeline_nests_the_sub_calls_under_run_code(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    report, _ = await code_demo(tmp_path, ScriptedCodeRuntime(play_the_program))
    root = ET.parse(report.timeline).getroot()
    rows = [g for g in root.iter(f"{SVG}g") if "row" in g.get("class", "").split()]
    assert [g.get("data-call-id") for g in rows] == [row.call_id for row in report.rows]
    assert [g.get("data-parent-call-id") for g in rows] == [None, *["call_00"] * 6]
    labels = [next(g.iter(f"{SVG}text")).text or "" for g in rows]
    assert labels[0] == "#0  run_code program: Read the notes, fetch, …"
    assert [label.split()[1] for label in labels[1:]] == SUB_NAMES
    assert all(label.lstrip().startswith("↳") for label in labels[1:])
    # Two barriers: run_code's over every row, the write's over the run's sub-call rows only.
    barriers = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "barrier"]
    heights = sorted(float(r.get("height", "0")) for r in barriers[1:])  # [0] is the legend
    assert heights == [6 * 24.0, 7 * 24.0]
    title = "dsh_sched demo, Code Mode: one run_code call and its 6 sub-calls"
    assert f"<title>{title}</title>" in report.timeline.read_text(encoding="utf-8")


async def test_the_real_program_under_the_trusted_runtime(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    report, _ = await code_demo(tmp_path, TrustedCodeRuntime())
    (committed,) = report.outcome.results
    assert not committed.result.is_error
    assert "\n".join(block.to_json()["text"] for block in committed.result.content) == (
        EXPECTED_TEXT
    )
    assert [row.name for row in sub_rows(report)] == SUB_NAMES
    assert (report.workspace / "summary.md").read_text(encoding="utf-8") == (
        "# Summary\n\nchangelog: 0.1.0 ships the batch scheduler\n"
    )


def test_the_demo_call_is_one_run_code_call() -> None:
    (call,) = demo_code_calls()
    assert (call.call_id, call.name) == ("call_00", "run_code")
    assert isinstance(call.arguments, str)
    arguments = json.loads(call.arguments)
    assert arguments["code"] == CODE_PROGRAM
    assert arguments["description"].strip()


def test_main_code_mode_prints_the_runtime_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "dsh_sched._demo._script.default_code_runtime",
        lambda: (TrustedCodeRuntime(), "note: no sandbox here"),
    )
    clock = trio.testing.MockClock(autojump_threshold=0)
    real_run = trio.run
    monkeypatch.setattr(trio, "run", lambda fn: real_run(fn, clock=clock))
    assert cli.main(["demo", "--code-mode", "--plain", "--out", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "note: no sandbox here"
    assert lines[1].startswith("dsh_sched demo: one run_code program (Code Mode)")
    assert "What the model receives for call_00 (run_code's content):" in lines


def test_default_code_runtime_is_the_sandbox() -> None:
    code_runtime, note = default_code_runtime()
    assert isinstance(code_runtime, WasiCodeRuntime)
    assert note.startswith("note: the program runs in the WebAssembly sandbox (WasiCodeRuntime)")


def test_default_code_runtime_falls_back_to_the_trusted_runtime(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing_extra() -> None:
        raise ImportError("WasiCodeRuntime needs the codemode extra")

    monkeypatch.setattr("dsh_tools.code.WasiCodeRuntime", missing_extra)
    code_runtime, note = default_code_runtime()
    assert isinstance(code_runtime, TrustedCodeRuntime)
    assert note == (
        "note: WasiCodeRuntime needs the codemode extra; running the demo's program with "
        "TrustedCodeRuntime instead (in this process, no sandbox)"
    )


def test_the_code_mode_demo_command_in_a_subprocess(tmp_path: Path, wasi_cache_dir: Path) -> None:
    """The real command: the program runs in the sandbox (the session's compiled module)."""
    done = subprocess.run(
        [sys.executable, "-m", "dsh_sched", "demo", "--code-mode", "--plain", "--out", "out"],
        cwd=tmp_path,
        env={**os.environ, "DSH_TRIO_CACHE_DIR": str(wasi_cache_dir)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("note: the program runs in the WebAssembly sandbox")
    assert "What the model receives for call_00 (run_code's content):" in done.stdout
    assert "  " + EXPECTED_TEXT.splitlines()[1] in done.stdout
    assert (tmp_path / "out" / "timeline.svg").exists()


async def test_run_demo_picks_and_prepares_the_default_runtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    """Without code_runtime=, run_demo takes default_code_runtime()'s choice and awaits its
    prepare() before the batch starts (so the timeline shows the program, not the set-up)."""
    scripted = ScriptedCodeRuntime(play_the_program)
    prepared_at: list[int] = []

    class Preparing:
        """The scripted runtime with a prepare(), as WasiCodeRuntime has."""

        language = "python"

        async def prepare(self) -> None:
            prepared_at.append(len(scripted.codes))

        async def run(self, code: str, **options: Any) -> CodeRunOutcome:
            return await scripted.run(code, **options)

    monkeypatch.setattr(
        "dsh_sched._demo._run.default_code_runtime", lambda: (Preparing(), "note: scripted")
    )
    report, _ = await code_demo(tmp_path, None)
    assert prepared_at == [0]  # once, before the program ran
    assert scripted.codes == [CODE_PROGRAM]
    assert not report.outcome.results[0].result.is_error


def test_arguments_text_of_a_run_code_call() -> None:
    """A run_code call shows its description; without a usable one, its arguments as usual."""
    from dsh_sched import ModelToolCall
    from dsh_sched._timeline_rows import arguments_text

    def text(arguments: str | dict[str, str]) -> str:
        return arguments_text(ModelToolCall(call_id="c", name="run_code", arguments=arguments))

    assert text('{"code": "return 1", "description": " Add\\n two  numbers "}') == (
        "program: Add two numbers"
    )
    assert text({"code": "return 1", "description": "Parsed already"}) == "program: Parsed already"
    assert text('{"code": "return 1",') == '{"code": "return 1",'  # broken JSON: as sent
    assert text('["not", "an object"]') == '["not", "an object"]'
    assert text({"code": "return 1"}) == '{"code": "return 1"}'  # no description
    other = ModelToolCall(call_id="c", name="echo", arguments='{"description": "x"}')
    assert arguments_text(other) == '{"description": "x"}'


async def test_the_rich_console_lists_sub_calls_under_run_code(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The live table has a row per sub-call under its run_code row, and the report prints
    what the model receives."""
    rich_console = pytest.importorskip("rich.console")
    from dsh_sched._demo._rich import RichConsole

    stream = io.StringIO()
    screen = rich_console.Console(file=stream, width=120, force_terminal=False)
    console = RichConsole(screen, refresh_interval=None)
    await run_demo(
        out_dir=tmp_path / "out",
        workspace=tmp_path / "ws",
        console=console,
        code_mode=True,
        code_runtime=ScriptedCodeRuntime(play_the_program),
    )
    lines = stream.getvalue().splitlines()
    table = [line for line in lines if "↳" in line]
    # The final live table: one row per sub-call, in the order they started.
    assert [line.split()[1] for line in table[-6:]] == SUB_NAMES
    assert "✗ error (No such file or directory" in table[-3]
    assert "   call_00   run_code   ok " in "\n".join(lines)  # the results table, uncut
    start = lines.index("What the model receives for call_00 (run_code's content):")
    assert lines[start + 1 : start + 1 + len(EXPECTED_TEXT.splitlines())] == (
        EXPECTED_TEXT.splitlines()
    )

"""``python -m dsh_sched demo`` (``dsh_sched._demo``, ``dsh_sched.__main__``).

The demo runs on trio's ``MockClock`` (``autojump_clock``) except in one subprocess test.
The example file tools do their I/O in worker threads, and the virtual clock may jump
while a thread runs, so a file tool's own span inside a parallel group is not pinned; the
batch's barriers and the sleep-only ``fetch_url`` are, to the exact virtual time.

What the demo shows, checked here: results commit in model order and a later result waits
for the head of the line (I2, S-005); exclusive calls are barriers (I4, S-002); a guard's
denial is an error result whose body never ran (S-022); contexts come after the last result
(S-012); the session log pairs every call in model order (S-006, S-025); an abort drains
the started calls and gives the rest synthetic pairs (S-016, S-017), or only synthetic pairs
when fired before the batch (S-014). The conformance IDs are cited in this docstring, not
in test names: ``tests/CONFORMANCE.md`` maps them to the scheduler's own tests.
"""

from __future__ import annotations

import errno
import functools
import io
import os
import pickle
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
import trio.testing

import dsh_sched.__main__ as cli
from dsh_sched import (
    CallCommitted,
    CallStarted,
    ContextAccepted,
    read_session_log,
)
from dsh_sched._demo import (
    LATENCY,
    PAGES,
    DemoPathError,
    DemoReport,
    DemoSettings,
    PlainConsole,
    check_paths,
    demo_calls,
    demo_tools,
    open_console,
    run_demo,
    seed_workspace,
)
from dsh_sched._demo._script import FetchError
from dsh_sched.testing import (
    TimelineRow,
    check_trace,
    timeline_rows,
)
from dsh_tools import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    AbortError,
    CodeDispatch,
    CodeDispatchStart,
    ErrorInfo,
    ExecutionMode,
    ExecutionToken,
    TextContent,
    ToolCall,
    ToolError,
    ToolRuntime,
    error_result,
    lowlevel,
)
from tests.helpers import assert_help_lists_each_command_on_one_line

if TYPE_CHECKING:
    from dsh_sched._demo import DemoConsole

SVG = "{http://www.w3.org/2000/svg}"
N = 13
CHANGELOG = "https://example.org/changelog"
STATUS_PAGE = "https://example.org/status"
EXPECTED_STATUS = dict.fromkeys(range(N), "ok") | {4: "error", 10: "denied"}
EXCLUSIVE = {6, 10, 11}
DENIAL = 'refusing to modify "secrets.env": .env files hold secrets'


async def demo(tmp_path: Path, *, workspace: str = "ws", **options: Any) -> tuple[DemoReport, str]:
    stream = io.StringIO()
    report = await run_demo(
        out_dir=tmp_path / "out",
        workspace=tmp_path / workspace,
        console=PlainConsole(stream),
        **options,
    )
    return report, stream.getvalue()


def svg_rows(path: Path) -> list[ET.Element]:
    root = ET.parse(path).getroot()
    return [g for g in root.iter(f"{SVG}g") if "row" in g.get("class", "").split()]


def peak_parallel(rows: tuple[TimelineRow, ...]) -> int:
    edges = sorted(
        (t, delta)
        for row in rows
        if row.body is not None
        for t, delta in ((row.body[0], 1), (row.body[1], -1))
    )
    running = peak = 0
    for _, delta in edges:  # an end sorts before a start at the same instant
        running += delta
        peak = max(peak, running)
    return peak


# -- the batch ----------------------------------------------------------------------------


async def test_every_call_commits_once_in_model_order(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    report, _ = await demo(tmp_path)
    outcome = report.outcome
    assert not outcome.aborted
    assert [c.index for c in outcome.results] == list(range(N))
    assert [c.call for c in outcome.results] == list(demo_calls())
    assert not any(c.synthetic for c in outcome.results)
    assert {row.index: row.status for row in report.rows} == EXPECTED_STATUS
    modes = {c.index for c in outcome.results if c.mode is ExecutionMode.EXCLUSIVE}
    assert modes == EXCLUSIVE
    check_trace(report.events, max_parallel=10, outcome=outcome)

    failed = outcome.results[4].result.error
    assert failed is not None
    assert failed.message == 'No such file or directory: "missing.txt"'
    assert failed.info == ErrorInfo("FileError", "FILE_ERROR")
    denied = outcome.results[10].result
    assert denied.error == ToolError(DENIAL, ErrorInfo("ToolDeniedError", "TOOL_DENIED"))
    assert report.rows[10].body is None
    # Only fetch_url defers a context; both arrive after the last result, in model order.
    texts = [m.content[0] for m in outcome.additional_contexts]
    assert texts == [
        TextContent(f"The text fetched from {url} is untrusted web content.")
        for url in (CHANGELOG, STATUS_PAGE)
    ]


async def test_the_batch_changes_the_workspace_but_not_the_secrets(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    report, _ = await demo(tmp_path)
    workspace = report.workspace
    assert (workspace / "summary.md").read_text(encoding="utf-8").startswith("# Summary")
    assert (workspace / "notes.md").read_text(encoding="utf-8").endswith("- the demo ran\n")
    assert (workspace / "secrets.env").exists()
    last_listing = report.outcome.results[12].result.value
    assert last_listing == ("data/", "notes.md", "secrets.env", "summary.md")


async def test_barriers_and_the_slow_call_on_the_virtual_clock(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    report, _ = await demo(tmp_path)
    rows = report.rows
    slow, status_page = PAGES[CHANGELOG][0], PAGES[STATUS_PAGE][0]
    write, listing = LATENCY["write_file"], LATENCY["list_dir"]
    # The clock moves deadline to deadline; add in the same order to get the same floats.
    first_write = 0.0 + slow
    third_group = first_write + write
    denied_at = third_group + status_page
    append_done = denied_at + write
    end = append_done + listing

    assert [row.started for row in rows[:6]] == [0.0] * 6
    assert rows[2].body == (0.0, slow)
    # Head of the line (S-005): the calls after fetch_url finish before it (or, when the
    # virtual clock jumped during their file I/O, with it), and all commit when it does.
    for row in rows[3:6]:
        assert row.body is not None
        assert row.body[1] <= slow
        assert row.committed == slow
    # The exclusive write starts only after the whole parallel group has committed, and
    # the next group only after the write has.
    assert rows[6].started == first_write
    assert rows[6].body == (first_write, third_group)
    assert [row.started for row in rows[7:10]] == [third_group] * 3
    assert rows[8].body == (third_group, denied_at)
    assert (rows[10].started, rows[10].committed) == (denied_at, denied_at)
    assert rows[11].body == (denied_at, append_done)
    assert rows[12].started == append_done
    assert rows[12].committed == end
    assert report.elapsed == end
    assert peak_parallel(rows) == 6


async def test_max_parallel_bounds_the_rolling_pool(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    report, _ = await demo(tmp_path, max_parallel=2)
    check_trace(report.events, max_parallel=2, outcome=report.outcome)
    assert peak_parallel(report.rows) == 2
    assert {row.index: row.status for row in report.rows} == EXPECTED_STATUS
    # fetch_url waits for a slot: the third call starts only once one of the first two ends.
    first_two_ends = [row.body[1] for row in report.rows[:2] if row.body is not None]
    assert report.rows[2].started == min(first_two_ends)


async def test_the_session_log_pairs_every_call_in_model_order(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    report, _ = await demo(tmp_path)
    logged = read_session_log(report.session_log)
    assert report.session_log == (tmp_path / "out" / "session.jsonl").resolve()
    assert [entry.index for entry in logged] == list(range(N))
    assert [(e.call_id, e.name, e.arguments) for e in logged] == [
        (c.call_id, c.name, c.arguments) for c in demo_calls()
    ]
    for entry, committed in zip(logged, report.outcome.results, strict=True):
        assert entry.result == attrs.evolve(committed.result, value=None)
        assert entry.result_seq is not None
        assert entry.result_seq > entry.call_seq
        assert not entry.synthetic
        assert entry.mode is committed.mode
    assert [len(entry.contexts) for entry in logged] == [0, 0, 1] + [0] * 5 + [1] + [0] * 4


async def test_a_second_run_replaces_the_previous_log(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    first, _ = await demo(tmp_path)
    mine = first.session_log.parent / "mine.txt"
    mine.write_text("MY NOTES", encoding="utf-8")
    second, _ = await demo(tmp_path, workspace="ws2")  # a workspace is the demo's alone
    assert second.session_log == first.session_log
    assert len(read_session_log(second.session_log)) == N
    # The output directory is shared: the demo replaces its two files and touches nothing else.
    assert sorted(path.name for path in mine.parent.iterdir()) == [
        "mine.txt",
        "session.jsonl",
        "timeline.svg",
    ]
    assert mine.read_text(encoding="utf-8") == "MY NOTES"


# -- abort --------------------------------------------------------------------------------


async def test_abort_after_drains_started_calls_and_synthesizes_the_rest(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    report, text = await demo(tmp_path, abort_after=0.6)
    outcome, rows = report.outcome, report.rows
    assert outcome.aborted
    assert report.abort_at == 0.6
    assert report.elapsed == 0.6
    check_trace(report.events, max_parallel=10, outcome=outcome)

    # The first parallel group had started: it drains and commits. fetch_url was cut
    # short at the abort; an error decided before it stays an error.
    assert [row.synthetic for row in rows[:6]] == [False] * 6
    assert rows[2].body == (0.0, 0.6)
    assert rows[2].status == "aborted"
    fetch_error = outcome.results[2].result.error
    assert fetch_error is not None
    assert fetch_error.info == ErrorInfo("AbortError", ABORTED)
    assert rows[4].status == "error"
    assert {rows[i].status for i in (0, 1, 3, 5)} <= {"ok", "aborted"}
    # Everything from the first barrier on never started: synthetic pairs.
    for committed, row in zip(outcome.results[6:], rows[6:], strict=True):
        assert committed.synthetic
        assert committed.mode is None
        assert committed.result == error_result(
            AbortError(ABORTED_BEFORE_DISPATCH, "--abort-after 0.6 elapsed")
        )
        assert (row.synthetic, row.status, row.body) == (True, "aborted_before_dispatch", None)
    # fetch_url was aborted before it deferred its context.
    assert outcome.additional_contexts == ()

    logged = read_session_log(report.session_log)
    assert [entry.index for entry in logged] == list(range(N))
    assert [entry.synthetic for entry in logged] == [False] * 6 + [True] * 7
    assert all(entry.result is not None for entry in logged)

    root = ET.parse(report.timeline).getroot()
    markers = [g for g in root.iter(f"{SVG}g") if g.get("class") == "abort-marker"]
    assert len(markers) == 1
    assert [g.get("data-mode") for g in svg_rows(report.timeline)[6:]] == ["synthetic"] * 7
    assert "#6  write_file  synthetic pair: aborted before dispatch" in text
    assert "the batch Abort fired at 0.60 s" in text


async def test_abort_after_zero_gives_only_synthetic_pairs(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    report, _ = await demo(tmp_path, abort_after=0)
    assert report.abort_at == 0.0
    assert report.outcome.aborted
    assert all(c.synthetic for c in report.outcome.results)
    assert [c.index for c in report.outcome.results] == list(range(N))
    assert not [e for e in report.events if e.kind in ("pre_start", "body_start", "observed")]
    check_trace(report.events, max_parallel=10, outcome=report.outcome)
    assert all(entry.synthetic for entry in read_session_log(report.session_log))


# -- the timeline file --------------------------------------------------------------------


async def test_the_timeline_has_one_row_per_call(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    report, _ = await demo(tmp_path)
    assert report.timeline == (tmp_path / "out" / "timeline.svg").resolve()
    root = ET.parse(report.timeline).getroot()
    assert root.tag == f"{SVG}svg"
    rows = svg_rows(report.timeline)
    assert len(rows) == N
    assert [g.get("data-index") for g in rows] == [str(i) for i in range(N)]
    assert [g.get("data-call-id") for g in rows] == [c.call_id for c in demo_calls()]
    assert {i for i, g in enumerate(rows) if g.get("data-mode") == "exclusive"} == EXCLUSIVE
    assert [g.get("data-status") for g in rows] == [EXPECTED_STATUS[i] for i in range(N)]
    # Exclusive bodies are drawn in their own colour, and each barrier is shaded.
    exclusive_bodies = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "body-exclusive"]
    assert len(exclusive_bodies) == 2 + 1  # two exclusive writes, plus the legend swatch
    barriers = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "barrier"]
    assert len(barriers) == len(EXCLUSIVE) + 1  # one per exclusive call, plus the legend
    legend = "".join(
        t.text or ""
        for g in root.iter(f"{SVG}g")
        if g.get("class") == "legend"
        for t in g.iter(f"{SVG}text")
    )
    assert "exclusive body" in legend
    assert "committed: denied" in legend
    ticks = [
        t.text
        for g in root.iter(f"{SVG}g")
        if g.get("class") == "tick"
        for t in g.iter(f"{SVG}text")
    ]
    assert ticks == ["0 s", "0.5 s", "1 s", "1.5 s", "2 s", "2.5 s"]
    # The file is exactly what the pure renderer makes of the report's rows.
    title = f"dsh_sched demo: {N} tool calls, max_parallel=10"
    text = report.timeline.read_text(encoding="utf-8")
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<svg ')
    assert f"<title>{title}</title>" in text
    assert timeline_rows(report.events, origin=0.0) == report.rows


# -- consoles -----------------------------------------------------------------------------


async def test_plain_console_shows_progress_results_and_paths(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    report, text = await demo(tmp_path)
    lines = text.splitlines()
    assert lines[0] == (
        "dsh_sched demo: 13 tool calls from one scripted model message, max_parallel=10"
    )
    assert lines[1] == f"workspace: {report.workspace}"
    assert (
        '  0.000s  #2  fetch_url   started  parallel  {"url": "https://example.org/changelog"}'
        in lines
    )
    # Whether the earlier reads have committed by then depends on their I/O threads.
    assert any(line.startswith("  1.200s  #2  fetch_url   body done") for line in lines)
    assert "  1.200s  #6  write_file  body running" in lines
    assert f"  2.000s  #10 delete_file committed: denied ({DENIAL})" in lines
    # Contexts are printed after the last result.
    context_at = [i for i, line in enumerate(lines) if "context delivered" in line]
    last_commit = max(i for i, line in enumerate(lines) if "committed:" in line)
    assert len(context_at) == 2
    assert min(context_at) > last_commit

    results = lines[lines.index("Committed results, in model order:") + 1 :][:N]
    assert [line.split()[0] for line in results] == [f"#{i}" for i in range(N)]
    assert [line.split()[2] for line in results] == [c.name for c in demo_calls()]
    assert [line.split()[3] for line in results] == [EXPECTED_STATUS[i] for i in range(N)]
    assert lines[-3].startswith("13 calls in 2.45 s (bodies ran ")
    assert lines[-3].endswith(
        "max_parallel=10): 11 ok, 1 error, 1 denied; "
        "2 context messages delivered after the last result"
    )
    assert lines[-2] == f"session log: {report.session_log}"
    assert lines[-1] == f"timeline:    {report.timeline}"


async def test_plain_console_says_which_call_a_finished_result_waits_for(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runtime = ToolRuntime()
    calls = demo_calls()[:3]
    tokens = [lowlevel.create(runtime, ToolCall(call_id="c", name="t")).token for _ in calls]
    stream = io.StringIO()
    console = PlainConsole(stream)
    settings = DemoSettings(
        calls=calls, max_parallel=3, abort_after=None, workspace=Path("w"), out_dir=Path("o")
    )
    console.start(settings, trio.current_time())
    for index, (call, token) in enumerate(zip(calls, tokens, strict=True)):
        console.on_call(
            CallStarted(
                batch=1,
                index=index,
                call=call,
                mode=ExecutionMode.PARALLEL,
                token=token,
                synthetic=False,
            )
        )
        console.body_started(token)
    await trio.sleep(0.5)
    console.body_ended(tokens[2])
    console.body_ended(tokens[0])
    lines = stream.getvalue().splitlines()
    assert lines[-2:] == [
        "  0.500s  #2  fetch_url   body done, result waits for #0",
        "  0.500s  #0  list_dir    body done",
    ]


@pytest.mark.parametrize(("terminal", "abort_after"), [(True, None), (False, 0.0)])
async def test_rich_console_draws_a_live_table_then_the_results(
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    terminal: bool,
    abort_after: float | None,
) -> None:
    rich_console = pytest.importorskip("rich.console")
    from dsh_sched._demo._rich import RichConsole

    # Live redraws in place only on a terminal that is not "dumb".
    monkeypatch.setenv("TERM", "xterm-256color")
    stream = io.StringIO()
    screen = rich_console.Console(file=stream, width=120, force_terminal=terminal)
    console = RichConsole(screen, refresh_interval=None)
    report = await run_demo(
        out_dir=tmp_path / "out",
        workspace=tmp_path / "ws",
        console=console,
        abort_after=abort_after,
    )
    text = stream.getvalue()
    if terminal:
        # Live redraws happened while bodies ran (the final table has none running).
        assert "running" in text
        assert "✗ error (No such file or directory" in text
    else:
        assert text.count("□ synthetic: aborted before dispatch") == N
        assert text.count("synthetic: aborted before dispatch") == 2 * N
    assert "Committed results, in model order" in text
    for committed in report.outcome.results:
        assert committed.call.call_id in text
    assert f"session log: {report.session_log}\n" in text
    assert text.endswith(f"timeline:    {report.timeline}\n")
    console.stop()  # idempotent


def test_open_console_falls_back_to_plain_text_without_rich(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)
    monkeypatch.delitem(sys.modules, "dsh_sched._demo._rich", raising=False)
    stream = io.StringIO()
    assert isinstance(open_console(stream), PlainConsole)


def test_open_console_prefers_rich_unless_told_plain() -> None:
    pytest.importorskip("rich")
    from dsh_sched._demo._rich import RichConsole

    assert isinstance(open_console(io.StringIO()), RichConsole)
    assert isinstance(open_console(io.StringIO(), plain=True), PlainConsole)


def test_open_console_does_not_hide_other_import_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dsh_sched._demo._rich", None)
    with pytest.raises(ModuleNotFoundError):
        open_console()


async def test_default_console_writes_to_standard_output(
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Without rich (the refreshing rich console would race the virtual clock, see
    # RichConsole's refresh_interval): plain text on standard output.
    monkeypatch.setitem(sys.modules, "rich", None)
    monkeypatch.delitem(sys.modules, "dsh_sched._demo._rich", raising=False)
    report = await run_demo(out_dir=tmp_path / "out", workspace=tmp_path / "ws")
    out = capsys.readouterr().out
    assert out.startswith("dsh_sched demo: 13 tool calls")
    assert out.endswith(f"session log: {report.session_log}\ntimeline:    {report.timeline}\n")


def test_rich_console_redraws_between_start_and_stop(tmp_path: Path) -> None:
    pytest.importorskip("rich")
    from dsh_sched._demo._rich import RichConsole

    assert RichConsole.for_stream(None).console.file is sys.stdout
    assert RichConsole().refresh_interval == 0.1
    stream = io.StringIO()
    console = RichConsole.for_stream(stream)
    settings = DemoSettings(
        calls=demo_calls(), max_parallel=4, abort_after=1.5, workspace=tmp_path, out_dir=tmp_path
    )

    async def main() -> None:
        console.start(settings, trio.current_time())
        await trio.sleep(0.25)
        console.refresh()
        console.stop()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    text = stream.getvalue()
    assert text.startswith(
        "13 tool calls from one scripted model message, max_parallel=4, abort after 1.5 s\n"
    )
    assert "bodies running 0/4" in text
    assert text.count("queued") == N
    with pytest.raises(AssertionError, match="the live display is not running"):
        console.refresh()


@attrs.define
class ExplodingConsole:
    """Fails on the third result: a sink failure, which the scheduler re-raises alone."""

    inner: PlainConsole
    stopped: bool = False
    refresh_interval: float | None = 0.5

    def start(self, settings: DemoSettings, origin: float) -> None:
        self.inner.start(settings, origin)

    def on_call(self, event: CallStarted) -> None:
        self.inner.on_call(event)

    def on_result(self, event: CallCommitted) -> None:
        if event.index == 2:
            raise RuntimeError("console exploded")
        self.inner.on_result(event)

    def on_context(self, event: ContextAccepted) -> None:
        raise AssertionError("no context after an internal failure")

    def body_started(self, token: ExecutionToken) -> None:
        self.inner.body_started(token)

    def body_ended(self, token: ExecutionToken) -> None:
        self.inner.body_ended(token)

    def sub_call_started(self, event: CodeDispatchStart, mode: ExecutionMode) -> None:
        raise AssertionError("no Code Mode here")

    def sub_call_settled(self, event: CodeDispatch) -> None:
        raise AssertionError("no Code Mode here")

    def watch(self, statistics: Any) -> None:
        self.inner.watch(statistics)

    def refresh(self) -> None:
        self.inner.refresh()

    def stop(self) -> None:
        self.stopped = True

    def report(self, report: DemoReport) -> None:
        raise AssertionError("no report after a failure")


async def test_a_failing_console_surfaces_unwrapped_and_stops_the_display(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    console = ExplodingConsole(PlainConsole(io.StringIO()))
    typed: DemoConsole = console
    with pytest.raises(RuntimeError, match=r"^console exploded$"):
        await run_demo(out_dir=tmp_path / "out", workspace=tmp_path / "ws", console=typed)
    assert console.stopped
    # The log (which hears each event before the console) holds what was recorded before
    # the failure: the six started calls, results up to the failing one, nothing
    # fabricated afterwards (I9).
    logged = read_session_log(tmp_path / "out" / "session.jsonl")
    assert [entry.result is not None for entry in logged] == [True] * 3 + [False] * 3
    assert not (tmp_path / "out" / "timeline.svg").exists()


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"max_parallel": 0}, ValueError, "max_parallel must be a positive integer"),
        ({"max_parallel": True}, TypeError, "max_parallel must be a positive integer"),
        ({"max_parallel": 1.5}, TypeError, "max_parallel must be a positive integer"),
        ({"abort_after": -1}, ValueError, "abort_after must be finite and not negative, got -1"),
        ({"abort_after": float("nan")}, ValueError, "finite and not negative, got nan"),
        ({"abort_after": "1"}, TypeError, "abort_after must be a number of seconds or None"),
        ({"abort_after": True}, TypeError, "abort_after must be a number of seconds or None"),
    ],
)
async def test_run_demo_rejects_bad_options(
    tmp_path: Path, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        await run_demo(out_dir=tmp_path / "out", workspace=tmp_path / "ws", **options)
    assert not (tmp_path / "out").exists()


# -- the demo's tools and guard ----------------------------------------------------------


class QuietWatcher:
    def body_started(self, token: ExecutionToken) -> None:
        pass

    def body_ended(self, token: ExecutionToken) -> None:
        pass


@pytest.mark.parametrize(
    ("name", "arguments", "denied"),
    [
        ("delete_file", {"path": "secrets.env"}, True),
        ("write_file", {"path": "d/prod.env", "content": "x"}, True),
        ("read_file", {"path": "secrets.env"}, False),
        ("write_file", {"path": "notes.md", "content": "x"}, False),
    ],
)
async def test_the_guard_protects_env_files_only_from_changes(
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    name: str,
    arguments: dict[str, object],
    denied: bool,
) -> None:
    from dsh_sched._demo import protect_secrets

    seed_workspace(tmp_path)
    runtime = ToolRuntime()
    for definition in demo_tools(tmp_path, QuietWatcher()):
        runtime.register(definition)
    runtime.guard(protect_secrets)
    result = await runtime.execute(ToolCall(call_id="c", name=name, arguments=arguments))
    assert result.is_error is denied
    if denied:
        assert result.error is not None
        assert result.error.info == ErrorInfo("ToolDeniedError", "TOOL_DENIED")
        assert result.error.message.startswith(f'refusing to modify "{arguments["path"]}"')


async def test_fetch_url_knows_only_its_canned_pages(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    runtime = ToolRuntime()
    for definition in demo_tools(tmp_path, QuietWatcher()):
        runtime.register(definition)
    call = ToolCall(call_id="c", name="fetch_url", arguments={"url": "https://nowhere.example"})
    start = trio.current_time()
    result = await runtime.execute(call)
    assert trio.current_time() == start
    assert result.error is not None
    assert result.error.message == 'no canned page for "https://nowhere.example"'
    assert result.error.info == ErrorInfo("FetchError", "NOT_FOUND")
    again = pickle.loads(pickle.dumps(FetchError("gone")))
    assert (type(again), str(again), again.code) == (FetchError, "gone", "NOT_FOUND")
    ok = await runtime.execute(attrs.evolve(call, arguments={"url": STATUS_PAGE}))
    assert ok.value == "status: all systems operational"
    assert trio.current_time() == start + PAGES[STATUS_PAGE][0]


# -- where the demo writes ----------------------------------------------------------------

OUT_FIX = "pass a directory for session.jsonl and timeline.svg"
NEW_OR_EMPTY = "pass a new or empty directory"


def refusal(out_dir: Path, workspace: Path | None) -> tuple[str, str]:
    with pytest.raises(DemoPathError) as info:
        check_paths(out_dir, workspace)
    return info.value.argument, str(info.value)


def test_check_paths_accepts_new_and_empty_directories(tmp_path: Path) -> None:
    empty, out = tmp_path / "empty", tmp_path / "out"
    empty.mkdir()
    out.mkdir()
    for name in ("mine.txt", "session.jsonl", "timeline.svg"):
        (out / name).write_text("x", encoding="utf-8")
    check_paths(out, empty)
    check_paths(out, None)
    check_paths(tmp_path / "new" / "out", tmp_path / "new" / "ws")  # siblings, both missing
    check_paths(empty / "out", empty / "ws")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["empty", "out"]  # it only looks


def test_check_paths_refuses_what_the_demo_cannot_use(tmp_path: Path) -> None:
    file = tmp_path / "file.txt"
    file.write_text("MY FILE", encoding="utf-8")
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.md").write_text("MY NOTES", encoding="utf-8")
    out, ws = tmp_path / "out", tmp_path / "ws"

    assert refusal(out, full) == (
        "workspace",
        f"{full} is not empty; the demo writes its own files there: {NEW_OR_EMPTY}",
    )
    assert refusal(out, file) == ("workspace", f"{file} is not a directory: {NEW_OR_EMPTY}")
    assert refusal(out, file / "ws") == (
        "workspace",
        f"cannot create {file / 'ws'}: {file.resolve()} is not a directory",
    )
    assert refusal(file, ws) == ("out_dir", f"{file} is not a directory: {OUT_FIX}")
    assert refusal(file / "out", None) == (
        "out_dir",
        f"cannot create {file / 'out'}: {file.resolve()} is not a directory",
    )
    assert refusal(ws, ws) == (
        "out_dir",
        f"{ws} is inside the workspace {ws}: pass a directory outside it",
    )
    assert refusal(ws / "a" / "out", ws) == (
        "out_dir",
        f"{ws / 'a' / 'out'} is inside the workspace {ws}: pass a directory outside it",
    )
    (out / "timeline.svg").mkdir(parents=True)
    assert refusal(out, ws) == (
        "out_dir",
        f"{out / 'timeline.svg'} is not a file, so the demo cannot replace it: {OUT_FIX}",
    )
    # Only looked: nothing was created, changed or removed.
    assert sorted(path.name for path in tmp_path.iterdir()) == ["file.txt", "full", "out"]
    assert [path.name for path in full.iterdir()] == ["notes.md"]
    assert (full / "notes.md").read_text(encoding="utf-8") == "MY NOTES"
    assert file.read_text(encoding="utf-8") == "MY FILE"


def test_check_paths_refuses_directories_it_cannot_write_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    # Stands in for read-only directories, which root (the tests may run as root) writes in.
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert refusal(tmp_path / "out", empty) == (
        "workspace",
        f"{empty} is not writable: {NEW_OR_EMPTY}",
    )
    assert refusal(empty, None) == ("out_dir", f"{empty} is not writable: {OUT_FIX}")
    assert refusal(empty / "out", None) == (
        "out_dir",
        f"cannot create {empty / 'out'}: {empty.resolve()} is not writable",
    )


def test_seed_workspace_never_replaces_a_file(tmp_path: Path) -> None:
    config = tmp_path / "data" / "config.json"
    config.parent.mkdir()
    config.write_text("MY CONFIG", encoding="utf-8")
    with pytest.raises(FileExistsError):
        seed_workspace(tmp_path)
    assert config.read_text(encoding="utf-8") == "MY CONFIG"
    seed_workspace(tmp_path / "new")
    assert (tmp_path / "new" / "notes.md").read_text(encoding="utf-8").startswith("# Notes")


async def test_run_demo_refuses_a_workspace_that_is_not_empty(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    notes = tmp_path / "ws" / "notes.md"
    notes.parent.mkdir()
    notes.write_text("MY NOTES", encoding="utf-8")
    with pytest.raises(DemoPathError, match=r"ws is not empty;") as info:
        await demo(tmp_path)
    assert info.value.argument == "workspace"
    assert [path.name for path in notes.parent.iterdir()] == ["notes.md"]
    assert notes.read_text(encoding="utf-8") == "MY NOTES"
    assert not (tmp_path / "out").exists()


async def test_run_demo_reports_a_file_that_appears_in_the_workspace_meanwhile(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The workspace was empty when checked; then, before the demo seeds it, a file appears.
    notes = tmp_path / "ws" / "notes.md"
    notes.parent.mkdir()
    notes.write_text("MY NOTES", encoding="utf-8")
    monkeypatch.setattr("dsh_sched._demo._run.check_paths", lambda out_dir, workspace: None)
    with pytest.raises(DemoPathError) as info:
        await demo(tmp_path)
    assert info.value.argument == "workspace"
    assert str(info.value) == f"cannot use {notes.resolve()}: File exists"
    assert isinstance(info.value.__cause__, FileExistsError)
    assert notes.read_text(encoding="utf-8") == "MY NOTES"


def fail_to_create(monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
    """Make ``Path.mkdir`` fail for ``directory``, as it does where the checks cannot tell."""
    real_mkdir = Path.mkdir

    def mkdir(self: Path, mode: int = 0o777, parents: bool = False, exist_ok: bool = False) -> None:
        if self == directory:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        real_mkdir(self, mode, parents, exist_ok)

    monkeypatch.setattr(Path, "mkdir", mkdir)


async def test_run_demo_reports_a_directory_it_fails_to_create(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = (tmp_path / "out").resolve()
    fail_to_create(monkeypatch, out)
    with pytest.raises(DemoPathError) as info:
        await demo(tmp_path)
    assert (info.value.argument, str(info.value)) == (
        "out_dir",
        f"cannot use {out}: Permission denied",
    )
    assert isinstance(info.value.__cause__, PermissionError)
    assert not (tmp_path / "ws").exists()


# -- the command line ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: command"),
        (["nope"], "argument command: invalid choice: 'nope'"),
        (
            ["demo", "--max-parallel", "0"],
            "argument --max-parallel: expected a positive integer, got '0'",
        ),
        (["demo", "--max-parallel", "two"], "expected a positive integer, got 'two'"),
        (
            ["demo", "--abort-after", "-1"],
            "expected a finite, non-negative number of seconds, got '-1'",
        ),
        (
            ["demo", "--abort-after", "inf"],
            "expected a finite, non-negative number of seconds, got 'inf'",
        ),
        (["demo", "--abort-after", "soon"], "expected a number of seconds, got 'soon'"),
        (["demo", "--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_usage_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m dsh_sched")
    assert message in err


def test_help_lists_every_command_on_one_line_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m dsh_sched --help`` names each subcommand with a one-line summary."""
    monkeypatch.setenv("COLUMNS", "80")
    assert_help_lists_each_command_on_one_line(cli._parser())
    done = subprocess.run(
        [sys.executable, "-m", "dsh_sched", "--help"],
        capture_output=True,
        check=False,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert done.returncode == 0
    assert done.stdout.decode() == cli._parser().format_help()


@pytest.fixture
def virtual_trio_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # main() calls trio.run; give it a MockClock so the in-process runs take no real time.
    real_run = trio.run
    clock = trio.testing.MockClock(autojump_threshold=0)
    monkeypatch.setattr(trio, "run", functools.partial(real_run, clock=clock))


@pytest.mark.usefixtures("virtual_trio_run")
def test_main_runs_the_demo_in_a_temporary_workspace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert cli.main(["demo", "--plain", "--out", str(out), "--abort-after", "0.6"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("max_parallel=10, abort after 0.6 s")
    workspace = Path(lines[1].removeprefix("workspace: "))
    assert workspace.name.startswith("dsh-demo-")
    assert not workspace.exists()  # removed afterwards
    assert lines[-2] == f"session log: {(out / 'session.jsonl').resolve()}"
    assert lines[-1] == f"timeline:    {(out / 'timeline.svg').resolve()}"


@pytest.mark.usefixtures("virtual_trio_run")
def test_main_keeps_a_given_workspace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workspace = tmp_path / "ws"
    argv = ["demo", "--plain", "--out", str(tmp_path / "o"), "--workspace", str(workspace)]
    assert cli.main([*argv, "--max-parallel", "3"]) == 0
    assert "max_parallel=3" in capsys.readouterr().out
    assert (workspace / "summary.md").exists()


def test_main_reports_an_interrupt(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(trio, "run", interrupted)
    assert cli.main(["demo", "--plain", "--out", str(tmp_path)]) == 130
    assert capsys.readouterr().err == "interrupted\n"


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the command line, expect a usage error, and return its last line."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("usage: python -m dsh_sched demo ")
    return captured.err.splitlines()[-1]


@pytest.mark.usefixtures("virtual_trio_run")
def test_main_refuses_a_workspace_that_is_not_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "myws"
    workspace.mkdir()
    (workspace / "notes.md").write_text("MY IMPORTANT NOTES\n", encoding="utf-8")
    argv = ["demo", "--plain", "--workspace", str(workspace), "--out", str(tmp_path / "out")]
    assert usage_error(argv, capsys) == (
        f"python -m dsh_sched demo: error: argument --workspace: {workspace} is not empty; "
        "the demo writes its own files there: pass a new or empty directory"
    )
    assert [path.name for path in workspace.iterdir()] == ["notes.md"]
    assert (workspace / "notes.md").read_text(encoding="utf-8") == "MY IMPORTANT NOTES\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.usefixtures("virtual_trio_run")
@pytest.mark.parametrize(
    ("option", "fix"),
    [("--out", OUT_FIX), ("--workspace", NEW_OR_EMPTY)],
)
def test_main_refuses_a_path_that_is_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, fix: str
) -> None:
    file = tmp_path / "somefile.txt"
    file.write_text("MY FILE", encoding="utf-8")
    argv = ["demo", "--plain", "--out", str(tmp_path / "out"), option, str(file)]
    assert usage_error(argv, capsys) == (
        f"python -m dsh_sched demo: error: argument {option}: {file} is not a directory: {fix}"
    )
    assert file.read_text(encoding="utf-8") == "MY FILE"


@pytest.mark.usefixtures("virtual_trio_run")
@pytest.mark.parametrize("option", ["--out", "--workspace"])
def test_main_refuses_a_directory_it_cannot_create(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    file = tmp_path / "somefile.txt"
    file.write_text("MY FILE", encoding="utf-8")
    argv = ["demo", "--plain", "--out", str(tmp_path / "out"), option, str(file / "sub")]
    assert usage_error(argv, capsys) == (
        f"python -m dsh_sched demo: error: argument {option}: "
        f"cannot create {file / 'sub'}: {file.resolve()} is not a directory"
    )


@pytest.mark.usefixtures("virtual_trio_run")
def test_main_refuses_an_out_directory_inside_the_workspace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "ws"
    argv = ["demo", "--plain", "--workspace", str(workspace), "--out", str(workspace / "out")]
    assert usage_error(argv, capsys) == (
        f"python -m dsh_sched demo: error: argument --out: {workspace / 'out'} is inside "
        f"the workspace {workspace}: pass a directory outside it"
    )
    assert not workspace.exists()


@pytest.mark.usefixtures("virtual_trio_run")
def test_main_reports_a_failure_to_create_a_directory_as_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The checks pass (as for /proc/nope, say), then creating the directory fails.
    out = (tmp_path / "out").resolve()
    fail_to_create(monkeypatch, out)
    assert usage_error(["demo", "--plain", "--out", str(out)], capsys) == (
        f"python -m dsh_sched demo: error: argument --out: cannot use {out}: Permission denied"
    )


def test_demo_help_says_what_the_demo_writes_where(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["demo", "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "--out DIR the directory where the demo writes session.jsonl and timeline.svg, "
        "created if missing; those two files are replaced, nothing else there is touched "
        "(default: ./demo-out)"
    ) in text
    assert (
        "--workspace DIR the file tools' directory, kept afterwards: a new or empty "
        "directory, where the demo creates its own files (it refuses any other); --out must "
        "not be inside it (default: a temporary directory, removed afterwards)"
    ) in text


def _demo_in_a_subprocess(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_sched", "demo", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
        timeout=60,
        cwd=cwd,
    )


def test_a_bad_out_directory_in_a_subprocess(tmp_path: Path) -> None:
    """The reported command: a clean usage error, not a traceback."""
    file = tmp_path / "somefile.txt"
    file.write_text("MY FILE", encoding="utf-8")
    proc = _demo_in_a_subprocess(tmp_path, "--out", str(file))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        f"python -m dsh_sched demo: error: argument --out: {file} is not a directory: {OUT_FIX}"
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == ["somefile.txt"]


def test_the_demo_command_in_a_subprocess(tmp_path: Path) -> None:
    """The README's command, on the real clock: it must finish in a few seconds."""
    out = tmp_path / "demo-out"
    proc = _demo_in_a_subprocess(tmp_path, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    log, timeline = (out / "session.jsonl").resolve(), (out / "timeline.svg").resolve()
    assert lines[-2:] == [f"session log: {log}", f"timeline:    {timeline}"]
    assert len(read_session_log(log)) == N
    assert len(svg_rows(timeline)) == N


async def test_the_rich_header_counts_from_the_batch_statistics(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The live header's counters come from ``Batch.statistics()`` (the group's mode too)."""
    from rich.console import Console

    from dsh_sched import BatchStatistics
    from dsh_sched._demo._rich import RichConsole

    stream = io.StringIO()
    console = RichConsole(Console(file=stream, width=140), refresh_interval=None)
    seen: list[BatchStatistics] = []
    real_watch = console.watch

    def watch(statistics: Any) -> None:
        def recorded() -> BatchStatistics:
            stats: BatchStatistics = statistics()
            seen.append(stats)
            return stats

        real_watch(recorded)

    console.watch = watch  # type: ignore[method-assign]
    await run_demo(out_dir=tmp_path / "out", workspace=tmp_path / "ws", console=console)
    assert seen
    assert any(s.group_mode is ExecutionMode.PARALLEL for s in seen)
    assert seen[-1].committed == seen[-1].calls == 13
    # Off a terminal only the final table is drawn: the batch is over, no group runs.
    assert "committed 13/13" in stream.getvalue()

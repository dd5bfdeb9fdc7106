"""Live progress for the demo: the shared display state, the console protocol, plain text.

A console is a :class:`~dsh_sched.Sink` (it hears ``on_call`` / ``on_result`` /
``on_context`` from the scheduler's driver) and a body watcher (it hears when each tool
body starts and ends). :class:`Board` folds those events into one :class:`CallView` per
call; :class:`PlainConsole` prints one line per event, and the rich console (``_rich.py``,
loaded only when ``rich`` is installed) redraws a live table from the same board.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, TextIO, TypeAlias, final

import attrs
import trio

from dsh_tools import RUN_CODE_NAME, ExecutionMode, FrozenDict, ToolResult

from .._calls import ModelToolCall
from .._timeline_rows import STATUS_TEXT, Status, arguments_text, json_text, result_status

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from dsh_tools import CodeDispatch, CodeDispatchStart, ExecutionToken

    from .._outcome import BatchStatistics
    from .._sinks import CallCommitted, CallStarted, ContextAccepted
    from .._timeline_rows import TimelineRow
    from ._run import DemoReport

__all__ = [
    "Board",
    "CallView",
    "DemoConsole",
    "DemoSettings",
    "PlainConsole",
    "model_texts",
    "open_console",
    "result_lines",
    "summary_line",
]

Stage: TypeAlias = Literal["queued", "preparing", "running", "finished", "committed"]


@final
@attrs.frozen(kw_only=True)
class DemoSettings:
    """What one demo run is asked to do (shown in the console's header)."""

    calls: tuple[ModelToolCall, ...]
    max_parallel: int
    abort_after: float | None
    workspace: Path
    out_dir: Path
    code_mode: bool = False

    @property
    def headline(self) -> str:
        """What the scripted model sent and the batch's settings, on one line."""
        abort = "" if self.abort_after is None else f", abort after {self.abort_after:g} s"
        what = (
            "one run_code program (Code Mode) from the scripted model"
            if self.code_mode
            else f"{len(self.calls)} tool calls from one scripted model message"
        )
        return f"{what}, max_parallel={self.max_parallel}{abort}"


@final
@attrs.define(kw_only=True)
class CallView:
    """What the display knows about one call; times are seconds since the batch started.

    A Code Mode sub-call has a view too: its ``index`` is its ``run_code`` call's, its
    ``call`` carries the sub-call's id, name and arguments, and ``sub_call`` is true.
    """

    index: int
    call: ModelToolCall
    sub_call: bool = False
    stage: Stage = "queued"
    mode: ExecutionMode | None = None
    synthetic: bool = False
    body_started: float | None = None
    body_ended: float | None = None
    result: ToolResult | None = None

    @property
    def status(self) -> Status:
        """The committed result's status (``pending`` until it is committed)."""
        return result_status(self.result)


@final
class Board:
    """The display state of one batch, fed by sink and body events (sync, no I/O)."""

    def __init__(self, calls: Sequence[ModelToolCall]) -> None:
        self.views = [CallView(index=i, call=call) for i, call in enumerate(calls)]
        self._tokens: dict[ExecutionToken, CallView] = {}
        self._subs: dict[str, CallView] = {}
        self._by_call_id = {call.call_id: i for i, call in enumerate(calls)}

    def sub_call(self, event: CodeDispatchStart, mode: ExecutionMode) -> CallView:
        """Record the start of a Code Mode sub-call (``tools/code-dispatch-start``)."""
        arguments = event.arguments
        call = ModelToolCall(
            call_id=event.sub_call_id,
            name=event.name,
            arguments=arguments if isinstance(arguments, FrozenDict) else json_text(arguments),
        )
        view = CallView(
            index=self._by_call_id.get(event.parent_call_id, -1),
            call=call,
            sub_call=True,
            stage="preparing",
            mode=mode,
        )
        self._subs[event.sub_call_id] = view
        self._tokens[event.execution.token] = view
        return view

    def sub_result(self, event: CodeDispatch) -> CallView:
        """Record that a Code Mode sub-call settled (``tools/code-dispatch``)."""
        view = self._subs[event.sub_call_id]
        view.stage = "committed"
        view.result = event.result
        return view

    def ordered(self) -> list[CallView]:
        """Every view to show: each call, followed by its sub-calls in the order they started."""
        subs: dict[int, list[CallView]] = {}
        for view in self._subs.values():
            subs.setdefault(view.index, []).append(view)
        return [item for view in self.views for item in (view, *subs.get(view.index, ()))]

    def call(self, event: CallStarted) -> CallView:
        """Record an ``on_call``."""
        view = self.views[event.index]
        view.stage = "preparing"
        view.mode = event.mode
        view.synthetic = event.synthetic
        if event.token is not None:
            self._tokens[event.token] = view
        return view

    def body(self, token: ExecutionToken, now: float, *, started: bool) -> CallView:
        """Record a body's start or end (a body always follows its call's ``on_call``)."""
        view = self._tokens[token]
        if started:
            view.stage = "running"
            view.body_started = now
        else:
            view.stage = "finished"
            view.body_ended = now
        return view

    def result(self, event: CallCommitted) -> CallView:
        """Record an ``on_result``."""
        view = self.views[event.index]
        view.stage = "committed"
        view.result = event.result
        return view

    def head(self) -> int | None:
        """The first call without a committed result: every later result waits for it."""
        for view in self.views:
            if view.stage != "committed":
                return view.index
        return None

    def count(self, stage: Stage) -> int:
        """How many calls are in ``stage``."""
        return sum(1 for view in self.views if view.stage == stage)


class DemoConsole(Protocol):
    """Where the demo shows its progress and its report.

    Attributes:
        refresh_interval: Seconds between :meth:`refresh` calls while the batch runs
            (``None``: never).
    """

    refresh_interval: float | None

    def start(self, settings: DemoSettings, origin: float) -> None:
        """The batch is about to start; ``origin`` is ``trio.current_time()`` then."""

    def on_call(self, event: CallStarted) -> None:
        """Sink event (scheduler.md §5)."""

    def on_result(self, event: CallCommitted) -> None:
        """Sink event (scheduler.md §5)."""

    def on_context(self, event: ContextAccepted) -> None:
        """Sink event (scheduler.md §5)."""

    def body_started(self, token: ExecutionToken) -> None:
        """A tool body started."""

    def body_ended(self, token: ExecutionToken) -> None:
        """A tool body ended."""

    def sub_call_started(self, event: CodeDispatchStart, mode: ExecutionMode) -> None:
        """A Code Mode sub-call started under ``mode`` (``tools/code-dispatch-start``)."""

    def sub_call_settled(self, event: CodeDispatch) -> None:
        """A Code Mode sub-call settled (``tools/code-dispatch``)."""

    def watch(self, statistics: Callable[[], BatchStatistics]) -> None:
        """The running batch's ``Batch.statistics``, for a display that shows its counters."""

    def refresh(self) -> None:
        """Redraw (called every ``refresh_interval`` seconds while the batch runs)."""

    def stop(self) -> None:
        """The batch is over (or failed): stop any live display. Idempotent."""

    def report(self, report: DemoReport) -> None:
        """Show the committed results in model order, a summary and the output paths."""


def batch_rows(report: DemoReport) -> list[TimelineRow]:
    """The report's rows of the batch's own calls (Code Mode sub-call rows left out)."""
    return [row for row in report.rows if row.parent_call_id is None]


def _count_text(report: DemoReport) -> str:
    counts: dict[str, int] = {}
    for row in batch_rows(report):
        key = "synthetic" if row.synthetic else STATUS_TEXT[row.status]
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} {key}" for key, n in counts.items())


def summary_line(report: DemoReport) -> str:
    """One line: how many calls ended how, and how long the batch took.

    Args:
        report: The finished demo.

    Returns:
        For example ``13 calls in 2.45 s (bodies ran 4.4 s in total, max_parallel=10): ...``.
    """
    rows = batch_rows(report)
    # Tool bodies, sub-calls' included; a run_code row's span is its program's run, which
    # its sub-calls' bodies already fill.
    busy = sum(
        row.body[1] - row.body[0]
        for row in report.rows
        if row.body is not None and (row.name != RUN_CODE_NAME or row.parent_call_id is not None)
    )
    text = (
        f"{len(rows)} call{'' if len(rows) == 1 else 's'} in {report.elapsed:.2f} s "
        f"(bodies ran {busy:.2f} s in total, "
        f"max_parallel={report.max_parallel}): {_count_text(report)}"
    )
    subs = len(report.rows) - len(rows)
    if subs:
        text += f"; {subs} Code Mode sub-call{'' if subs == 1 else 's'}"
    if report.abort_at is not None:
        text += f"; the batch Abort fired at {report.abort_at:.2f} s"
    contexts = len(report.outcome.additional_contexts)
    if contexts:
        plural = "" if contexts == 1 else "s"
        text += f"; {contexts} context message{plural} delivered after the last result"
    return text


def result_lines(report: DemoReport) -> list[tuple[str, str, str, str, str]]:
    """The committed results in model order, as ``(#, call id, tool, result, content)``."""
    return [
        (
            str(committed.index),
            committed.call.call_id,
            committed.call.name,
            ("synthetic: " if committed.synthetic else "") + STATUS_TEXT[row.status],
            row.summary,
        )
        for committed, row in zip(report.outcome.results, batch_rows(report), strict=True)
    ]


def model_texts(report: DemoReport) -> list[tuple[str, str]]:
    """``(call id, text)`` of each ``run_code`` result: the durable content the model reads."""
    return [
        (
            committed.call.call_id,
            "\n".join(getattr(block, "text", "[image]") for block in committed.result.content),
        )
        for committed in report.outcome.results
        if committed.call.name == "run_code"
    ]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@final
class PlainConsole:
    """Plain-text progress: one line per event, then the results (no dependency).

    Args:
        stream: Where to write (default: ``sys.stdout`` at the time of each write).
    """

    refresh_interval: float | None = None

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._origin = 0.0
        self._board = Board(())

    def _write(self, text: str) -> None:
        stream = self._stream if self._stream is not None else sys.stdout
        stream.write(text + "\n")
        stream.flush()

    def _event(self, index: int, name: str, text: str) -> None:
        now = trio.current_time() - self._origin
        self._write(f"{now:7.3f}s  #{index:<2} {name:<11} {text}")

    def _view_event(self, view: CallView, text: str) -> None:
        name = f"\u21b3 {view.call.name}" if view.sub_call else view.call.name
        self._event(view.index, name, text)

    def start(self, settings: DemoSettings, origin: float) -> None:
        """Print the header."""
        self._origin = origin
        self._board = Board(settings.calls)
        self._write(f"dsh_sched demo: {settings.headline}")
        self._write(f"workspace: {settings.workspace}")
        self._write("")

    def on_call(self, event: CallStarted) -> None:
        """Print ``started``, with the mode and the arguments (synthetic calls wait)."""
        view = self._board.call(event)
        if not view.synthetic and view.mode is not None:
            text = f"started  {view.mode.value:<9} {arguments_text(view.call)}"
            self._event(view.index, view.call.name, _clip(text, 70))

    def on_result(self, event: CallCommitted) -> None:
        """Print ``committed`` with the status (and the reason of an error)."""
        view = self._board.result(event)
        if view.synthetic:
            text = "synthetic pair: " + STATUS_TEXT[view.status]
        else:
            text = "committed: " + STATUS_TEXT[view.status]
            error = event.result.error
            if error is not None and view.status in ("error", "denied"):
                text += f" ({error.message})"
        self._event(view.index, view.call.name, _clip(text, 80))

    def on_context(self, event: ContextAccepted) -> None:
        """Print the context message that was delivered."""
        text = " ".join(getattr(block, "text", "") for block in event.message.content)
        self._event(event.index, event.call.name, _clip("context delivered: " + text, 90))

    def body_started(self, token: ExecutionToken) -> None:
        """Print ``body running``."""
        view = self._board.body(token, trio.current_time() - self._origin, started=True)
        self._view_event(view, "body running")

    def body_ended(self, token: ExecutionToken) -> None:
        """Print ``body done``, and which earlier call its result waits for."""
        view = self._board.body(token, trio.current_time() - self._origin, started=False)
        head = self._board.head()
        late = not view.sub_call and head is not None and head < view.index
        waits = f", result waits for #{head}" if late else ""
        self._view_event(view, "body done" + waits)

    def sub_call_started(self, event: CodeDispatchStart, mode: ExecutionMode) -> None:
        """Print ``started`` for a Code Mode sub-call, under its ``run_code`` call."""
        view = self._board.sub_call(event, mode)
        text = f"{event.sub_call_id} started  {mode.value:<9} {arguments_text(view.call)}"
        self._view_event(view, _clip(text, 80))

    def sub_call_settled(self, event: CodeDispatch) -> None:
        """Print ``committed`` for a Code Mode sub-call, with its status."""
        view = self._board.sub_result(event)
        text = f"{event.sub_call_id} committed: {STATUS_TEXT[view.status]}"
        error = event.result.error
        if error is not None:
            text += f" ({error.message})"
        self._view_event(view, _clip(text, 90))

    def watch(self, statistics: Callable[[], BatchStatistics]) -> None:
        """Plain text prints events as they come; it keeps no counters."""

    def refresh(self) -> None:
        """Nothing to redraw."""

    def stop(self) -> None:
        """Nothing to stop."""

    def report(self, report: DemoReport) -> None:
        """Print the results in model order, the summary and the output paths."""
        self._write("")
        self._write("Committed results, in model order:")
        lines = result_lines(report)
        width = max((len(status) for _, _, _, status, _ in lines), default=0)
        for index, call_id, name, status, content in lines:
            line = f"  #{index:<2} {call_id:<8} {name:<11} {status:<{width}}  {content}"
            self._write(_clip(line.rstrip(), 118))
        for call_id, text in model_texts(report):
            self._write("")
            self._write(f"What the model receives for {call_id} (run_code's content):")
            for line in text.splitlines():
                self._write("  " + line)
        self._write("")
        self._write(summary_line(report))
        self._write(f"session log: {report.session_log}")
        self._write(f"timeline:    {report.timeline}")


def open_console(stream: TextIO | None = None, *, plain: bool = False) -> DemoConsole:
    """The best console available: rich's live table if ``rich`` is installed, else text.

    Args:
        stream: Where to write (default: standard output).
        plain: Use plain text even if ``rich`` is installed.

    Returns:
        A :class:`DemoConsole`.
    """
    if not plain:
        try:
            from ._rich import RichConsole
        except ModuleNotFoundError as exc:
            # rich is an optional extra (pip install 'dsh-trio[demo]'); only its absence
            # selects plain text, any other import failure is a bug and propagates.
            if exc.name is None or exc.name.partition(".")[0] != "rich":
                raise
        else:
            return RichConsole.for_stream(stream)
    return PlainConsole(stream)

"""The demo's live table, drawn with ``rich`` (the optional ``demo`` extra).

Imported only by :func:`~dsh_sched._demo._console.open_console`, and only when ``rich`` is
installed: the core packages never need it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO, final

import trio

# rich is an optional extra, so type-checking must pass without it: where it is missing,
# these names are Any (the ignores are coded, and unused where rich is installed).
from rich import box  # type: ignore[import-not-found, unused-ignore]
from rich.console import Console, Group  # type: ignore[import-not-found, unused-ignore]
from rich.live import Live  # type: ignore[import-not-found, unused-ignore]
from rich.spinner import Spinner  # type: ignore[import-not-found, unused-ignore]
from rich.table import Table  # type: ignore[import-not-found, unused-ignore]
from rich.text import Text  # type: ignore[import-not-found, unused-ignore]

from dsh_tools import ExecutionMode

from .._timeline_rows import STATUS_TEXT, arguments_text
from ._console import Board, CallView, DemoSettings, model_texts, result_lines, summary_line

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import RenderableType  # type: ignore[import-not-found, unused-ignore]

    from dsh_tools import CodeDispatch, CodeDispatchStart, ExecutionToken

    from .._outcome import BatchStatistics
    from .._sinks import CallCommitted, CallStarted, ContextAccepted
    from ._run import DemoReport

__all__ = ["RichConsole"]

_STATUS_STYLE = {
    "ok": ("✓", "green"),
    "error": ("✗", "red"),
    "denied": ("⊘", "magenta"),
    "aborted": ("■", "bright_black"),
    "aborted_before_dispatch": ("□", "bright_black"),
    "pending": ("?", "yellow"),
}


def _overhead(columns: int) -> int:
    # A SIMPLE_HEAD table without edge padding: one edge character on each side, and
    # padding + separator + padding between two columns.
    return 2 + 3 * (columns - 1)


@final
class RichConsole:
    """A live table of the batch (one row per call), then a results table.

    Args:
        console: The ``rich`` console to draw on (default: a new one on standard output).
        refresh_interval: Seconds between redraws while nothing happens, so that spinners
            and clocks move (``None``: redraw on events only, e.g. under a ``MockClock``,
            whose autojump would otherwise race through redraws while a worker thread
            does a file tool's I/O).
    """

    def __init__(
        self, console: Console | None = None, *, refresh_interval: float | None = 0.1
    ) -> None:
        self.console = console if console is not None else Console()
        self.refresh_interval = refresh_interval
        self._origin = 0.0
        self._board = Board(())
        self._settings: DemoSettings | None = None
        self._live: Live | None = None
        self._statistics: Callable[[], BatchStatistics] | None = None

    @classmethod
    def for_stream(cls, stream: TextIO | None) -> RichConsole:
        """A console writing to ``stream`` (``None``: standard output)."""
        return cls(Console(file=stream) if stream is not None else None)

    def _now(self) -> float:
        return trio.current_time() - self._origin

    def _state(self, view: CallView, head: int | None) -> RenderableType:
        if view.stage == "queued":
            return Text("queued", style="dim")
        if view.stage == "preparing":
            return Text("pre-execute", style="cyan")
        if view.stage == "running":
            alone = view.mode is ExecutionMode.EXCLUSIVE
            label = "running alone" if alone else "running"
            return Spinner("dots", Text(label, style="dark_orange" if alone else "blue"))
        if view.stage == "finished":
            late = not view.sub_call and head is not None and head < view.index
            waits = f", waits for #{head}" if late else ""
            return Text("done" + waits, style="yellow")
        mark, style = _STATUS_STYLE[view.status]
        text = STATUS_TEXT[view.status]
        if view.synthetic:
            text = "synthetic: " + text
        error = view.result.error if view.result is not None else None
        if error is not None and view.status in ("error", "denied"):
            text += f" ({error.message})"
        return Text(f"{mark} {text}", style=style)

    def _elapsed(self, view: CallView) -> str:
        if view.body_started is None:
            return ""
        end = view.body_ended if view.body_ended is not None else self._now()
        return f"{end - view.body_started:.2f} s"

    def _render(self) -> RenderableType:
        settings = self._settings
        limit = settings.max_parallel if settings is not None else 0
        head = self._board.head()
        # The arguments and the state share what the other columns leave, and are cut
        # with an ellipsis: one line per call.
        spare = max(self.console.width - (2 + 11 + 9 + 6) - _overhead(6), 24)
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column("#", justify="right", no_wrap=True)
        table.add_column("tool", no_wrap=True)
        table.add_column("arguments", no_wrap=True, overflow="ellipsis", max_width=spare * 2 // 5)
        table.add_column("mode", no_wrap=True)
        table.add_column("state", no_wrap=True, overflow="ellipsis", max_width=spare * 3 // 5)
        table.add_column("body", justify="right", no_wrap=True)
        for view in self._board.ordered():
            mode = view.mode.value if view.mode is not None else ""
            table.add_row(
                "" if view.sub_call else str(view.index),
                Text(f"\u21b3 {view.call.name}" if view.sub_call else view.call.name),
                Text(arguments_text(view.call), style="dim"),
                Text(mode, style="dark_orange" if view.mode is ExecutionMode.EXCLUSIVE else ""),
                self._state(view, head),
                self._elapsed(view),
            )
        # The counters come from the batch's own snapshot (Batch.statistics()) once the batch
        # runs; before that, from the board.
        stats = self._statistics() if self._statistics is not None else None
        if stats is None:
            running, committed = self._board.count("running"), self._board.count("committed")
            group = ""
        else:
            running, committed = stats.running, stats.committed
            group = "" if stats.group_mode is None else f"   group {stats.group_mode.value}"
        header = Text.assemble(
            ("dsh_sched demo", "bold"),
            f"  {self._now():5.2f} s   bodies running {running}/{limit}"
            f"   committed {committed}/{len(self._board.views)}{group}",
        )
        return Group(header, table)

    def _update(self) -> None:
        # Events and refreshes arrive only between start() and stop().
        assert self._live is not None, "the live display is not running"
        self._live.update(self._render(), refresh=True)

    def start(self, settings: DemoSettings, origin: float) -> None:
        """Print the header and start the live table."""
        self._settings = settings
        self._origin = origin
        self._board = Board(settings.calls)
        self.console.print(
            settings.headline,
            markup=False,
            highlight=False,
        )
        self.console.print(f"workspace: {settings.workspace}", markup=False, soft_wrap=True)
        # No auto-refresh thread and no stdout redirection: every redraw happens in the
        # trio thread, on an event or on refresh().
        self._live = Live(
            self._render(),
            console=self.console,
            auto_refresh=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start()

    def on_call(self, event: CallStarted) -> None:
        """Update the call's row."""
        self._board.call(event)
        self._update()

    def on_result(self, event: CallCommitted) -> None:
        """Update the call's row."""
        self._board.result(event)
        self._update()

    def on_context(self, event: ContextAccepted) -> None:
        """Contexts are not shown live (the demo's tools defer none)."""

    def body_started(self, token: ExecutionToken) -> None:
        """Update the call's row."""
        self._board.body(token, self._now(), started=True)
        self._update()

    def body_ended(self, token: ExecutionToken) -> None:
        """Update the call's row."""
        self._board.body(token, self._now(), started=False)
        self._update()

    def sub_call_started(self, event: CodeDispatchStart, mode: ExecutionMode) -> None:
        """Add a row for the Code Mode sub-call, under its ``run_code`` call."""
        self._board.sub_call(event, mode)
        self._update()

    def sub_call_settled(self, event: CodeDispatch) -> None:
        """Update the sub-call's row."""
        self._board.sub_result(event)
        self._update()

    def watch(self, statistics: Callable[[], BatchStatistics]) -> None:
        """Show the batch's counters (running, committed, the group's mode) in the header."""
        self._statistics = statistics

    def refresh(self) -> None:
        """Redraw (spinners and clocks move)."""
        self._update()

    def stop(self) -> None:
        """Draw the final table and stop the live display. Idempotent."""
        live, self._live = self._live, None
        if live is not None:
            live.update(self._render())
            live.stop()
            if not self.console.is_terminal:
                # Live ends its last line only on a terminal.
                self.console.line()

    def report(self, report: DemoReport) -> None:
        """Print the results in model order, the summary and the output paths."""
        lines = result_lines(report)
        # The content column gets what the others leave, and is cut with an ellipsis.
        # A column is as wide as its widest cell or its header, whichever is wider.
        headers = ("#", "call id", "tool", "result")
        fixed = sum(max(len(headers[k]), *(len(line[k]) for line in lines)) for k in range(4))
        spare = max(self.console.width - fixed - _overhead(5), 10)
        table = Table(
            title="Committed results, in model order",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
        )
        table.add_column("#", justify="right", no_wrap=True)
        table.add_column("call id", no_wrap=True)
        table.add_column("tool", no_wrap=True)
        table.add_column("result", no_wrap=True)
        table.add_column("content", no_wrap=True, overflow="ellipsis", max_width=spare)
        for index, call_id, name, status, content in lines:
            style = "green" if status == "ok" else "red" if status == "error" else "magenta"
            if "aborted" in status:
                style = "bright_black"
            table.add_row(index, call_id, name, Text(status, style=style), Text(content))
        self.console.print(table)
        for call_id, text in model_texts(report):
            self.console.print(
                f"What the model receives for {call_id} (run_code's content):", style="bold"
            )
            self.console.print(Text(text), soft_wrap=True)
        self.console.print(summary_line(report), markup=False, highlight=False)
        # soft_wrap: the paths are printed whole, never folded, so they can be copied.
        self.console.print(
            f"session log: {report.session_log}", markup=False, highlight=False, soft_wrap=True
        )
        self.console.print(
            f"timeline:    {report.timeline}", markup=False, highlight=False, soft_wrap=True
        )

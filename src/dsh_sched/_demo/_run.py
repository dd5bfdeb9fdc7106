"""``run_demo``: one scripted batch, live progress, the session log and the timeline.

The demo is an ordinary user of the public API: it builds a ``ToolRuntime`` with the
example file tools, registers a ``TraceRecorder`` (to draw the timeline), the body watcher
(for live progress) and a guard, and runs the scripted calls with ``open_batch``
through a sink that fans every event out to the ``JsonlSessionLog`` and the console.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, final

import attrs
import trio

from dsh_tools import Abort, PresentationMode, ToolRuntime

from .._batch import DEFAULT_MAX_PARALLEL, open_batch
from .._outcome import BatchOutcome
from .._session_log import JsonlSessionLog
from .._trace_recorder import sub_call_mode
from ..testing import TimelineRow, TraceEvent, TraceRecorder, render_timeline, timeline_rows
from ._console import DemoConsole, DemoSettings, open_console
from ._paths import SESSION_LOG_NAME, TIMELINE_NAME, check_paths, reported_as
from ._script import (
    default_code_runtime,
    demo_calls,
    demo_code_calls,
    demo_tools,
    protect_secrets,
    seed_workspace,
)

if TYPE_CHECKING:
    import os

    from dsh_tools.code import CodeRuntime

    from .._calls import ModelToolCall
    from .._sinks import CallCommitted, CallStarted, ContextAccepted, Sink

__all__ = ["DemoReport", "run_demo"]


@final
@attrs.frozen(kw_only=True)
class DemoReport:
    """What one demo run did.

    Attributes:
        outcome: The batch outcome: one committed result per call, in model order.
        rows: The timeline rows, one per call, in model order.
        events: The full trace the timeline was drawn from.
        session_log: The JSONL session log (scheduler.md §11).
        timeline: The SVG timeline.
        workspace: The directory the file tools worked in.
        max_parallel: The batch's ``max_parallel``.
        elapsed: Seconds (trio clock) from the start of the batch to its end.
        abort_at: Seconds after the start when the batch ``Abort`` fired, or ``None``.
    """

    outcome: BatchOutcome
    rows: tuple[TimelineRow, ...]
    events: tuple[TraceEvent, ...]
    session_log: Path
    timeline: Path
    workspace: Path
    max_parallel: int
    elapsed: float
    abort_at: float | None


@final
class _Tee:
    """A sink that forwards every event to several sinks, in order."""

    def __init__(self, *sinks: Sink) -> None:
        self._sinks = sinks

    def on_call(self, event: CallStarted) -> None:
        for sink in self._sinks:
            sink.on_call(event)

    def on_result(self, event: CallCommitted) -> None:
        for sink in self._sinks:
            sink.on_result(event)

    def on_context(self, event: ContextAccepted) -> None:
        for sink in self._sinks:
            sink.on_context(event)


@final
@attrs.define
class _AbortTimer:
    """Fires the batch ``Abort`` after a delay and remembers when (seconds from origin)."""

    abort: Abort
    delay: float
    origin: float
    fired_at: float | None = None

    def fire(self) -> None:
        self.fired_at = trio.current_time() - self.origin
        self.abort.abort(f"--abort-after {self.delay:g} elapsed")

    async def run(self) -> None:
        await trio.sleep(self.delay)
        self.fire()


def _prepare(out_dir: Path, workspace: Path) -> tuple[Path, Path]:
    """Check, then create the output directory and the workspace (blocking I/O: in a thread)."""
    check_paths(out_dir, workspace)
    out, root = out_dir.resolve(), workspace.resolve()
    with reported_as("out_dir", out):
        out.mkdir(parents=True, exist_ok=True)
        # A fresh log per run: JsonlSessionLog appends, and this file is the demo's own.
        (out / SESSION_LOG_NAME).unlink(missing_ok=True)
    with reported_as("workspace", root):
        seed_workspace(root)
    return out, root


async def _keep_refreshing(console: DemoConsole, interval: float) -> None:
    while True:
        await trio.sleep(interval)
        console.refresh()


async def _run_batch(
    runtime: ToolRuntime,
    calls: tuple[ModelToolCall, ...],
    sink: Sink,
    abort: Abort,
    max_parallel: int,
    timer: _AbortTimer | None,
    console: DemoConsole,
) -> BatchOutcome:
    failure: BaseException | None = None
    outcome: BatchOutcome | None = None
    async with trio.open_nursery() as helpers:
        if timer is not None:
            helpers.start_soon(timer.run)
        if console.refresh_interval is not None:
            helpers.start_soon(_keep_refreshing, console, console.refresh_interval)
        try:
            batch = open_batch(runtime, calls, abort=abort, max_parallel=max_parallel, sink=sink)
            # The live display reads the batch's counters from its own snapshot.
            console.watch(batch.statistics)
            async with batch:
                pass
            outcome = batch.outcome
        except BaseException as exc:
            # Re-raised below, after the helpers' nursery: the scheduler raises one exception
            # alone (a KeyboardInterrupt, say; scheduler.md §9), and so does the demo.
            failure = exc
        # The timer and the refresher only matter while the batch runs.
        helpers.cancel_scope.cancel()
    if failure is not None:
        raise failure
    assert outcome is not None
    return outcome


def _check(max_parallel: object, abort_after: object) -> None:
    if isinstance(max_parallel, bool) or not isinstance(max_parallel, int):
        raise TypeError("max_parallel must be a positive integer")
    if max_parallel < 1:
        raise ValueError("max_parallel must be a positive integer")
    if abort_after is None:
        return
    if isinstance(abort_after, bool) or not isinstance(abort_after, int | float):
        raise TypeError(f"abort_after must be a number of seconds or None, got {abort_after!r}")
    if not math.isfinite(abort_after) or abort_after < 0:
        raise ValueError(f"abort_after must be finite and not negative, got {abort_after!r}")


async def run_demo(
    *,
    out_dir: str | os.PathLike[str],
    workspace: str | os.PathLike[str],
    max_parallel: int = DEFAULT_MAX_PARALLEL,
    abort_after: float | None = None,
    console: DemoConsole | None = None,
    code_mode: bool = False,
    code_runtime: CodeRuntime | None = None,
) -> DemoReport:
    """Run the scripted batch over the example tools, with live progress.

    The 13 scripted calls (:func:`demo_calls`) run through :func:`~dsh_sched.open_batch`
    with a sink that feeds a ``TraceRecorder``, the ``JsonlSessionLog`` and the console.
    Afterwards the console prints the committed results in model order (I2), the log holds
    one ``tool/call`` / ``tool/result`` pair per call (S-006, I3), and the timeline shows
    one row per call. With ``abort_after``, the batch ``Abort`` fires after that many
    seconds: started calls drain and commit (``ABORTED`` if their body was cut short, an
    error stays an error), every call not started gets a synthetic
    ``ABORTED_BEFORE_DISPATCH`` pair (S-016, S-017); ``abort_after=0`` fires it before the
    batch starts, so every call is synthetic (S-014).

    Args:
        out_dir: Where ``session.jsonl`` and ``timeline.svg`` are written (created if
            missing). Those two files are replaced; nothing else there is touched.
        workspace: The file tools' directory: a new or empty one, where the demo creates
            its files (it refuses any other, so that it never changes the user's files).
        max_parallel: The batch's ``max_parallel``.
        abort_after: Seconds after which the batch ``Abort`` fires, or ``None``.
        console: Where progress goes (default: :func:`open_console` on standard output).
        code_mode: Present the tools in Code Mode: the scripted model sends one
            ``run_code`` call (:func:`demo_code_calls`) whose program calls the tools; the
            console and the timeline show its sub-calls under it.
        code_runtime: The code runtime for ``code_mode`` (default:
            :func:`default_code_runtime`'s choice).

    Returns:
        The :class:`DemoReport`.

    Raises:
        TypeError: ``max_parallel`` or ``abort_after`` has the wrong type.
        ValueError: ``max_parallel < 1``, or ``abort_after`` negative or not finite.
        DemoPathError: ``out_dir`` or ``workspace`` cannot be used (see
            :func:`~dsh_sched._demo.check_paths`); raised before the batch starts.
    """
    _check(max_parallel, abort_after)
    if console is None:
        console = open_console()
    out, root = await trio.to_thread.run_sync(_prepare, Path(out_dir), Path(workspace))
    log_path = out / SESSION_LOG_NAME
    timeline_path = out / TIMELINE_NAME

    calls = demo_code_calls() if code_mode else demo_calls()
    settings = DemoSettings(
        calls=calls,
        max_parallel=max_parallel,
        abort_after=abort_after,
        workspace=root,
        out_dir=out,
        code_mode=code_mode,
    )
    if code_mode and code_runtime is None:
        code_runtime = default_code_runtime()[0]
    prepare = getattr(code_runtime, "prepare", None)
    if code_mode and prepare is not None:
        # WasiCodeRuntime loads (and, the first time, compiles) its sandbox here, so that
        # the timeline shows the program's run, not the one-time set-up.
        await prepare()
    runtime = ToolRuntime(
        mode=PresentationMode.CODE if code_mode else PresentationMode.NATIVE,
        code_runtime=code_runtime,
    )
    abort = Abort()
    with JsonlSessionLog(log_path) as log:
        # The recorder first, so that its hook spans are outermost (scheduler.md §14).
        recorder = TraceRecorder(runtime, sink=_Tee(log, console))
        if code_mode:
            shown = console
            runtime.on_code_dispatch_start(
                lambda event: shown.sub_call_started(event, sub_call_mode(runtime, event))
            )
            runtime.on_code_dispatch(shown.sub_call_settled)
        for definition in demo_tools(root, console):
            runtime.register(recorder.instrument(definition))
        runtime.guard(protect_secrets)

        origin = trio.current_time()
        timer = _AbortTimer(abort, abort_after or 0.0, origin)
        console.start(settings, origin)
        try:
            if abort_after == 0:
                timer.fire()
            outcome = await _run_batch(
                runtime,
                calls,
                recorder,
                abort,
                max_parallel,
                timer if abort_after else None,
                console,
            )
            elapsed = trio.current_time() - origin
        finally:
            console.stop()
            recorder.close()

    events = tuple(recorder.events)
    rows = timeline_rows(events, origin=origin)
    subs = len(rows) - len(calls)
    title = f"dsh_sched demo: {len(calls)} tool calls, max_parallel={max_parallel}"
    if code_mode:
        title = f"dsh_sched demo, Code Mode: one run_code call and its {subs} sub-calls"
    svg = render_timeline(
        rows,
        title=title,
        subtitle=(
            "parallel-safe calls share a rolling pool; exclusive calls run alone; "
            "results commit in model order"
        ),
        abort_at=timer.fired_at,
    )
    await trio.Path(timeline_path).write_text(svg, encoding="utf-8")
    report = DemoReport(
        outcome=outcome,
        rows=rows,
        events=events,
        session_log=log_path,
        timeline=timeline_path,
        workspace=root,
        max_parallel=max_parallel,
        elapsed=elapsed,
        abort_at=timer.fired_at,
    )
    console.report(report)
    return report

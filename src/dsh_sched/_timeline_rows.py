"""The batch timeline's data: trace events in, one :class:`TimelineRow` per call out (pure).

Nothing here does I/O or reads a clock: :func:`timeline_rows` folds the events a
:class:`~dsh_sched.testing.TraceRecorder` recorded for one batch into one row per call, and
:func:`~dsh_sched.testing.render_timeline` (``_timeline_svg``) draws those rows.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Literal, TypeAlias, final

import attrs

from dsh_tools import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    RUN_CODE_NAME,
    TOOL_DENIED,
    CodeDispatch,
    ExecutionMode,
    ToolResult,
    thaw_json,
)

from ._sinks import CallCommitted, CallStarted
from ._trace_recorder import SubCallStart

if TYPE_CHECKING:
    from collections.abc import Iterable

    from dsh_tools import ContentBlock, JsonValue

    from ._calls import ModelToolCall
    from ._trace_recorder import TraceEvent

__all__ = [
    "STATUS_TEXT",
    "Status",
    "TimelineRow",
    "arguments_text",
    "result_status",
    "timeline_rows",
]

Status: TypeAlias = Literal[
    "ok", "error", "denied", "aborted", "aborted_before_dispatch", "pending"
]

#: How each status is written out for people.
STATUS_TEXT: dict[Status, str] = {
    "ok": "ok",
    "error": "error",
    "denied": "denied",
    "aborted": "aborted",
    "aborted_before_dispatch": "aborted before dispatch",
    "pending": "no result",
}


def result_status(result: ToolResult | None) -> Status:
    """Classify a committed result for display, by its error code.

    Args:
        result: The committed result; ``None`` when the call never got one.

    Returns:
        ``ok``, ``error``, ``denied`` (``TOOL_DENIED``), ``aborted``,
        ``aborted_before_dispatch`` or ``pending``.
    """
    if result is None:
        return "pending"
    error = result.error
    if error is None:
        return "ok"
    code = error.info.code if error.info is not None else None
    if code == ABORTED:
        return "aborted"
    if code == ABORTED_BEFORE_DISPATCH:
        return "aborted_before_dispatch"
    if code == TOOL_DENIED:
        return "denied"
    return "error"


def arguments_text(call: ModelToolCall) -> str:
    """The call's arguments on one line: the raw text as the model sent it, or compact JSON.

    A ``run_code`` call shows its ``description`` instead (``program: <description>``): its
    program is many lines of code, its description the few words meant for people.
    """
    raw = call.arguments
    if call.name == RUN_CODE_NAME:
        description = _program_description(raw)
        if description is not None:
            return f"program: {description}"
    if isinstance(raw, str):
        return " ".join(raw.split())
    return json_text(raw)


def _program_description(raw: object) -> str | None:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return None
    description = raw.get("description") if isinstance(raw, dict) else None
    return " ".join(description.split()) if isinstance(description, str) else None


def json_text(value: JsonValue) -> str:
    """A frozen JSON value as compact JSON on one line."""
    return json.dumps(thaw_json(value), ensure_ascii=False, separators=(", ", ": "))


@final
@attrs.frozen(kw_only=True)
class TimelineRow:
    """One call of the batch as the timeline shows it; times are seconds from the origin.

    Attributes:
        index: Position in the batch (model order).
        call_id: The model's call id.
        name: The tool name.
        arguments: The arguments on one line (:func:`arguments_text`).
        mode: The mode the call started under; ``None`` for a synthetic call.
        synthetic: Recorded by the scheduler without starting the call (scheduler.md §6).
        started: When its ``on_call`` was reported.
        body: ``(start, end)`` of its body span, or ``None`` if the body never ran (for a
            ``run_code`` call, from the end of its pre-execute hooks to the start of its
            post-execute hooks: the program's run).
        committed: When its result was committed (``None``: no result was committed).
        status: See :func:`result_status`.
        summary: The result's first text block, on one line.
        parent_call_id: For a Code Mode sub-call, the ``call_id`` of the ``run_code`` call
            that made it (its row follows that call's row; ``index`` is that call's,
            ``call_id`` the sub-call's ``<call_id>:code:<n>``); ``None`` for a batch call.
    """

    index: int
    call_id: str
    name: str
    arguments: str
    mode: ExecutionMode | None
    synthetic: bool
    started: float
    body: tuple[float, float] | None
    committed: float | None
    status: Status
    summary: str
    parent_call_id: str | None = None


def _one_line(content: tuple[ContentBlock, ...]) -> str:
    # The first text block with its whitespace collapsed: JSON renders on one line.
    for block in content:
        text = getattr(block, "text", None)
        if isinstance(text, str) and text.strip():
            return " ".join(text.split())
    return ""


def _sub_rows(
    events: Iterable[TraceEvent],
    origin: float,
    bodies: dict[object, list[float]],
    parents: dict[str, int],
) -> dict[str, list[TimelineRow]]:
    """The Code Mode sub-call rows, by the ``call_id`` of their ``run_code`` call.

    ``parents`` gives the batch index of each reported call; sub-calls of other calls are
    not this batch's.
    """
    starts: dict[str, tuple[float, SubCallStart]] = {}
    settled: dict[str, tuple[float, CodeDispatch]] = {}
    for event in events:
        detail = event.detail
        if event.kind == "sub_call" and isinstance(detail, SubCallStart):
            starts.setdefault(detail.event.sub_call_id, (event.time - origin, detail))
        elif event.kind == "sub_result" and isinstance(detail, CodeDispatch):
            settled.setdefault(detail.sub_call_id, (event.time - origin, detail))
    rows: dict[str, list[TimelineRow]] = {}
    for sub_call_id, (at, start) in starts.items():
        record = start.event
        index = parents.get(record.parent_call_id)
        if index is None:
            continue
        times = bodies.get(record.execution.token)
        done = settled.get(sub_call_id)
        rows.setdefault(record.parent_call_id, []).append(
            TimelineRow(
                index=index,
                call_id=sub_call_id,
                name=record.name,
                arguments=json_text(record.arguments),
                mode=start.mode,
                synthetic=False,
                started=at,
                body=(min(times), max(times)) if times else None,
                committed=done[0] if done is not None else None,
                status=result_status(done[1].result if done is not None else None),
                summary=_one_line(done[1].content) if done is not None else "",
                parent_call_id=record.parent_call_id,
            )
        )
    return rows


def timeline_rows(events: Iterable[TraceEvent], *, origin: float = 0.0) -> tuple[TimelineRow, ...]:
    """Fold one batch's trace into one row per reported call, in model order.

    Body spans are tied to their call through the execution token carried by its
    ``on_call`` (scheduler.md §14); spans of other executions are ignored. A call retried
    by a wrapper has several body spans: its row spans the first start to the last end.
    The Code Mode sub-calls of a ``run_code`` call (``sub_call`` / ``sub_result`` events)
    get rows of their own right after its row, in the order they started.

    Args:
        events: What a ``TraceRecorder`` recorded for one batch.
        origin: Subtracted from every time (e.g. when the batch was started).

    Returns:
        One :class:`TimelineRow` per call that has an ``on_call``, ordered by index.

    Raises:
        ValueError: The sink events come from more than one batch.
    """
    events = tuple(events)
    started: dict[int, tuple[float, CallStarted]] = {}
    committed: dict[int, tuple[float, CallCommitted]] = {}
    bodies: dict[object, list[float]] = {}
    hooks: dict[object, dict[str, float]] = {}
    batches: set[int] = set()
    for event in events:
        detail = event.detail
        if event.kind == "call" and isinstance(detail, CallStarted):
            batches.add(detail.batch)
            started.setdefault(detail.index, (event.time - origin, detail))
        elif event.kind == "result" and isinstance(detail, CallCommitted):
            batches.add(detail.batch)
            committed.setdefault(detail.index, (event.time - origin, detail))
        elif event.kind in ("body_start", "body_end") and event.token is not None:
            bodies.setdefault(event.token, []).append(event.time - origin)
        elif event.kind in ("pre_end", "post_start") and event.token is not None:
            hooks.setdefault(event.token, {}).setdefault(event.kind, event.time - origin)
    if len(batches) > 1:
        raise ValueError(
            f"a timeline shows one batch; these events come from batches {sorted(batches)}"
        )
    parents = {call.call.call_id: index for index, (_, call) in started.items()}
    subs = _sub_rows(events, origin, bodies, parents)
    rows = []
    for index in sorted(started):
        at, call = started[index]
        times = bodies.get(call.token) if call.token is not None else None
        body = (min(times), max(times)) if times else None
        if body is None and call.call.name == RUN_CODE_NAME and call.token is not None:
            # run_code's body is the library's own, never instrumented: the program runs
            # from the end of its pre-execute hooks to the start of its post-execute hooks.
            span = hooks.get(call.token, {})
            if "pre_end" in span and "post_start" in span:
                body = (span["pre_end"], span["post_start"])
        done = committed.get(index)
        result = done[1].result if done is not None else None
        rows.append(
            TimelineRow(
                index=index,
                call_id=call.call.call_id,
                name=call.call.name,
                arguments=arguments_text(call.call),
                mode=call.mode,
                synthetic=call.synthetic,
                started=at,
                body=body,
                committed=done[0] if done is not None else None,
                status=result_status(result),
                summary=_one_line(result.content) if result is not None else "",
            )
        )
        rows.extend(subs.get(call.call.call_id, ()))
    return tuple(rows)

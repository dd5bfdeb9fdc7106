"""The batch timeline (``dsh_sched.testing``): ``timeline_rows`` and ``render_timeline``.

Both are pure: rows are folded from hand-made traces here, and drawn SVG is parsed back to
check what it shows. A real batch's timeline is checked in ``tests/test_sched_demo.py``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from dsh_sched import CallCommitted, CallStarted, ModelToolCall
from dsh_sched._timeline_rows import result_status
from dsh_sched._trace_recorder import SubCallStart
from dsh_sched.testing import TimelineRow, TraceEvent, render_timeline, timeline_rows
from dsh_tools import (
    ABORTED,
    ABORTED_BEFORE_DISPATCH,
    AbortError,
    CodeDispatchStart,
    ErrorInfo,
    ExecutionMode,
    FrozenDict,
    ImageContent,
    TextContent,
    ToolCall,
    ToolDeniedError,
    ToolError,
    ToolResult,
    ToolRuntime,
    error_result,
    lowlevel,
)

SVG = "{http://www.w3.org/2000/svg}"


def row(index: int, **fields: Any) -> TimelineRow:
    values: dict[str, Any] = {
        "index": index,
        "call_id": f"c{index}",
        "name": "t",
        "arguments": "{}",
        "mode": ExecutionMode.PARALLEL,
        "synthetic": False,
        "started": 0.0,
        "body": (0.0, 1.0),
        "committed": 1.0,
        "status": "ok",
        "summary": "",
    }
    values.update(fields)
    return TimelineRow(**values)


def test_render_timeline_is_deterministic_and_escapes_text() -> None:
    tricky = '{"path": "<a & \'b\'>", "q": "]]>"}'
    rows = [
        row(0, arguments=tricky, summary='done <now> & "then"'),
        row(1, mode=ExecutionMode.EXCLUSIVE, body=None, status="denied", summary="Error: no"),
    ]
    first = render_timeline(rows, title="T <&>", subtitle='"s"', abort_at=0.5)
    assert first == render_timeline(rows, title="T <&>", subtitle='"s"', abort_at=0.5)
    root = ET.fromstring(first.encode("utf-8"))
    assert root.find(f"{SVG}title") is not None
    assert root.findtext(f"{SVG}title") == "T <&>"
    drawn = svg_rows_of(root)
    tooltip = drawn[0].findtext(f"{SVG}title") or ""
    assert tricky in tooltip
    assert 'done <now> & "then"' in tooltip
    assert "body never ran" in (drawn[1].findtext(f"{SVG}title") or "")
    texts = [t.text for t in drawn[1].iter(f"{SVG}text")]
    assert texts[-1] == "denied: no"


def svg_rows_of(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if "row" in g.get("class", "").split()]


def test_render_timeline_with_no_rows_and_with_unfinished_calls() -> None:
    empty = ET.fromstring(render_timeline([], title="empty").encode("utf-8"))
    assert svg_rows_of(empty) == []
    ticks = [t.text for t in empty.iter(f"{SVG}text") if t.text and t.text.endswith(" s")]
    assert ticks == ["0 s", "0.02 s"]
    # A call that never got a result (a batch that failed internally) has no commit mark.
    pending = [
        row(0, committed=None, status="pending", body=(0.0, 0.3)),
        row(1, mode=ExecutionMode.EXCLUSIVE, committed=None, status="pending", body=None),
    ]
    root = ET.fromstring(render_timeline(pending, title="t").encode("utf-8"))
    drawn = svg_rows_of(root)
    assert [list(g.iter(f"{SVG}polygon")) for g in drawn] == [[], []]
    assert [g.get("data-status") for g in drawn] == ["pending", "pending"]
    # The unfinished exclusive call still shades its barrier (besides the legend swatch).
    barriers = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "barrier"]
    assert len(barriers) == 2


@pytest.mark.parametrize(
    ("result", "status"),
    [
        (None, "pending"),
        (ToolResult(is_error=False, value=1), "ok"),
        (error_result(AbortError(ABORTED)), "aborted"),
        (error_result(AbortError(ABORTED_BEFORE_DISPATCH)), "aborted_before_dispatch"),
        (error_result(ToolDeniedError("no")), "denied"),
        # A hook that raised a plain exception is an error, not a denial: only the code counts.
        (ToolResult(is_error=True, error=ToolError("no")), "error"),
        (ToolResult(is_error=True, error=ToolError("x", ErrorInfo("E", "C"))), "error"),
    ],
)
def test_result_status(result: ToolResult | None, status: str) -> None:
    assert result_status(result) == status


def test_timeline_rows_refuses_events_of_two_batches() -> None:
    call = ModelToolCall(call_id="c", name="t", arguments="{}")
    events = [
        TraceEvent(
            kind="call",
            batch=number,
            index=0,
            token=None,
            time=0.0,
            detail=CallStarted(
                batch=number, index=0, call=call, mode=None, token=None, synthetic=True
            ),
        )
        for number in (1, 2)
    ]
    with pytest.raises(ValueError, match=r"one batch; these events come from batches \[1, 2\]"):
        timeline_rows(events)


def test_timeline_rows_show_mapping_arguments_as_json() -> None:
    call = ModelToolCall(call_id="c", name="t", arguments={"path": "é", "n": [1, 2]})
    started = CallStarted(batch=1, index=0, call=call, mode=None, token=None, synthetic=True)
    result = error_result(AbortError(ABORTED_BEFORE_DISPATCH))
    committed = CallCommitted(batch=1, index=0, call=call, result=result, synthetic=True)
    events = [
        TraceEvent(kind="call", batch=1, index=0, token=None, time=5.0, detail=started),
        TraceEvent(kind="result", batch=1, index=0, token=None, time=5.0, detail=committed),
    ]
    (only,) = timeline_rows(events, origin=4.0)
    assert only.arguments == '{"path": "é", "n": [1, 2]}'
    assert (only.started, only.committed, only.synthetic) == (1.0, 1.0, True)
    assert only.summary == "Error: tool call aborted before dispatch"


@pytest.mark.parametrize(
    ("content", "summary"),
    [
        ((), ""),
        ((ImageContent("aGk=", "image/png"),), ""),
        ((TextContent(" \n "), TextContent("second\n  block")), "second block"),
    ],
)
def test_a_rows_summary_is_its_first_non_blank_text(
    content: tuple[TextContent | ImageContent, ...], summary: str
) -> None:
    call = ModelToolCall(call_id="c", name="t", arguments="")
    token = lowlevel.create(ToolRuntime(), ToolCall(call_id="c", name="t")).token
    started = CallStarted(
        batch=1, index=0, call=call, mode=ExecutionMode.PARALLEL, token=token, synthetic=False
    )
    result = ToolResult(is_error=False, content=content)
    committed = CallCommitted(batch=1, index=0, call=call, result=result, synthetic=False)
    events = [
        TraceEvent(kind="call", batch=1, index=0, token=token, time=0.0, detail=started),
        TraceEvent(kind="body_start", batch=None, index=None, token=token, time=1.0),
        TraceEvent(kind="body_end", batch=None, index=None, token=token, time=2.0),
        TraceEvent(kind="result", batch=1, index=0, token=token, time=3.0, detail=committed),
    ]
    (only,) = timeline_rows(events)
    assert (only.body, only.committed, only.status, only.summary) == (
        (1.0, 2.0),
        3.0,
        "ok",
        summary,
    )
    (pending,) = timeline_rows(events[:3])
    assert (pending.committed, pending.status, pending.summary) == (None, "pending", "")


def test_run_code_rows_their_span_and_foreign_sub_calls() -> None:
    """A run_code row's body is its program's run, from the end of its pre-execute hooks to
    the start of its post-execute hooks, and only when both were recorded; sub-call events
    of a call this batch did not report are not this batch's."""
    runtime = ToolRuntime()
    token = lowlevel.create(runtime, ToolCall(call_id="c1", name="run_code")).token
    call = ModelToolCall(call_id="c1", name="run_code", arguments='{"description": "d"}')
    started = CallStarted(
        batch=1, index=0, call=call, mode=ExecutionMode.EXCLUSIVE, token=token, synthetic=False
    )
    foreign = lowlevel.create(runtime, ToolCall(call_id="other:code:1", name="t"))
    sub = SubCallStart(
        event=CodeDispatchStart(
            root_call_id="other",
            parent_call_id="other",
            sub_call_id="other:code:1",
            name="t",
            arguments=FrozenDict(),
            execution=foreign,
        ),
        mode=ExecutionMode.PARALLEL,
    )
    events = [
        TraceEvent(kind="call", batch=1, index=0, token=token, time=0.0, detail=started),
        TraceEvent(
            kind="sub_call", batch=None, index=None, token=foreign.token, time=0.5, detail=sub
        ),
        TraceEvent(kind="pre_end", batch=None, index=None, token=token, time=1.0),
        TraceEvent(kind="post_start", batch=None, index=None, token=token, time=4.0),
    ]
    (only,) = timeline_rows(events)  # the foreign sub-call has no row
    assert (only.arguments, only.body) == ("program: d", (1.0, 4.0))
    (unstarted,) = timeline_rows(events[:3])  # no post-execute recorded: no span
    assert unstarted.body is None

"""The batch timeline drawn as SVG: one row per call, a time axis, barriers and a legend.

Pure: :func:`render_timeline` turns :class:`~dsh_sched.testing.TimelineRow` values into a
self-contained SVG document, doing no I/O and reading no clock; the same rows always give
the same bytes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING
from xml.sax.saxutils import escape, quoteattr

from dsh_tools import ExecutionMode

from ._timeline_rows import STATUS_TEXT, Status

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ._timeline_rows import TimelineRow

__all__ = ["render_timeline"]

_WIDTH = 1180
_LABEL_X = 16
_PLOT_X0 = 360
_PLOT_X1 = 900
_STATUS_X = _PLOT_X1 + 16
_ROW_H = 24
_ROWS_Y = 132
_BAR_H = 12

_STATUS_FILL: dict[Status, str] = {
    "ok": "#54a24b",
    "error": "#e45756",
    "denied": "#b279a2",
    "aborted": "#6f6f6f",
    "aborted_before_dispatch": "#ffffff",
    "pending": "#ffffff",
}

_STYLE = """
text { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px;
       fill: #222; }
.title { font-size: 16px; font-weight: bold; }
.subtitle, .tick text, .legend text { fill: #555; }
.grid { stroke: #e3e3e3; stroke-width: 1; }
.zebra { fill: #f6f6f6; }
.barrier { fill: #f58518; fill-opacity: 0.10; stroke: #f58518; stroke-opacity: 0.55;
           stroke-dasharray: 4 3; }
.wait { stroke: #9d9d9d; stroke-width: 2; }
.body-parallel { fill: #4c78a8; }
.body-exclusive { fill: #f58518; }
.oncall { fill: #333; }
.commit { stroke: #333; stroke-width: 1; }
.synthetic-mark { fill: #ffffff; stroke: #6f6f6f; stroke-width: 1.5; stroke-dasharray: 2 2; }
.abort { stroke: #d62728; stroke-width: 2; stroke-dasharray: 6 4; }
.abort-label { fill: #d62728; font-weight: bold; }
"""


def _num(value: float) -> str:
    # Fixed precision and no "-0": the same rows always give the same bytes.
    text = f"{value:.1f}"
    return "0.0" if text == "-0.0" else text


def _seconds(value: float) -> str:
    return f"{value:.3f} s"


def _tick(value: float) -> str:
    return f"{round(value, 6):g} s"


def _open(name: str, attributes: dict[str, object]) -> str:
    parts = [name]
    for key, value in attributes.items():
        rendered = _num(value) if isinstance(value, float) else str(value)
        parts.append(f"{key}={quoteattr(rendered)}")
    return "<" + " ".join(parts) + ">"


def _tag(name: str, attributes: dict[str, object], body: str | None = None) -> str:
    opening = _open(name, attributes)
    if body is None:
        return opening[:-1] + "/>"
    return f"{opening}{body}</{name}>"


def _text(x: float, y: float, text: str, **attributes: object) -> str:
    return _tag("text", {"x": x, "y": y, **attributes}, escape(text))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _nice_step(span: float) -> float:
    raw = span / 8
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for factor in (1.0, 2.0, 2.5, 5.0):
        if factor * magnitude >= raw:
            return factor * magnitude
    return 10.0 * magnitude


def _diamond(x: float, y: float, r: float) -> str:
    return " ".join(
        f"{_num(px)},{_num(py)}" for px, py in ((x, y - r), (x + r, y), (x, y + r), (x - r, y))
    )


def _legend(y: float, abort: bool) -> list[str]:
    out = ['<g class="legend">']
    x = float(_LABEL_X)
    mid = y - 4

    def item(glyph: str, label: str, width: float) -> None:
        nonlocal x
        out.append(glyph)
        out.append(_text(x + 22, y, label))
        x += width

    item(
        _tag(
            "rect", {"class": "body-parallel", "x": x, "y": mid - 5, "width": 16.0, "height": 10.0}
        ),
        "parallel-safe body",
        170,
    )
    item(
        _tag(
            "rect", {"class": "body-exclusive", "x": x, "y": mid - 5, "width": 16.0, "height": 10.0}
        ),
        "exclusive body",
        140,
    )
    item(
        _tag("rect", {"class": "barrier", "x": x, "y": mid - 7, "width": 16.0, "height": 14.0}),
        "barrier: the batch waits for it",
        260,
    )
    item(
        _tag("line", {"class": "wait", "x1": x, "y1": mid, "x2": x + 16, "y2": mid}),
        "started, not running or not yet committed",
        330,
    )
    out.append("</g>")
    out.append('<g class="legend">')
    x = float(_LABEL_X)
    y += 20
    mid = y - 4
    item(_tag("circle", {"class": "oncall", "cx": x + 8, "cy": mid, "r": 3.5}), "on_call", 100)
    for status in ("ok", "error", "denied", "aborted"):
        fill = _STATUS_FILL[status]
        item(
            _tag("polygon", {"class": "commit", "points": _diamond(x + 8, mid, 6), "fill": fill}),
            f"committed: {STATUS_TEXT[status]}",
            160,
        )
    item(
        _tag("circle", {"class": "synthetic-mark", "cx": x + 8, "cy": mid, "r": 5.5}),
        "synthetic (never started)",
        230,
    )
    if abort:
        item(
            _tag(
                "line", {"class": "abort", "x1": x + 8, "y1": mid - 7, "x2": x + 8, "y2": mid + 7}
            ),
            "abort fired",
            120,
        )
    out.append("</g>")
    return out


def render_timeline(
    rows: Sequence[TimelineRow],
    *,
    title: str,
    subtitle: str = "",
    abort_at: float | None = None,
) -> str:
    """Draw the rows as an SVG document: one row per call, a time axis and a legend.

    Each row shows when the call was started (its ``on_call``, a dot), when its body ran
    (a bar: blue for a parallel-safe call, orange for an exclusive one), the wait between
    them and up to its commit (a grey line: pre-execute, then waiting for the head of the
    line, S-005), and its commit (a diamond coloured by status). An exclusive call's span
    is shaded across every row: it is a barrier (I4). A synthetic call (S-014, S-016) is a
    hollow circle where its pair was recorded. Every row is a ``<g class="row ...">`` with
    ``data-index``, ``data-call-id``, ``data-mode`` and ``data-status`` attributes and a
    ``<title>`` tooltip.

    Args:
        rows: The calls, in model order (:func:`timeline_rows`).
        title: The heading.
        subtitle: A second heading line.
        abort_at: When the batch ``Abort`` fired (seconds from the rows' origin), drawn as a
            dashed red line.

    Returns:
        A complete SVG document (UTF-8 text, ending with a newline).

    Example:
        Record a batch with a :class:`~dsh_sched.testing.TraceRecorder` (as its sink, with the
        tools instrumented), fold the trace into rows, and draw them:

        >>> import trio
        >>> from dsh_tools import ToolRuntime, tool
        >>> from dsh_sched import ModelToolCall, run_tool_calls
        >>> from dsh_sched.testing import TraceRecorder, render_timeline, timeline_rows
        >>> @tool(is_concurrency_safe=True)
        ... async def echo(text: str) -> str:
        ...     '''Echo the text.'''
        ...     return text
        >>> runtime = ToolRuntime()
        >>> recorder = TraceRecorder(runtime)
        >>> _ = runtime.register(recorder.instrument(echo))
        >>> calls = [ModelToolCall(call_id=f"c{i}", name="echo", arguments='{"text": "hi"}')
        ...          for i in range(2)]
        >>> async def main() -> float:
        ...     start = trio.current_time()
        ...     await run_tool_calls(runtime, calls, sink=recorder)
        ...     return start
        >>> start = trio.run(main)
        >>> rows = timeline_rows(recorder.events, origin=start)
        >>> [(row.call_id, row.status) for row in rows]
        [('c0', 'ok'), ('c1', 'ok')]
        >>> svg = render_timeline(rows, title="two echoes")
        >>> svg.startswith("<?xml") and svg.count('<g class="row parallel"') == 2
        True
    """
    times = [row.started for row in rows]
    times += [row.committed for row in rows if row.committed is not None]
    times += [t for row in rows if row.body is not None for t in row.body]
    if abort_at is not None:
        times.append(abort_at)
    span = max([*times, 0.0])
    step = _nice_step(span if span > 0 else 0.1)
    end = step * max(1, math.ceil(round(span / step, 9)))

    def x_of(t: float) -> float:
        return _PLOT_X0 + max(0.0, t) / end * (_PLOT_X1 - _PLOT_X0)

    rows_bottom = _ROWS_Y + len(rows) * _ROW_H
    axis_y = rows_bottom + 6
    height = axis_y + 44
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        _open(
            "svg",
            {
                "xmlns": "http://www.w3.org/2000/svg",
                "width": _WIDTH,
                "height": height,
                "viewBox": f"0 0 {_WIDTH} {height}",
            },
        ),
        _tag("title", {}, escape(title)),
        f"<style>{_STYLE}</style>",
        _tag("rect", {"x": 0, "y": 0, "width": _WIDTH, "height": height, "fill": "#ffffff"}),
        _text(_LABEL_X, 28.0, title, **{"class": "title"}),
        _text(_LABEL_X, 48.0, subtitle, **{"class": "subtitle"}),
        *_legend(76.0, abort_at is not None),
    ]

    # Zebra stripes and grid first, so that everything else is drawn over them.
    out.append('<g class="grid-lines">')
    for position in range(0, len(rows), 2):
        top = _ROWS_Y + position * _ROW_H
        out.append(
            _tag("rect", {"class": "zebra", "x": 0, "y": top, "width": _WIDTH, "height": _ROW_H})
        )
    ticks = [step * k for k in range(round(end / step) + 1)]
    for t in ticks:
        out.append(
            _tag(
                "line", {"class": "grid", "x1": x_of(t), "y1": _ROWS_Y, "x2": x_of(t), "y2": axis_y}
            )
        )
    out.append("</g>")

    # Barriers: an exclusive call holds the whole batch from its on_call to its commit; an
    # exclusive Code Mode sub-call holds only its own run's sub-calls (their rows).
    groups = _sub_call_groups(rows)
    out.append('<g class="barriers">')
    for position, row in enumerate(rows):
        if row.mode is ExecutionMode.EXCLUSIVE:
            until = row.committed if row.committed is not None else span
            left, right = x_of(row.started), x_of(until)
            first, last = groups.get(position, (0, len(rows) - 1))
            out.append(
                _tag(
                    "rect",
                    {
                        "class": "barrier",
                        "x": left,
                        "y": float(_ROWS_Y + first * _ROW_H),
                        "width": max(right - left, 2.0),
                        "height": float((last - first + 1) * _ROW_H),
                    },
                )
            )
    out.append("</g>")

    for position, row in enumerate(rows):
        out.extend(_row(row, _ROWS_Y + position * _ROW_H, x_of))

    out.append('<g class="axis">')
    out.append(
        _tag("line", {"x1": _PLOT_X0, "y1": axis_y, "x2": _PLOT_X1, "y2": axis_y, "stroke": "#555"})
    )
    for t in ticks:
        x = x_of(t)
        out.append('<g class="tick">')
        out.append(
            _tag("line", {"x1": x, "y1": axis_y, "x2": x, "y2": axis_y + 5, "stroke": "#555"})
        )
        out.append(_text(x, axis_y + 18, _tick(t), **{"text-anchor": "middle"}))
        out.append("</g>")
    out.append(
        _text(
            (_PLOT_X0 + _PLOT_X1) / 2,
            axis_y + 36,
            "time since the batch started",
            **{"text-anchor": "middle", "class": "subtitle"},
        )
    )
    out.append("</g>")

    if abort_at is not None:
        x = x_of(abort_at)
        out.append('<g class="abort-marker">')
        out.append(
            _tag("line", {"class": "abort", "x1": x, "y1": _ROWS_Y - 8, "x2": x, "y2": axis_y})
        )
        out.append(
            _text(
                x + 4,
                _ROWS_Y - 10,
                f"abort fired at {abort_at:.2f} s",
                **{"class": "abort-label"},
            )
        )
        out.append("</g>")

    out.append("</svg>")
    return "\n".join(out) + "\n"


def _sub_call_groups(rows: Sequence[TimelineRow]) -> dict[int, tuple[int, int]]:
    """For the position of each sub-call row: the first and last positions of its run's rows."""
    groups: dict[int, tuple[int, int]] = {}
    position = 0
    while position < len(rows):
        parent = rows[position].parent_call_id
        end = position
        while end + 1 < len(rows) and parent is not None and rows[end + 1].parent_call_id == parent:
            end += 1
        if parent is not None:
            for member in range(position, end + 1):
                groups[member] = (position, end)
        position = end + 1
    return groups


def _row(row: TimelineRow, top: float, x_of: Callable[[float], float]) -> list[str]:
    mid = top + _ROW_H / 2
    mode = "synthetic" if row.synthetic else (row.mode.value if row.mode is not None else "none")
    status = STATUS_TEXT[row.status]
    tooltip = [f"#{row.index} {row.call_id} {row.name} {row.arguments}"]
    label = f"#{row.index:<2} {row.name} {row.arguments}"
    attributes: dict[str, object] = {}
    if row.parent_call_id is not None:
        # A Code Mode sub-call, drawn under its run_code row.
        label = f"   \u21b3 {row.name} {row.arguments}"
        attributes["data-parent-call-id"] = row.parent_call_id
    if row.synthetic:
        tooltip.append(f"synthetic pair at {_seconds(row.started)}: {status}")
    else:
        start = "on_call" if row.parent_call_id is None else "started"
        tooltip.append(f"{start} at {_seconds(row.started)} ({mode})")
        if row.body is not None:
            tooltip.append(f"body {_seconds(row.body[0])} to {_seconds(row.body[1])}")
        else:
            tooltip.append("body never ran")
        if row.committed is not None:
            tooltip.append(f"committed at {_seconds(row.committed)}: {status}")
    if row.summary:
        tooltip.append(row.summary)
    out = [
        _open(
            "g",
            {
                "class": f"row {mode}",
                "data-index": row.index,
                "data-call-id": row.call_id,
                "data-mode": mode,
                "data-status": row.status,
                **attributes,
            },
        ),
        _tag("title", {}, escape("\n".join(tooltip))),
        _text(_LABEL_X, mid + 4, _clip(label, 46)),
    ]
    if row.synthetic:
        # A synthetic pair has no span: on_call and on_result at the same moment.
        out.append(
            _tag(
                "circle", {"class": "synthetic-mark", "cx": x_of(row.started), "cy": mid, "r": 5.5}
            )
        )
        out.append(_text(_STATUS_X, mid + 4, _clip(f"synthetic: {status}", 36)))
        out.append("</g>")
        return out
    until = row.committed if row.committed is not None else row.started
    if row.body is not None:
        until = max(until, row.body[1])
    out.append(
        _tag(
            "line",
            {"class": "wait", "x1": x_of(row.started), "y1": mid, "x2": x_of(until), "y2": mid},
        )
    )
    if row.body is not None:
        left, right = x_of(row.body[0]), x_of(row.body[1])
        kind = "exclusive" if row.mode is ExecutionMode.EXCLUSIVE else "parallel"
        out.append(
            _tag(
                "rect",
                {
                    "class": f"body-{kind}",
                    "x": left,
                    "y": mid - _BAR_H / 2,
                    "width": max(right - left, 2.0),
                    "height": float(_BAR_H),
                    "rx": 2.0,
                },
            )
        )
    out.append(_tag("circle", {"class": "oncall", "cx": x_of(row.started), "cy": mid, "r": 3.5}))
    if row.committed is not None:
        out.append(
            _tag(
                "polygon",
                {
                    "class": "commit",
                    "points": _diamond(x_of(row.committed), mid, 6.0),
                    "fill": _STATUS_FILL[row.status],
                },
            )
        )
    label = status
    if row.status in ("error", "denied") and row.summary:
        label += ": " + row.summary.removeprefix("Error: ")
    out.append(_text(_STATUS_X, mid + 4, _clip(label, 36)))
    out.append("</g>")
    return out

"""Reading a JSONL session log back into call/result pairs (scheduler.md §11)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, final

import attrs

from dsh_tools import ExecutionMode, FrozenDict, ToolResult, UserMessage, freeze_json

from ._json_lines import loads_line

if TYPE_CHECKING:
    import os

__all__ = ["CALL", "CONTEXT", "RESULT", "LoggedCall", "parse_line", "read_session_log"]

CALL: Final = "tool/call"
RESULT: Final = "tool/result"
CONTEXT: Final = "context"
_MODES: Final = {mode.value: mode for mode in ExecutionMode}


def parse_line(raw: bytes) -> object:
    """Parse one line (without its ``b"\\n"``), at any nesting depth.

    Raises:
        ValueError: not UTF-8, or not one JSON value (``NaN``/``Infinity`` included).
    """
    return loads_line(raw.decode("utf-8"))


@final
@attrs.frozen(kw_only=True)
class LoggedCall:
    """One call read back from a session log, with its result and contexts.

    Attributes:
        call_seq: The ``seq`` of its ``tool/call`` line.
        batch: The batch number written (it only groups one process run's lines).
        index: Its position in its batch.
        call_id: The model's call id.
        name: The tool name.
        arguments: The raw argument text, or a JSON object (read back frozen).
        mode: The mode it started under; ``None`` when synthetic.
        synthetic: Whether the scheduler recorded it without starting it.
        result: Its result (``value`` is always ``None``); ``None`` if none was recorded.
        result_seq: The ``seq`` of its ``tool/result`` line, or ``None``.
        contexts: The contexts logged from its result, in order.
    """

    call_seq: int
    batch: int
    index: int
    call_id: str
    name: str
    arguments: str | FrozenDict
    mode: ExecutionMode | None
    synthetic: bool
    result: ToolResult | None
    result_seq: int | None
    contexts: tuple[UserMessage, ...]


class _Bad(Exception):
    """Internal: a problem with the current line; the reader adds ``line <n>: ``."""


def _int(data: dict[str, Any], key: str, kind: str) -> int:
    value = data.get(key)
    if type(value) is not int:
        raise _Bad(f'{kind} "{key}" must be an integer')
    return value


def _str(data: dict[str, Any], key: str, kind: str) -> str:
    value = data.get(key)
    if type(value) is not str:
        raise _Bad(f'{kind} "{key}" must be a string')
    return value


def _cited(obj: dict[str, Any], kind: str, what: str) -> int:
    source = obj.get("source_seqs")
    if not (isinstance(source, list) and len(source) == 1 and type(source[0]) is int):
        raise _Bad(f'{kind} must cite exactly one {what} in "source_seqs"')
    cited: int = source[0]
    return cited


def _read_message(raw: object) -> UserMessage:
    # UserMessage's JSON form is read through the runtime's one converter, as part of a
    # result, so the reader accepts exactly what ToolResult.from_json accepts.
    if not isinstance(raw, dict):
        raise _Bad('context "message" must be an object')
    try:
        holder = ToolResult.from_json({"is_error": False, "additional_contexts": [raw]})
    except ValueError as exc:
        raise _Bad(f"invalid context message: {exc}") from exc
    return holder.additional_contexts[0]


@attrs.define
class _Entry:
    call_seq: int
    batch: int
    index: int
    call_id: str
    name: str
    arguments: str | FrozenDict
    mode: ExecutionMode | None
    synthetic: bool
    result: ToolResult | None = None
    result_seq: int | None = None
    contexts: list[UserMessage] = attrs.Factory(list)


def _read_call(seq: int, data: dict[str, Any]) -> _Entry:
    kind = CALL
    arguments = data.get("arguments")
    if isinstance(arguments, dict):
        arguments = freeze_json(arguments)
    elif type(arguments) is not str:
        raise _Bad(f'{kind} "arguments" must be a string or an object')
    synthetic = data.get("synthetic", False)
    if type(synthetic) is not bool:
        raise _Bad(f'{kind} "synthetic" must be a boolean')
    raw_mode = data.get("mode")
    mode = None
    if raw_mode is not None:
        mode = _MODES.get(raw_mode) if isinstance(raw_mode, str) else None
        if mode is None:
            raise _Bad(f'{kind} "mode" must be "parallel" or "exclusive"')
    return _Entry(
        call_seq=seq,
        batch=_int(data, "batch", kind),
        index=_int(data, "index", kind),
        call_id=_str(data, "call_id", kind),
        name=_str(data, "name", kind),
        arguments=arguments,
        mode=mode,
        synthetic=synthetic,
    )


def read_session_log(path: str | os.PathLike[str]) -> list[LoggedCall]:
    """Read a session log back into its call/result pairs, ordered by ``call_seq``.

    Lines are read in order; each must be a JSON object whose integer ``seq`` is greater
    than the previous line's. A last line without ``"\\n"`` is a torn write and is ignored,
    whether or not it parses (the writer removes it when it reopens the file). Lines of
    unknown ``type`` are skipped. A ``tool/result`` must cite exactly one ``tool/call``
    that has no result yet; a ``context`` must cite a ``tool/result``. Values nested
    deeper than ``json`` itself can parse are read too.

    Args:
        path: The log file.

    Returns:
        One :class:`LoggedCall` per ``tool/call`` line; ``result is None`` when no result
        was recorded (an internal failure, or a process killed mid-batch).

    Raises:
        ValueError: ``line <n>: <problem>`` for the first violation, e.g.
            ``line 5: tool/result cites unknown or answered tool/call 3``.
        OSError: The file cannot be read.
    """
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    # What follows the last b"\n" is a line the writer never finished: the newline is what
    # commits a line. A JsonlSessionLog that fails mid-line removes it at once (or before its
    # next line), and reopening the file removes it too; the reader ignores it, whether or
    # not it happens to parse, so both always agree on what the log holds.
    lines.pop()
    entries: dict[int, _Entry] = {}
    open_calls: set[int] = set()
    result_owner: dict[int, _Entry] = {}
    previous: int | None = None
    for number, raw in enumerate(lines, start=1):
        try:
            obj = parse_line(raw)
        except ValueError:
            raise ValueError(f"line {number}: not valid JSON") from None
        try:
            if not isinstance(obj, dict):
                raise _Bad("not a JSON object")
            seq = obj.get("seq")
            if type(seq) is not int:
                raise _Bad('"seq" must be an integer')
            if previous is not None and seq <= previous:
                raise _Bad(f"seq {seq} is not greater than the previous seq {previous}")
            previous = seq
            kind = obj.get("type")
            if type(kind) is not str:
                raise _Bad('"type" must be a string')
            if kind not in (CALL, RESULT, CONTEXT):
                continue
            body = obj.get("data")
            if not isinstance(body, dict):
                raise _Bad(f'{kind} "data" must be an object')
            if kind == CALL:
                entries[seq] = _read_call(seq, body)
                open_calls.add(seq)
            elif kind == RESULT:
                cited = _cited(obj, kind, "tool/call")
                if cited not in open_calls:
                    raise _Bad(f"tool/result cites unknown or answered tool/call {cited}")
                raw_result = body.get("result")
                if not isinstance(raw_result, dict):
                    raise _Bad('tool/result "result" must be an object')
                try:
                    result = ToolResult.from_json(raw_result)
                except ValueError as exc:
                    raise _Bad(str(exc)) from exc
                open_calls.discard(cited)
                entry = entries[cited]
                entry.result = result
                entry.result_seq = seq
                result_owner[seq] = entry
            else:
                cited = _cited(obj, kind, "tool/result")
                owner = result_owner.get(cited)
                if owner is None:
                    raise _Bad(f"context cites unknown tool/result {cited}")
                owner.contexts.append(_read_message(body.get("message")))
        except _Bad as exc:
            raise ValueError(f"line {number}: {exc}") from None
    return [
        LoggedCall(
            call_seq=e.call_seq,
            batch=e.batch,
            index=e.index,
            call_id=e.call_id,
            name=e.name,
            arguments=e.arguments,
            mode=e.mode,
            synthetic=e.synthetic,
            result=e.result,
            result_seq=e.result_seq,
            contexts=tuple(e.contexts),
        )
        for e in entries.values()
    ]

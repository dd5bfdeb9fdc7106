"""The JSONL session log: a sink that appends one JSON object per line (scheduler.md §11)."""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any, BinaryIO, Final, final

import attrs

from dsh_tools import ExecutionMode, FrozenDict, ToolResult, UserMessage, freeze_json

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import TracebackType
    from typing import Self

    from ._sinks import CallCommitted, CallStarted, ContextAccepted

__all__ = ["JsonlSessionLog", "LoggedCall", "read_session_log"]

_CALL: Final = "tool/call"
_RESULT: Final = "tool/result"
_CONTEXT: Final = "context"
_MODES: Final = {mode.value: mode for mode in ExecutionMode}


def _default_clock() -> int:
    return time.time_ns() // 1_000_000


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON value")


def _parse_line(raw: bytes) -> object:
    return json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)


def _encode(obj: dict[str, Any]) -> bytes:
    try:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode(
            "utf-8"
        )
    except UnicodeEncodeError:
        # A model-supplied string (a call id, raw argument text) may hold an unpaired
        # surrogate, which UTF-8 cannot carry. Escaping it keeps the line valid UTF-8 JSON
        # that reads back to the very same string.
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode(
            "ascii"
        )


#: How much of an existing log is read at a time, from its end, when it is reopened.
_TAIL_CHUNK: Final = 1 << 16


def _lines_from_the_end(file: BinaryIO, size: int) -> Iterator[bytes]:
    """The lines of ``file[:size]`` (without their ``b"\\n"``), last first, read backwards
    in chunks: reopening a long log costs its last lines, not the whole file."""
    pos = size
    carry = b""  # the start of a line whose beginning lies in an earlier chunk
    while pos > 0:
        start = max(0, pos - _TAIL_CHUNK)
        file.seek(start)
        pieces = (file.read(pos - start) + carry).split(b"\n")
        pos = start
        carry = pieces[0]
        yield from reversed(pieces[1:])
    yield carry


def _reopen(file: BinaryIO) -> int:
    """Remove a trailing partial line (a torn write) and return the highest ``seq``.

    ``seq`` increases line by line, so the last line that carries one has the highest.
    """
    size = file.seek(0, os.SEEK_END)
    lines = _lines_from_the_end(file, size)
    torn = next(lines)  # what follows the last b"\n": empty unless a write was torn
    if torn:
        size -= len(torn)
        file.truncate(size)
        lines = _lines_from_the_end(file, size)
        next(lines)  # now empty
    for raw in lines:
        try:
            obj = _parse_line(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and type(obj.get("seq")) is int:
            seq: int = obj["seq"]
            return seq
    return 0


@final
class JsonlSessionLog:
    """A :class:`~dsh_sched.Sink` appending ``tool/call``, ``tool/result`` and ``context``
    lines to a UTF-8 JSONL file.

    Every line ends with exactly one ``"\\n"`` and is flushed at once (with ``fsync=True``
    also ``os.fsync``-ed, which blocks the whole trio thread on every line). Opening an
    existing file first removes a trailing partial line (a torn write), then continues the
    numbering after the highest ``seq`` found; it reads the file backwards from its end, so
    reopening a long log reads only its last lines.

    Args:
        path: The log file; created if missing, appended to otherwise.
        clock: Returns integer milliseconds since the Unix epoch (default: the wall clock).
        fsync: ``os.fsync`` after every line, for logs that must survive a power loss.

    Example:
        >>> with JsonlSessionLog("session.jsonl") as log:  # doctest: +SKIP
        ...     outcome = await run_tool_calls(runtime, calls, sink=log)
    """

    __slots__ = ("_call_seqs", "_clock", "_closed", "_file", "_fsync", "_result_seqs", "_seq")

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], int] | None = None,
        fsync: bool = False,
    ) -> None:
        self._clock: Callable[[], int] = _default_clock if clock is None else clock
        self._fsync = fsync
        self._closed = True
        # "a+b": created if missing, every write goes to the end, and the file can be read.
        self._file: BinaryIO = open(path, "a+b")  # noqa: SIM115 - closed by close()
        try:
            self._seq = _reopen(self._file)
        except BaseException:
            self._file.close()
            raise
        self._closed = False
        # (batch, index) -> seq of its tool/call line, until its tool/result is written.
        self._call_seqs: dict[tuple[int, int], int] = {}
        # (batch, index) -> [seq of its tool/result, contexts still to come]; only results
        # that carry contexts are remembered, and only until their last context is written.
        self._result_seqs: dict[tuple[int, int], list[int]] = {}

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Close the file. Idempotent; later events raise ``RuntimeError``."""
        if not self._closed:
            self._closed = True
            self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _write(self, kind: str, data: dict[str, Any], source: int | None) -> int:
        if self._closed:
            raise RuntimeError("session log is closed")
        seq = self._seq + 1
        obj: dict[str, Any] = {"type": kind, "seq": seq, "time": self._clock(), "data": data}
        if source is not None:
            obj["source_seqs"] = [source]
        # One write of the whole line, then flush: a crash leaves at most one partial line,
        # which the next opening removes and the reader ignores.
        self._file.write(_encode(obj) + b"\n")
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())
        self._seq = seq
        return seq

    def on_call(self, event: CallStarted) -> None:
        """Write a ``tool/call`` line."""
        call = event.call
        data: dict[str, Any] = {
            "batch": event.batch,
            "index": event.index,
            "call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments,
        }
        if event.synthetic:
            data["synthetic"] = True
        elif event.mode is not None:
            data["mode"] = event.mode.value
        seq = self._write(_CALL, data, None)
        self._call_seqs[event.batch, event.index] = seq

    def on_result(self, event: CallCommitted) -> None:
        """Write a ``tool/result`` line citing its ``tool/call``."""
        key = (event.batch, event.index)
        call_seq = self._call_seqs.get(key)
        if call_seq is None:
            raise ValueError(f"no tool/call was logged for batch {event.batch} index {event.index}")
        call = event.call
        result = event.result
        data: dict[str, Any] = {
            "batch": event.batch,
            "index": event.index,
            "call_id": call.call_id,
            "name": call.name,
            "result": result.to_json(),
        }
        if event.synthetic:
            data["synthetic"] = True
        seq = self._write(_RESULT, data, call_seq)
        del self._call_seqs[key]
        if result.additional_contexts:
            self._result_seqs[key] = [seq, len(result.additional_contexts)]

    def on_context(self, event: ContextAccepted) -> None:
        """Write a ``context`` line citing the ``tool/result`` it came from."""
        key = (event.batch, event.index)
        entry = self._result_seqs.get(key)
        if entry is None:
            raise ValueError(
                f"no tool/result with contexts was logged for batch {event.batch} "
                f"index {event.index}"
            )
        data = {
            "batch": event.batch,
            "index": event.index,
            "call_id": event.call.call_id,
            "message": event.message.to_json(),
        }
        self._write(_CONTEXT, data, entry[0])
        entry[1] -= 1
        if entry[1] <= 0:
            del self._result_seqs[key]


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
    kind = _CALL
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
    than the previous line's. A last line without ``"\\n"`` that does not parse is a torn
    write and is ignored. Lines of unknown ``type`` are skipped. A ``tool/result`` must cite
    exactly one ``tool/call`` that has no result yet; a ``context`` must cite a
    ``tool/result``.

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
    tail = lines.pop()  # b"" when the file ends with "\n"
    entries: dict[int, _Entry] = {}
    open_calls: set[int] = set()
    result_owner: dict[int, _Entry] = {}
    previous: int | None = None
    numbered = list(enumerate(lines, start=1))
    torn_candidate = 0
    if tail:
        numbered.append((len(lines) + 1, tail))
        torn_candidate = len(lines) + 1
    for number, raw in numbered:
        try:
            obj = _parse_line(raw)
        except (ValueError, RecursionError):
            if number == torn_candidate:
                break  # a torn last write
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
            if kind not in (_CALL, _RESULT, _CONTEXT):
                continue
            body = obj.get("data")
            if not isinstance(body, dict):
                raise _Bad(f'{kind} "data" must be an object')
            if kind == _CALL:
                entries[seq] = _read_call(seq, body)
                open_calls.add(seq)
            elif kind == _RESULT:
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

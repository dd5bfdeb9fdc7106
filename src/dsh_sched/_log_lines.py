"""The session log's lines, built as text (scheduler.md §11).

A line is what ``json.dumps(obj, ensure_ascii=..., separators=(",", ":"),
allow_nan=False)`` writes for ``{"type": ..., "seq": ..., "time": ..., "data": {...},
"source_seqs": [...]}``, then ``"\\n"``, in UTF-8 (ASCII when ``ensure_ascii``). Building
that dict and handing it to ``json`` costs far more than the line's few variable parts: the
constant keys and punctuation are written here as fixed text, each string is escaped by
``json``'s own string encoder, and only values of other shapes (mapping arguments, results
with an error, meta or contexts, context messages) go through the general encoder. Raw
argument text, the one long string of most lines, takes a shorter path when it is ASCII
without control characters, backslashes or DEL (what a model's JSON usually is): only its
quotes need escaping, which ``bytes.replace`` does for a fraction of the string encoder's
work. The bytes are exactly what ``json`` writes for the whole object, which the tests
check against it.

Each builder takes ``ascii_only``: ``False`` writes UTF-8 and raises
``UnicodeEncodeError`` for a string with an unpaired surrogate, which UTF-8 cannot carry;
the caller then builds the line again with ``True``.
"""

from __future__ import annotations

import json.encoder
from typing import TYPE_CHECKING, Final

from dsh_tools import ExecutionMode, TextContent

from ._json_lines import dumps_line
from ._session_reader import CALL, CONTEXT, RESULT

if TYPE_CHECKING:
    from collections.abc import Callable

    from dsh_tools import ToolResult

    from ._sinks import CallCommitted, CallStarted, ContextAccepted

__all__ = ["call_line", "context_line", "result_line"]

_QUOTE: Final[dict[bool, Callable[[str], str]]] = {
    False: json.encoder.encode_basestring,
    True: json.encoder.encode_basestring_ascii,
}
_CODEC: Final = {False: "utf-8", True: "ascii"}

# What follows the arguments of a tool/call line: its mode, or the synthetic flag.
_CALL_ENDS: Final[dict[ExecutionMode | None, bytes]] = {
    **{mode: f',"mode":"{mode.value}"}}}}\n'.encode() for mode in ExecutionMode},
    None: b"}}\n",
}
_SYNTHETIC_END: Final = b',"synthetic":true}}\n'

# Maps the ASCII bytes json may escape other than the quote (control characters, the
# backslash, and DEL, which ``ensure_ascii`` escapes) to 0, every other byte to 1: text
# without a 0 after translation needs only its quotes escaped.
_PLAIN: Final = bytes(0 if byte < 0x20 or byte in b"\\\x7f" else 1 for byte in range(256))


def _quoted(text: str, ascii_only: bool) -> bytes:
    """``text`` as a JSON string, encoded: what ``json`` writes for it."""
    if text.isascii():
        raw = text.encode("ascii")
        if b"\x00" not in raw.translate(_PLAIN):
            return b"".join((b'"', raw.replace(b'"', b'\\"'), b'"'))
    return _QUOTE[ascii_only](text).encode(_CODEC[ascii_only])


def _number(value: object, ascii_only: bool) -> str:
    """A number as ``json`` writes it (a sink may be fed events built by hand, or a clock
    may return a float)."""
    if type(value) is int:
        return str(value)
    return dumps_line(value, ensure_ascii=ascii_only)


def _head(
    kind: str,
    seq: int,
    time: object,
    event: CallStarted | CallCommitted | ContextAccepted,
    ascii_only: bool,
) -> str:
    """``{"type":...,"seq":...,"time":...,"data":{"batch":...,"index":...,"call_id":...``."""
    batch = event.batch
    index = event.index
    call_id = _QUOTE[ascii_only](event.call.call_id)
    if type(time) is int and type(batch) is int and type(index) is int:
        return (
            f'{{"type":"{kind}","seq":{seq},"time":{time},"data":{{"batch":{batch},'
            f'"index":{index},"call_id":{call_id}'
        )
    return (
        f'{{"type":"{kind}","seq":{seq},"time":{_number(time, ascii_only)},'
        f'"data":{{"batch":{_number(batch, ascii_only)},'
        f'"index":{_number(index, ascii_only)},"call_id":{call_id}'
    )


def call_line(seq: int, time: object, event: CallStarted, source: int, ascii_only: bool) -> bytes:
    """The ``tool/call`` line of ``event`` (``source`` is unused: a call cites nothing)."""
    call = event.call
    arguments = call.arguments
    codec = _CODEC[ascii_only]
    head = (
        f"{_head(CALL, seq, time, event, ascii_only)},"
        f'"name":{_QUOTE[ascii_only](call.name)},"arguments":'
    ).encode(codec)
    if type(arguments) is str:
        args = _quoted(arguments, ascii_only)
    else:
        args = dumps_line(arguments, ensure_ascii=ascii_only).encode(codec)
    end = _SYNTHETIC_END if event.synthetic else _CALL_ENDS[event.mode]
    return b"".join((head, args, end))


def _text_block(block: TextContent, ascii_only: bool) -> str:
    return f'{{"type":"text","text":{_QUOTE[ascii_only](block.text)}}}'


def _result_text(result: ToolResult, ascii_only: bool) -> str:
    """``result.to_json()`` as ``json`` writes it; a success of text blocks alone (no meta,
    contexts or conclusion; a success never has an error) without the general encoder."""
    if (
        not result.is_error
        and result.meta is None
        and not result.additional_contexts
        and not result.concludes_turn
    ):
        content = result.content
        if len(content) == 1 and type(content[0]) is TextContent:  # the usual result
            return f'{{"is_error":false,"content":[{_text_block(content[0], ascii_only)}]}}'
        blocks = [_text_block(block, ascii_only) for block in content if type(block) is TextContent]
        if len(blocks) == len(content):
            return f'{{"is_error":false,"content":[{",".join(blocks)}]}}'
    return dumps_line(result.to_json(), ensure_ascii=ascii_only)


def result_line(
    seq: int, time: object, event: CallCommitted, source: int, ascii_only: bool
) -> bytes:
    """The ``tool/result`` line of ``event``, citing the ``tool/call`` line ``source``."""
    flag = ',"synthetic":true' if event.synthetic else ""
    return (
        f"{_head(RESULT, seq, time, event, ascii_only)},"
        f'"name":{_QUOTE[ascii_only](event.call.name)},'
        f'"result":{_result_text(event.result, ascii_only)}{flag}}},"source_seqs":[{source}]}}\n'
    ).encode(_CODEC[ascii_only])


def context_line(
    seq: int, time: object, event: ContextAccepted, source: int, ascii_only: bool
) -> bytes:
    """The ``context`` line of ``event``, citing the ``tool/result`` line ``source``."""
    message = dumps_line(event.message.to_json(), ensure_ascii=ascii_only)
    return (
        f'{_head(CONTEXT, seq, time, event, ascii_only)},"message":{message}}},'
        f'"source_seqs":[{source}]}}\n'
    ).encode(_CODEC[ascii_only])

"""The WASI wire protocol as plain data: what the guest may send, and nothing else
(code-mode §8.2.5). The same rules are exercised end to end in tests/test_wasi_host.py."""

from __future__ import annotations

import json

import pytest

from dsh_tools._wasi._wire import (
    Call,
    Done,
    Log,
    ProtocolError,
    Wake,
    WireState,
    encode,
    parse_guest_line,
)


def line(message: object) -> bytes:
    return json.dumps(message, ensure_ascii=False).encode("utf-8")


def test_the_guest_messages_parse() -> None:
    assert parse_guest_line(line({"op": "log", "text": "héllo\n"})) == Log("héllo\n")
    assert parse_guest_line(line({"op": "call", "id": 1, "name": "x", "args": {"a": [1]}})) == (
        Call(1, "x", {"a": [1]})
    )
    assert parse_guest_line(line({"op": "wake", "id": 2, "seconds": 0})) == Wake(2, 0.0)
    assert parse_guest_line(line({"op": "wake", "id": 2, "seconds": 0.25})) == Wake(2, 0.25)
    assert parse_guest_line(line({"op": "done", "status": "ok"})) == Done()
    assert parse_guest_line(line({"op": "done", "status": "ok", "result": None})) == Done(
        has_result=True, result=None
    )
    error = {"op": "done", "status": "error", "kind": "syntax", "detail": "SyntaxError: x"}
    assert parse_guest_line(line(error)) == Done(kind="syntax", detail="SyntaxError: x")


def test_a_huge_integer_wake_is_forever() -> None:
    assert parse_guest_line(line({"op": "wake", "id": 1, "seconds": 10**400})) == Wake(
        1, float("inf")
    )


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"garbage",
        b"\xff\xfe",
        b"[1, 2]",
        b'{"op": "log", "text": "a", "text": "b"}',  # a key given twice
        b'{"op": "wake", "id": 1, "seconds": NaN}',
        line({"op": "log"}),
        line({"op": "log", "text": 1}),
        line({"op": "log", "text": "x", "extra": 1}),
        line({"op": "call", "id": 0, "name": "x", "args": {}}),
        line({"op": "call", "id": True, "name": "x", "args": {}}),
        line({"op": "call", "id": 1.0, "name": "x", "args": {}}),
        line({"op": "call", "id": 1, "name": 2, "args": {}}),
        line({"op": "call", "id": 1, "name": "x"}),
        line({"op": "wake", "id": 1, "seconds": -1}),
        line({"op": "wake", "id": 1, "seconds": -1.5}),
        line({"op": "wake", "id": 1, "seconds": True}),
        line({"op": "wake", "id": 1, "seconds": "1"}),
        line({"op": "wake", "id": -3, "seconds": 1}),
        line({"op": "done", "status": "ok", "detail": "x"}),
        line({"op": "done", "status": "maybe"}),
        line({"op": "done", "status": "error", "kind": "timeout", "detail": "x"}),
        line({"op": "done", "status": "error", "kind": "internal", "detail": "x"}),
        line({"op": "done", "status": "error", "kind": "syntax", "detail": 3}),
        line({"op": "done", "status": "error", "kind": "syntax"}),
        line({"op": "result", "id": 1, "ok": True, "value": 1}),
        line({"op": 1}),
    ],
)
def test_anything_else_is_a_protocol_violation(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse_guest_line(raw)


def test_ids_are_unique_within_a_run_and_nothing_follows_done() -> None:
    state = WireState()
    state.accept(Log("a"))
    state.accept(Call(1, "x", {}))
    state.accept(Wake(2, 0.0))
    with pytest.raises(ProtocolError):
        state.accept(Call(2, "x", {}))  # calls and wakes share one counter
    with pytest.raises(ProtocolError):
        state.accept(Wake(1, 0.0))
    state.accept(Done())
    with pytest.raises(ProtocolError):
        state.accept(Log("late"))


def test_host_messages_are_compact_utf8_lines() -> None:
    data = encode({"op": "result", "id": 1, "ok": True, "value": {"k": ["é", 1.5, None]}})
    assert data == '{"op":"result","id":1,"ok":true,"value":{"k":["é",1.5,null]}}\n'.encode()
    with pytest.raises(ValueError, match="Out of range float"):
        encode({"value": float("nan")})

"""The JSON-lines protocol between the host and the guest, as plain data (code-mode §8.2.5).

One JSON object per line, UTF-8. The guest sends ``log``, ``call``, ``wake`` and finally
``done``; the host sends ``start``, ``result`` and ``woke``. This module parses what the guest
sends and refuses anything else (:class:`ProtocolError`), and tracks the ids of one run; it
does no I/O, so every rule is tested without a sandbox.
"""

from __future__ import annotations

import json
import math
from typing import Final, TypeAlias

import attrs

from .._json_text import parse_json_text

__all__ = [
    "Call",
    "Done",
    "GuestMessage",
    "Log",
    "ProtocolError",
    "Wake",
    "WireState",
    "encode",
    "parse_guest_line",
]

#: The failure kinds a guest may report in ``done`` (``timeout`` and ``internal`` are the
#: host's own decisions, never the guest's).
GUEST_KINDS: Final = frozenset({"syntax", "exception", "memory", "output-limit", "result"})


class ProtocolError(Exception):
    """The guest sent something the protocol does not allow."""


@attrs.frozen
class Log:
    """Captured output of the program."""

    text: str


@attrs.frozen
class Call:
    """A tool call of the program."""

    id: int
    name: str
    args: object


@attrs.frozen
class Wake:
    """A timer: wake the guest after ``seconds``."""

    id: int
    seconds: float


@attrs.frozen(kw_only=True)
class Done:
    """The program's end: ``kind is None`` for success (with ``result`` when ``has_result``),
    else a failure kind and the guest's detail text."""

    has_result: bool = False
    result: object = None
    kind: str | None = None
    detail: str = ""


GuestMessage: TypeAlias = Log | Call | Wake | Done


def _id(message: dict[str, object]) -> int:
    value = message["id"]
    if type(value) is not int or value < 1:
        raise ProtocolError
    return value


def _seconds(value: object) -> float | None:
    """A number of seconds ``>= 0`` (a huge integer is forever), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int):
        if value < 0:
            return None
        return float(value) if value.bit_length() < 1000 else math.inf
    return value if math.isfinite(value) and value >= 0 else None


def _parse(message: dict[str, object]) -> GuestMessage:
    op = message.get("op")
    keys = set(message)
    if op == "log" and keys == {"op", "text"} and type(message["text"]) is str:
        return Log(message["text"])
    if op == "call" and keys == {"op", "id", "name", "args"} and type(message["name"]) is str:
        return Call(_id(message), message["name"], message["args"])
    if op == "wake" and keys == {"op", "id", "seconds"}:
        seconds = _seconds(message["seconds"])
        if seconds is not None:
            return Wake(_id(message), seconds)
    if op == "done" and message.get("status") == "ok" and keys <= {"op", "status", "result"}:
        return Done(has_result="result" in keys, result=message.get("result"))
    if (
        op == "done"
        and message.get("status") == "error"
        and keys == {"op", "status", "kind", "detail"}
        and message["kind"] in GUEST_KINDS
        and type(message["detail"]) is str
    ):
        return Done(kind=str(message["kind"]), detail=message["detail"])
    raise ProtocolError


def parse_guest_line(line: bytes) -> GuestMessage:
    """Parse one line the guest sent (without its ``\\n``).

    Raises:
        ProtocolError: the line is not UTF-8 strict JSON, or not one of the guest's messages
            with exactly its fields.
    """
    try:
        message = parse_json_text(line.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and json.JSONDecodeError both are
        raise ProtocolError from None
    if not isinstance(message, dict):
        raise ProtocolError
    return _parse(message)


def encode(message: dict[str, object]) -> bytes:
    """One host message as a line: UTF-8 JSON, no NaN, ``\\n`` at the end.

    The values are frozen values (lossless JSON), so this cannot fail.
    """
    text = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.encode("utf-8", "surrogatepass") + b"\n"


@attrs.define
class WireState:
    """The ids and the end of one run's conversation.

    Ids are unique within a run (calls and wakes share one counter in the guest), and nothing
    may follow ``done``.
    """

    used: set[int] = attrs.Factory(set)
    done: bool = False

    def accept(self, message: GuestMessage) -> None:
        """Record ``message``, or raise :class:`ProtocolError` if it may not come now."""
        if self.done:
            raise ProtocolError
        if isinstance(message, Call | Wake):
            if message.id in self.used:
                raise ProtocolError
            self.used.add(message.id)
        elif isinstance(message, Done):
            self.done = True

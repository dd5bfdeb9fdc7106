"""One JSON value per line, at any nesting depth (the session log's codec).

The session log writes and reads values that crossed the runtime's JSON boundary, which
accepts any nesting depth (runtime.md §2.1). The ``json`` module's C encoder and decoder
recurse once per level and give up near Python's recursion limit (about 1000 levels), so
both directions fall back, only for such values, to an iterative walk that produces and
accepts exactly what ``json`` does.
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
import re
from typing import Any, Final

__all__ = ["dumps_line", "loads_line"]


class _Raw(str):
    """Text to emit as it is (punctuation), as opposed to a string value to encode."""

    __slots__ = ()


_OPEN_OBJECT: Final = _Raw("{")
_CLOSE_OBJECT: Final = _Raw("}")
_OPEN_ARRAY: Final = _Raw("[")
_CLOSE_ARRAY: Final = _Raw("]")


def _encoders(ensure_ascii: bool) -> json.JSONEncoder:
    return json.JSONEncoder(ensure_ascii=ensure_ascii, allow_nan=False, separators=(",", ":"))


_ENCODERS: Final = {flag: _encoders(flag) for flag in (False, True)}


def dumps_line(value: object, *, ensure_ascii: bool) -> str:
    """``json.dumps(value, ensure_ascii=..., separators=(",", ":"), allow_nan=False)``,
    also for a value nested too deeply for ``json.dumps``.

    Raises:
        ValueError: a non-finite float.
        TypeError: a value ``json`` cannot encode.
    """
    encoder = _ENCODERS[ensure_ascii]
    try:
        return encoder.encode(value)
    except RecursionError:
        return _dumps_iteratively(value, encoder)


def _dumps_iteratively(value: object, encoder: json.JSONEncoder) -> str:
    scalar = encoder.encode  # a scalar's JSON text, exactly as json.dumps writes it
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if type(item) is _Raw:
            out.append(item)
        elif isinstance(item, dict):
            if not item:
                out.append("{}")
                continue
            pending: list[Any] = [_OPEN_OBJECT]
            for key, child in item.items():
                if len(pending) > 1:
                    pending.append(_Raw(","))
                if type(key) is not str:
                    key = _key_text(key, scalar)
                pending.append(_Raw(scalar(key) + ":"))
                pending.append(child)
            pending.append(_CLOSE_OBJECT)
            stack.extend(reversed(pending))
        elif isinstance(item, list | tuple):
            if not item:
                out.append("[]")
                continue
            pending = [_OPEN_ARRAY]
            for child in item:
                if len(pending) > 1:
                    pending.append(_Raw(","))
                pending.append(child)
            pending.append(_CLOSE_ARRAY)
            stack.extend(reversed(pending))
        else:
            out.append(scalar(item))
    return "".join(out)


def _key_text(key: object, scalar: Any) -> str:
    # What json.dumps does with a key that is not a str (session log data never has one).
    if key is None or isinstance(key, bool | int | float):
        text: str = scalar(key)
        return text
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON value")


_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)


def loads_line(text: str) -> object:
    """``json.loads(text)`` with ``NaN``/``Infinity`` rejected, also for a value nested too
    deeply for ``json.loads``.

    Raises:
        ValueError: ``text`` is not one JSON value.
    """
    try:
        return _DECODER.decode(text)
    except RecursionError:
        return _loads_iteratively(text)


_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
_NUMBER: Final = json.scanner.NUMBER_RE
# The decoder's own string scanner (C when available): escapes, unpaired surrogates and
# control characters are handled exactly as json.loads handles them. typeshed omits it.
_scanstring: Final[Any] = json.decoder.scanstring  # type: ignore[attr-defined]
_LITERALS: Final[tuple[tuple[str, object], ...]] = (
    ("null", None),
    ("true", True),
    ("false", False),
)


def _skip(text: str, pos: int) -> int:
    match = _WHITESPACE.match(text, pos)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _key(text: str, pos: int) -> tuple[str, int]:
    """Read ``"key" :`` at ``pos`` (whitespace skipped before it); return the key and the
    position of the value after the colon (whitespace skipped)."""
    if text[pos : pos + 1] != '"':
        raise ValueError(f"expecting a property name at {pos}")
    key: str
    key, pos = _scanstring(text, pos + 1, True)
    pos = _skip(text, pos)
    if text[pos : pos + 1] != ":":
        raise ValueError(f"expecting ':' at {pos}")
    return key, _skip(text, pos + 1)


def _scalar(text: str, pos: int) -> tuple[object, int]:
    if text[pos : pos + 1] == '"':
        found: tuple[str, int] = _scanstring(text, pos + 1, True)
        return found
    match = _NUMBER.match(text, pos)
    if match is not None:
        integer, fraction, exponent = match.groups()
        if fraction or exponent:
            return float(integer + (fraction or "") + (exponent or "")), match.end()
        return int(integer), match.end()
    for word, value in _LITERALS:
        if text.startswith(word, pos):
            return value, pos + len(word)
    raise ValueError(f"expecting a value at {pos}")


def _loads_iteratively(text: str) -> object:
    # Open containers, outermost first, and for each open object the key being read.
    containers: list[Any] = []
    keys: list[str] = []
    pos = _skip(text, 0)
    while True:
        # A value starts at pos.
        opener = text[pos : pos + 1]
        value: object
        if opener == "{" or opener == "[":
            pos = _skip(text, pos + 1)
            closer = "}" if opener == "{" else "]"
            if text[pos : pos + 1] == closer:
                value, pos = ({} if opener == "{" else []), pos + 1
            else:
                if opener == "{":
                    key, pos = _key(text, pos)
                    keys.append(key)
                    containers.append({})
                else:
                    containers.append([])
                continue
        else:
            value, pos = _scalar(text, pos)
        # Place the value, closing every container it completes.
        while True:
            if not containers:
                if _skip(text, pos) != len(text):
                    raise ValueError(f"extra data at {pos}")
                return value
            top = containers[-1]
            if type(top) is dict:
                top[keys[-1]] = value
            else:
                top.append(value)
            pos = _skip(text, pos)
            separator = text[pos : pos + 1]
            if separator == ",":
                pos = _skip(text, pos + 1)
                if type(top) is dict:
                    keys[-1], pos = _key(text, pos)
                break
            if separator != ("}" if type(top) is dict else "]"):
                raise ValueError(f"expecting ',' or a closing bracket at {pos}")
            pos += 1
            value = containers.pop()
            if type(value) is dict:
                keys.pop()

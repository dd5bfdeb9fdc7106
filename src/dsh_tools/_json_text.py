"""JSON text as a model writes it: strict parsing, and what to tell a model whose text failed.

A model's argument text is JSON without ``NaN``/``Infinity`` and without a key given twice in
one object (a tool and a session log could otherwise disagree about which value counted).
When such text is not valid, :func:`describe_value` says why and where, in the words of
``json.JSONDecodeError``, so a model can correct itself (runtime.md §12.2).
"""

from __future__ import annotations

import json
import json.scanner
import math
import re
import sys
from typing import Any, Final

from ._json import FrozenDict, JsonValue, _dict_new, _dict_update, is_lossless_str

__all__ = ["describe_value", "parse_frozen_json_text", "parse_json_text"]


class _Constant(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class _Duplicate(ValueError):
    pass


def _reject_constant(name: str) -> object:
    raise _Constant(name)


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise _Duplicate
    return value


# One decoder for every text: json.loads(text, parse_constant=...) builds a new decoder and
# scanner per call, more than half of its cost for small objects.
_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_unique_keys)
# The decoder's own C scanner (what JSONDecoder.raw_decode calls): (value, end index).
# typeshed types its argument as a scanner; it takes any decoder-like object.
_SCAN_ONCE: Final = json.scanner.make_scanner(_DECODER)  # type: ignore[arg-type]
# A string's body after its opening quote: anything but a quote or a backslash, or an
# escape, up to and including the closing quote.
_STRING_REST: Final = re.compile(r'(?:[^"\\]|\\.)*"', re.DOTALL)
_CONSTANTS: Final = ("-Infinity", "Infinity", "NaN")


def parse_json_text(text: str) -> object:
    """Parse ``text`` as strict JSON: no ``NaN``/``Infinity``, no key twice in one object.

    Raises:
        json.JSONDecodeError: with the parser's message and position; for a rejected
            constant ``invalid constant <name>`` where it starts, for a repeated key
            ``duplicate key <key as JSON>`` where its second occurrence starts, and for
            nesting too deep for the parser ``nesting too deep`` at the start.

    Example:
        >>> parse_json_text('{"path": "notes.md"}')
        {'path': 'notes.md'}
        >>> try:
        ...     parse_json_text('{"a": 1, "a": 2}')
        ... except json.JSONDecodeError as exc:
        ...     print(exc)
        duplicate key "a": line 1 column 10 (char 9)
    """
    # A model's text is almost always one JSON value with no surrounding whitespace: the C
    # scanner alone parses it, without decode()'s two whitespace regex passes.
    try:
        value, end = _SCAN_ONCE(text, 0)
    except (StopIteration, ValueError, RecursionError):
        pass  # leading whitespace, or not JSON: decode() decides, and explains, below
    else:
        if end == len(text):
            return value
    try:
        return _DECODER.decode(text)
    except _Constant as exc:
        msg, pos = f"invalid constant {exc.name}", _first_constant(text, exc.name)
    except _Duplicate:
        msg, pos = _first_duplicate(text)
    except RecursionError:
        msg, pos = "nesting too deep", 0
    except json.JSONDecodeError:
        raise
    except ValueError:
        # The one other ValueError the parser raises: an integer with more digits than
        # Python converts (sys.get_int_max_str_digits()).
        msg, pos = "integer too long", _first_long_integer(text)
    raise json.JSONDecodeError(msg, text, pos) from None


class _General(ValueError):
    """Internal: :func:`parse_frozen_json_text` leaves this text to the general path."""


_GENERAL: Final = _General()
_dict_setitem = dict.__setitem__


def _frozen_object(pairs: list[tuple[str, Any]]) -> FrozenDict:
    # FrozenDict._from_frozen(pairs), inlined: the parser calls this for every object.
    frozen: FrozenDict = _dict_new(FrozenDict)
    _dict_update(frozen, pairs)
    if len(frozen) != len(pairs):
        raise _GENERAL  # a key given twice
    frozen._hash = None
    for key, item in pairs:
        if type(item) is list:  # objects inside are frozen already (innermost first)
            _dict_setitem(frozen, key, _frozen_array(item))
    return frozen


def _frozen_array(items: list[Any]) -> tuple[Any, ...]:
    # Objects inside are frozen already (the parser builds them innermost first).
    for item in items:
        if type(item) is list:
            return tuple([_frozen_array(x) if type(x) is list else x for x in items])
    return tuple(items)


def _lossless_float(text: str) -> float:
    value = float(text)
    if value in (math.inf, -math.inf) or (value == 0.0 and math.copysign(1.0, value) < 0):
        raise _GENERAL  # 1e400 or -0.0: freeze_json refuses it, with its message
    return value


_FROZEN_DECODER: Final = json.JSONDecoder(
    parse_constant=_reject_constant,
    object_pairs_hook=_frozen_object,
    parse_float=_lossless_float,
)
_FROZEN_SCAN_ONCE: Final = json.scanner.make_scanner(_FROZEN_DECODER)  # type: ignore[arg-type]
# An escape that may stand for half of a surrogate pair (a lone one is not lossless).
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")


def parse_frozen_json_text(text: str) -> JsonValue:
    """``freeze_json(parse_json_text(text))`` in one pass, for the commonest texts.

    The parser builds the frozen value itself (objects as :class:`FrozenDict`, arrays as
    tuples), with no second walk. It takes a text that is one JSON value with no
    surrounding whitespace, holding no escape of a surrogate, no number that is not a
    lossless float (``1e400``, ``-0.0``) and no key twice in one object; for anything else
    it raises ``ValueError``, and the caller takes the general path, which decides and
    explains (a returned value always equals the general path's).

    Raises:
        ValueError: the general path must decide.

    Example:
        >>> parse_frozen_json_text('{"tags": ["a"]}')
        FrozenDict({'tags': ('a',)})
    """
    if not text.isascii() and not is_lossless_str(text):
        raise _GENERAL
    # A text without a backslash holds no escape: looking for one character (memchr) costs
    # a tenth of the regex's scan of a 2 KB text.
    if "\\" in text and _SURROGATE_ESCAPE.search(text) is not None:
        raise _GENERAL
    try:
        value, end = _FROZEN_SCAN_ONCE(text, 0)
        if end != len(text):
            raise _GENERAL
        # Freezing a top-level array recurses once per level of nested arrays, like the
        # scan: a text deep enough to exhaust the stack is the general path's to decide.
        return _frozen_array(value) if type(value) is list else value
    except (StopIteration, RecursionError):
        raise _GENERAL from None


def _tokens(text: str) -> list[tuple[int, str]]:
    """``(position, token)`` for every token before the first unterminated string: strings
    whole, anything else one character at a time (the text parsed up to its failure)."""
    out: list[tuple[int, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            match = _STRING_REST.match(text, i + 1)
            if match is None:
                break
            out.append((i, text[i : match.end()]))
            i = match.end()
        else:
            if not c.isspace():
                out.append((i, c))
            i += 1
    return out


def _first_constant(text: str, name: str) -> int:
    for pos, token in _tokens(text):
        if token[0] in "-NI" and text.startswith(name, pos):
            return pos
    return 0  # pragma: no cover - the parser met the constant, so the scan meets it too


def _first_long_integer(text: str) -> int:
    # Outside strings, a run of digits is one number; it is an integer (converted with int(),
    # which has the digit limit) unless a fraction or an exponent follows.
    limit = sys.get_int_max_str_digits()
    start = end = -1
    for pos, token in (*_tokens(text), (len(text), " ")):
        if token.isdigit() and pos == end:
            end = pos + 1
            continue
        if start >= 0 and end - start > limit and token not in (".", "e", "E"):
            return start - 1 if start and text[start - 1] == "-" else start
        start, end = (pos, pos + 1) if token.isdigit() else (-1, -1)
    return 0  # pragma: no cover - the parser met the integer, so the scan meets it too


def _first_duplicate(text: str) -> tuple[str, int]:
    # The parser accepted everything up to the object that repeats a key; walk the tokens,
    # keeping the keys of each open object, to find the first repeat and where it starts.
    stack: list[set[str] | None] = []
    expect_key = False
    for pos, token in _tokens(text):
        first = token[0]
        if first == '"':
            keys = stack[-1] if stack else None
            if expect_key and keys is not None:
                key = json.loads(token)
                if key in keys:
                    return f"duplicate key {json.dumps(key, ensure_ascii=False)}", pos
                keys.add(key)
            expect_key = False
        elif first == "{":
            stack.append(set())
            expect_key = True
        elif first == "[":
            stack.append(None)
            expect_key = False
        elif first in "]}":
            if stack:
                stack.pop()
        elif first == ",":
            expect_key = bool(stack) and stack[-1] is not None
    return "duplicate key", 0  # pragma: no cover - the parser found a repeat, so does this


def describe_value(value: object) -> str:
    """What arrived where a JSON object was expected, for a model to read (runtime.md §12.2).

    ``an array``, ``a number``, ``a boolean``, ``null``; for text, ``text that is not valid
    JSON (<msg>: line <l> column <c>)`` when it does not parse, or ``a string`` when it does
    (a value the caller passed as it is, not a model's raw text).
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, str):
        try:
            parse_json_text(value)
        except json.JSONDecodeError as exc:
            return f"text that is not valid JSON ({exc.msg}: line {exc.lineno} column {exc.colno})"
        return "a string"
    return type(value).__name__  # pragma: no cover - other values fail as non-JSON first

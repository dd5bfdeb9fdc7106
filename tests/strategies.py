"""Hypothesis strategies shared by the tests: JSON values, near-JSON values and results.

Every strategy builds values through the public constructors, so a generated ``ToolResult``
is one that any user (or the runtime) could have built.
"""

from __future__ import annotations

import base64
import collections
import decimal
import enum
import math
import sys
from typing import Any

import attrs
from hypothesis import strategies as st

from dsh_tools import (
    ContentBlock,
    ErrorInfo,
    FrozenDict,
    ImageContent,
    TextContent,
    ToolError,
    ToolResult,
    UserMessage,
    freeze_json,
)

__all__ = [
    "content_blocks",
    "error_infos",
    "failed_results",
    "frozen_json_values",
    "image_contents",
    "json_scalars",
    "json_values",
    "maybe_json_values",
    "spec_accepts",
    "successful_results",
    "text_contents",
    "tool_errors",
    "tool_results",
    "user_messages",
]


# --------------------------------------------------------------------------- JSON values


def _no_negative_zero(x: float) -> float:
    return 0.0 if x == 0.0 else x


def json_scalars() -> st.SearchStrategy[Any]:
    """Lossless JSON scalars: ``None``, bools, ints, finite floats (never ``-0.0``), strs."""
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**128), max_value=2**128),
        st.floats(allow_nan=False, allow_infinity=False).map(_no_negative_zero),
        st.text(max_size=12),  # hypothesis never generates surrogates in text() by default
    )


def json_values(*, max_leaves: int = 25) -> st.SearchStrategy[Any]:
    """Plain (mutable) JSON values: scalars, ``list`` and ``dict`` with ``str`` keys."""
    return st.recursive(
        json_scalars(),
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(st.text(max_size=6), children, max_size=4),
        ),
        max_leaves=max_leaves,
    )


def frozen_json_values(*, max_leaves: int = 25) -> st.SearchStrategy[Any]:
    """Frozen JSON values (tuples and ``FrozenDict``), made by ``freeze_json``."""
    return json_values(max_leaves=max_leaves).map(freeze_json)


# --------------------------------------------------------------------------- near-JSON values


class _Color(enum.Enum):
    RED = "red"


class _Level(enum.IntEnum):
    LOW = 1


class _Str(str):
    __slots__ = ()


class _Int(int):
    __slots__ = ()


class _Float(float):
    __slots__ = ()


class _List(list[Any]):
    pass


class _Tuple(tuple[Any, ...]):
    __slots__ = ()


class _Dict(dict[str, Any]):
    pass


@attrs.frozen
class _Point:
    x: int = 0


_SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)


def _surrogate_text() -> st.SearchStrategy[str]:
    return st.builds(
        lambda a, s, b: a + s + b, st.text(max_size=3), _SURROGATES, st.text(max_size=3)
    )


def _huge_int() -> int:
    """An int with more decimal digits than the default limit (its repr raises: keep it lazy)."""
    return 10**5000


def _bad_scalars() -> st.SearchStrategy[Any]:
    """Leaves that ``freeze_json`` must reject (runtime.md §2.1)."""
    return st.one_of(
        st.sampled_from([math.nan, math.inf, -math.inf, -0.0]),
        _surrogate_text(),
        st.builds(_huge_int),
        st.sampled_from(
            [
                _Color.RED,
                _Level.LOW,
                _Str("s"),
                _Int(1),
                _Float(1.5),
                b"bytes",
                bytearray(b"x"),
                1j,
                decimal.Decimal("1.5"),
                _Point(),
            ]
        ),
        st.builds(set),
        st.builds(frozenset),
        st.builds(lambda: lambda: None),
        st.builds(collections.OrderedDict),
        st.builds(_Dict),
        st.builds(_List),
        st.builds(_Tuple),
    )


def maybe_json_values() -> st.SearchStrategy[Any]:
    """Values that are mostly JSON, sometimes with one or more non-lossless parts.

    Includes tuples and ``FrozenDict`` (both accepted) and dicts with non-``str`` or
    surrogate keys (rejected). No cycles: those are tested by example.
    """
    leaves = st.one_of(json_scalars(), json_scalars(), _bad_scalars())
    keys = st.one_of(
        st.text(max_size=4),
        st.text(max_size=4),
        _surrogate_text(),
        st.integers(0, 3),
        st.none(),
        st.tuples(st.text(max_size=2)),
    )
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=3),
            st.lists(children, max_size=3).map(tuple),
            st.dictionaries(keys, children, max_size=3),
            st.dictionaries(st.text(max_size=4), json_values(max_leaves=4), max_size=3).map(
                FrozenDict
            ),
        ),
        max_leaves=12,
    )


def _lossless_str(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def spec_accepts(value: object) -> bool:
    """A reference reading of runtime.md §2.1 (recursive; fine for generated sizes).

    Exact types only (``bool`` aside); ``FrozenDict`` is trusted as frozen by construction.
    """
    t = type(value)
    if value is None or t is bool:
        return True
    if t is str:
        return _lossless_str(value)  # type: ignore[arg-type]
    if t is int:
        if sys.get_int_max_str_digits() == 0:
            return True
        try:
            str(value)  # raises ValueError above the digit limit
        except ValueError:
            return False
        return True
    if t is float:
        f: float = value  # type: ignore[assignment]
        return math.isfinite(f) and not (f == 0.0 and math.copysign(1.0, f) < 0)
    if t is FrozenDict:
        return True
    if t is list or t is tuple:
        return all(spec_accepts(item) for item in value)  # type: ignore[attr-defined]
    if t is dict:
        d: dict[object, object] = value  # type: ignore[assignment]
        return all(type(k) is str and _lossless_str(k) for k in d) and all(
            spec_accepts(v) for v in d.values()
        )
    return False


# --------------------------------------------------------------------------- results


def text_contents() -> st.SearchStrategy[TextContent]:
    return st.builds(TextContent, st.text(max_size=20))


def image_contents() -> st.SearchStrategy[ImageContent]:
    return st.builds(
        ImageContent,
        st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode("ascii")),
        st.sampled_from(["image/png", "image/jpeg", "image/webp"]),
    )


def content_blocks() -> st.SearchStrategy[ContentBlock]:
    return st.one_of(text_contents(), image_contents())


def _sources() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.just({"kind": "tool"}),
        st.dictionaries(st.text(max_size=6), json_values(max_leaves=4), max_size=3),
    )


def user_messages() -> st.SearchStrategy[UserMessage]:
    def build(content: list[ContentBlock], source: object | None, id_: str | None) -> UserMessage:
        kwargs: dict[str, Any] = {"content": content}
        if source is not None:
            kwargs["source"] = source
        if id_ is not None:
            kwargs["id"] = id_
        return UserMessage(**kwargs)

    return st.builds(
        build,
        st.lists(content_blocks(), max_size=3),
        st.none() | _sources(),
        st.none() | st.text(min_size=1, max_size=10),
    )


def error_infos() -> st.SearchStrategy[ErrorInfo]:
    return st.builds(
        ErrorInfo,
        st.sampled_from(["HarnessError", "ToolNotFoundError", "AbortError"]) | st.text(),
        st.sampled_from(["UNKNOWN_TOOL", "ABORTED", "ENOSPC"]) | st.text(),
    )


def tool_errors() -> st.SearchStrategy[ToolError]:
    return st.builds(ToolError, st.text(max_size=20), st.none() | error_infos())


def _meta() -> st.SearchStrategy[Any]:
    return st.none() | json_values(max_leaves=6)


def successful_results() -> st.SearchStrategy[ToolResult]:
    return st.builds(
        ToolResult,
        is_error=st.just(False),
        content=st.lists(content_blocks(), max_size=3),
        value=json_values(max_leaves=8),
        meta=_meta(),
        additional_contexts=st.lists(user_messages(), max_size=2),
        concludes_turn=st.booleans(),
    )


def failed_results() -> st.SearchStrategy[ToolResult]:
    return st.builds(
        ToolResult,
        is_error=st.just(True),
        content=st.lists(content_blocks(), max_size=3),
        error=tool_errors(),
        meta=_meta(),
        additional_contexts=st.lists(user_messages(), max_size=2),
    )


def tool_results() -> st.SearchStrategy[ToolResult]:
    """Any valid ``ToolResult`` (success or failure)."""
    return st.one_of(successful_results(), failed_results())

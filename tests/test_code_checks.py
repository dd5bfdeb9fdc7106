"""The program-side checks: the lossless JSON copy (against freeze_json), output, details."""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given

from dsh_tools import FrozenDict, freeze_json, thaw_json
from dsh_tools._code_checks import (
    RESULT_DETAIL,
    NotLosslessJson,
    OutputCapture,
    OutputLimitExceeded,
    cpu_timeout_detail,
    exception_detail,
    lossless_copy,
    memory_detail,
    output_limit_detail,
    split_logs,
    syntax_detail,
    wall_timeout_detail,
)

from .helpers import deep_equal, nest
from .strategies import json_values, maybe_json_values

if TYPE_CHECKING:
    from collections.abc import Iterator

PREFIX = "not lossless JSON: "


def freeze_text(value: object) -> str | None:
    """freeze_json's reason and path for ``value``, or ``None`` when it is lossless."""
    try:
        freeze_json(value)
    except TypeError as exc:
        message = str(exc)
        assert message.startswith(PREFIX)
        return message.removeprefix(PREFIX)
    return None


def copy_text(value: object) -> str | None:
    try:
        lossless_copy(value)
    except NotLosslessJson as exc:
        return exc.text
    return None


def plain(value: Any) -> Any:
    """``value`` with every FrozenDict made a dict: a program never holds a FrozenDict."""
    if type(value) is FrozenDict:
        return {key: plain(item) for key, item in value.items()}
    if type(value) is dict:
        return {key: plain(item) for key, item in value.items()}
    if type(value) in (list, tuple):
        return type(value)(plain(item) for item in value)
    return value


class Point:
    pass


CASES: list[object] = [
    None,
    True,
    0,
    -1.5,
    "é",
    [],
    {},
    (1, (2, 3)),
    {"a": [1, {"b": None}], "c": "x"},
    math.nan,
    math.inf,
    -math.inf,
    -0.0,
    "a\ud800",
    10**5000,
    {1},
    Point(),
    print,
    b"bytes",
    {"tags": {1, 2}},
    [1, {"a": math.nan}],
    {"a": [0, -0.0]},
    {"k": ["ok", "x\udc80"]},
    (1, (2, math.inf)),
    {"a": 1, "b": "x\ud800"},
    {1: 2},
    {"a": {"b": {3: 4}}},
    {"a": {"x\ud800": 1}},
    {"a": set(), 1: 2},  # keys are checked before values
    [[], [set()]],
    {"$": {"": [1, {"k": -0.0}]}},
    [True, 2**3000],
]


@pytest.mark.parametrize("value", CASES, ids=lambda value: type(value).__name__)
def test_l035_copy_refuses_what_freeze_json_refuses_in_the_same_words(value: object) -> None:
    """L-035 (program side): reasons and paths equal freeze_json's, value by value."""
    assert copy_text(value) == freeze_text(value)


@given(maybe_json_values().map(plain))
def test_l035_copy_and_freeze_json_agree_on_generated_values(value: object) -> None:
    """L-035: whatever freeze_json says about a value, the program-side check says too."""
    expected = freeze_text(value)
    assert copy_text(value) == expected
    if expected is None:
        assert lossless_copy(value) == thaw_json(freeze_json(value))


@given(json_values())
def test_copies_are_fresh_plain_data(value: object) -> None:
    """A lossless value comes back as dicts and lists, sharing nothing mutable."""
    copy = lossless_copy(value)
    assert copy == thaw_json(freeze_json(value))
    for original, copied in zip(containers(value), containers(copy), strict=True):
        assert original is not copied
        assert type(copied) in (dict, list)


def containers(value: object) -> Iterator[object]:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            yield item
            stack.extend(item)


def test_cycles_are_refused_at_their_path() -> None:
    """A container met again inside itself is a ``cycle``, like freeze_json says."""
    looped: list[Any] = [1]
    looped.append(looped)
    mapping: dict[str, Any] = {"a": {"b": []}}
    mapping["a"]["b"].append(mapping["a"])
    for value in (looped, mapping, [{"x": looped}]):
        assert copy_text(value) == freeze_text(value)
    assert copy_text(looped) == "cycle at $[1]"
    assert copy_text(mapping) == "cycle at $.a.b[0]"


def test_a_shared_container_is_copied_once() -> None:
    """A value held at several places (not a cycle) is accepted and copied once."""
    shared = {"k": [1, 2]}
    value = [shared, shared, {"again": shared}]
    copy = lossless_copy(value)
    assert copy == [shared, shared, {"again": shared}]
    assert copy[0] is copy[1] is copy[2]["again"]
    assert copy[0] is not shared


def test_deep_values_need_no_recursion() -> None:
    """5000-deep values are checked and copied iteratively."""
    deep_list = nest(5000, 1, lambda node: [node])
    assert deep_equal(lossless_copy(deep_list), deep_list)
    deep_bad = nest(5000, math.nan, lambda node: {"k": node})
    assert copy_text(deep_bad) == freeze_text(deep_bad)


def test_integers_follow_the_digit_limit() -> None:
    """An int is lossless when ``str`` can print it under the interpreter's digit limit."""
    previous = sys.get_int_max_str_digits()
    try:
        sys.set_int_max_str_digits(640)
        fits, too_long = 10**639, 10**640  # 640 and 641 digits; both past the fast bound
        assert copy_text(fits) is None
        assert copy_text(too_long) == "integer too large at $"
        assert copy_text([too_long]) == freeze_text([too_long])
        sys.set_int_max_str_digits(0)
        assert copy_text(10**5000) is None
    finally:
        sys.set_int_max_str_digits(previous)


def test_scalars_are_returned_as_they_are() -> None:
    for value in (None, True, 3, 2.5, "text", "é"):
        assert lossless_copy(value) is value


# --- output capture -------------------------------------------------------------------


def test_capture_keeps_text_and_splits_logs() -> None:
    capture = OutputCapture(100)
    assert capture.writable()
    assert capture.encoding == "utf-8"
    assert capture.write("a\nb") == 3
    print("c", file=capture)
    assert capture.text() == "a\nbc\n"
    assert (capture.logs(), capture.limit_hit) == (("a", "bc"), False)


def test_capture_drain_returns_what_is_new() -> None:
    capture = OutputCapture(100)
    capture.write("one ")
    capture.write("twé")
    assert capture.pending_bytes == 8
    assert capture.drain() == "one twé"
    assert (capture.drain(), capture.pending_bytes) == ("", 0)
    capture.write("three")
    assert capture.pending_bytes == 5
    assert capture.drain() == "three"
    assert capture.text() == "one twéthree"


def test_capture_limit_keeps_what_fits_and_raises_every_time_after() -> None:
    """At the limit: keep the bytes that fit (whole characters), raise, and keep raising."""
    capture = OutputCapture(5)
    capture.write("abcde")  # exactly the limit is fine
    assert (capture.limit_hit, capture.text()) == (False, "abcde")
    with pytest.raises(OutputLimitExceeded, match="more than 5 bytes"):
        capture.write("f")
    assert capture.limit_hit
    with pytest.raises(OutputLimitExceeded):
        capture.write("")
    assert capture.text() == "abcde"

    utf8 = OutputCapture(5)
    with pytest.raises(OutputLimitExceeded):
        utf8.write("ééé")  # 6 bytes: two characters fit, half of the third does not
    assert utf8.text() == "éé"


def test_capture_refuses_what_is_not_text() -> None:
    capture = OutputCapture(10)
    with pytest.raises(TypeError, match="write\\(\\) argument must be str, not bytes"):
        capture.write(b"x")  # type: ignore[arg-type]


def test_capture_output_is_valid_utf8() -> None:
    """A lone surrogate becomes U+FFFD; a surrogate pair becomes its character."""
    capture = OutputCapture(100)
    capture.write("a\ud800b")
    capture.write("\ud83d\ude00")
    assert capture.text() == "a\ufffdb\U0001f600"
    # Not an Exception: ``except Exception`` in a program does not swallow it.
    assert OutputLimitExceeded.__mro__[1] is BaseException


@pytest.mark.parametrize(
    ("text", "logs"),
    [
        ("", ()),
        ("\n", ("",)),
        ("a", ("a",)),
        ("a\n", ("a",)),
        ("a\n\n", ("a", "")),
        ("a\nb\nc\n", ("a", "b", "c")),
        ("a\r\nb", ("a\r", "b")),
    ],
)
def test_split_logs(text: str, logs: tuple[str, ...]) -> None:
    """One trailing newline removed, then split on newlines; no text, no logs."""
    assert split_logs(text) == logs


# --- failure details ------------------------------------------------------------------


def test_syntax_details() -> None:
    error = SyntaxError("bad thing")
    assert syntax_detail(error) == "SyntaxError: bad thing"
    error.lineno = 4
    assert syntax_detail(error) == "SyntaxError: bad thing (line 4)"
    assert syntax_detail(ValueError("null bytes")) == "ValueError: null bytes"
    assert syntax_detail(SyntaxError()) == "SyntaxError"


def test_exception_details() -> None:
    assert exception_detail(ValueError("bad")) == "ValueError: bad"
    assert exception_detail(KeyError()) == "KeyError"

    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError

    assert exception_detail(Unprintable()) == "Unprintable: <unprintable thrown value>"
    code = compile("def f():\n    raise ValueError('deep')\n\nf()", "<program>", "exec")
    with pytest.raises(ValueError, match="deep") as info:
        exec(code, {})
    assert exception_detail(info.value) == "ValueError: deep (line 2)"


def test_limit_details() -> None:
    assert output_limit_detail(10) == "the program wrote more than 10 bytes of output"
    assert memory_detail(64) == "the program ran out of memory (limit 64 bytes)"
    assert memory_detail(None) == "the program ran out of memory"
    assert wall_timeout_detail(10) == "the program ran longer than 10.0s"
    assert wall_timeout_detail(0.2) == "the program ran longer than 0.2s"
    assert cpu_timeout_detail(0.5) == "the program used more than 0.5s of CPU time"
    assert RESULT_DETAIL == "the program returned a value that is not lossless JSON"

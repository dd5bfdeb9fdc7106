"""``parse_frozen_json_text``: a text parsed straight into its frozen snapshot.

Whenever it returns, it returns what ``freeze_json(parse_json_text(text))`` returns (the
same values, of the same types all the way down); otherwise it raises ``ValueError`` and
leaves the text to that general path. Conformance: the snapshot of S-024's parsed
arguments (runtime.md §3, scheduler.md §2.2).
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import FrozenDict, freeze_json
from dsh_tools.lowlevel import parse_frozen_json_text, parse_json_text
from tests.helpers import deep_equal, nest
from tests.strategies import json_values


def _typed(value: object) -> object:
    """``value`` with the type of every part (``1`` differs from ``1.0``, a list from a
    tuple, a dict from a ``FrozenDict``)."""
    kind = type(value).__name__
    if isinstance(value, dict):
        return (kind, [(k, _typed(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (kind, [_typed(x) for x in value])
    return (kind, value)


def _general(text: str) -> object:
    return freeze_json(parse_json_text(text))


def _same_as_general_or_refused(text: str) -> bool:
    """Returns whether the fast path took the text."""
    try:
        fast = parse_frozen_json_text(text)
    except ValueError:
        return False
    assert _typed(fast) == _typed(_general(text))
    return True


def _texts(value: Any, rnd: random.Random) -> str:
    return json.dumps(
        value,
        ensure_ascii=rnd.random() < 0.5,
        separators=(",", ":") if rnd.random() < 0.5 else None,
        indent=2 if rnd.random() < 0.2 else None,
    )


@settings(max_examples=300)
@given(value=json_values(max_leaves=20), seed=st.integers(0, 2**32))
def test_a_frozen_parse_equals_the_general_path(value: Any, seed: int) -> None:
    """Every text of a lossless JSON value parses straight into the general path's
    snapshot, but one that escapes a character beyond the BMP (a surrogate pair)."""
    text = _texts(value, random.Random(seed))
    assert _same_as_general_or_refused(text) or "\\ud" in text.lower()


_SPICE = ["1e400", "-0.0", "-1e-400", '"\\ud83d\\ude00"', '"\\ud800"', '"\u00e9"', "[[[]]]"]


@settings(max_examples=300)
@given(
    value=json_values(max_leaves=10),
    spice=st.lists(st.sampled_from(_SPICE), max_size=3),
    duplicate=st.booleans(),
    padding=st.sampled_from(["", " ", "\n"]),
)
def test_any_text_is_parsed_as_the_general_path_parses_it_or_left_to_it(
    value: Any, spice: list[str], duplicate: bool, padding: str
) -> None:
    """Texts with parts that freeze_json refuses, repeated keys and surrounding whitespace:
    the fast path returns the general path's snapshot or nothing at all."""
    parts = [json.dumps(value), *spice]
    text = "[" + ", ".join(parts) + "]"
    if duplicate:
        text = '{"k": 1, "k": ' + text + "}"
    _same_as_general_or_refused(padding + text + padding)


def test_objects_and_arrays_at_every_level_are_frozen() -> None:
    text = '{"a": [1, [2, {"b": [[]]}]], "c": {"d": [true, null]}, "e": 1.5}'
    value = parse_frozen_json_text(text)
    assert type(value) is FrozenDict
    assert value == _general(text)
    assert type(value["a"][1][1]) is FrozenDict
    assert value["a"][1][1]["b"] == ((),)
    assert parse_frozen_json_text("[[1], 2]") == ((1,), 2)
    assert parse_frozen_json_text('"x"') == "x"
    assert hash(value) == hash(_general(text))


@pytest.mark.parametrize(
    "text",
    ['"a\\nb"', '{"\\u00e9": "\\\\"}', '["\\"\\u0041\\ud7ff"]', '{"a": "\\/"}'],
)
def test_escapes_that_are_not_of_a_surrogate_are_taken(text: str) -> None:
    """A backslash alone does not send a text to the general path: only what may be an
    escape of a surrogate does."""
    assert "\\" in text
    assert _same_as_general_or_refused(text)


def test_non_ascii_text_is_taken_when_it_is_lossless() -> None:
    assert parse_frozen_json_text('{"\u00e9": "\u00fc"}') == {"\u00e9": "\u00fc"}


@pytest.mark.parametrize(
    "text",
    [
        '"\ud800"',  # an unpaired surrogate in the text itself
        '"\\ud800"',  # one written as an escape
        '"\\uD83D\\uDE00"',  # a pair (left to the general path, which accepts it)
        '{"a": 1, "a": 2}',
        "1e400",
        "[-0.0]",
        " {}",
        "{} ",
        "{",
        "NaN",
        "",
        "[" * 100_000 + "]" * 100_000,
        "1" * 10_000,
    ],
)
def test_other_texts_are_left_to_the_general_path(text: str) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - the type is the whole contract
        parse_frozen_json_text(text)


def test_an_array_too_deep_for_the_stack_left_is_left_to_the_general_path() -> None:
    """Freezing a top-level array recurses per level: with little stack left, a text the
    scanner still parses is handed to the general path instead of raising RecursionError."""
    text = "[" * 500 + "]" * 500

    def parse_with_frames_used(depth: int) -> object:
        if depth:
            return parse_with_frames_used(depth - 1)
        return parse_frozen_json_text(text)

    shallow = "[" * 100 + "]" * 100
    assert deep_equal(parse_frozen_json_text(shallow), nest(99, (), lambda x: (x,)))
    with pytest.raises(ValueError):  # noqa: PT011 - the type is the whole contract
        parse_with_frames_used(200)

"""The session log's codec: ``json`` exactly, at any nesting depth (scheduler.md §11,
decision "Depth").

The iterative encoder and decoder only run for values ``json`` itself cannot handle, so
these tests call them directly on ordinary values, with ``json`` as the oracle.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_sched._json_lines import (
    _ENCODERS,
    _dumps_iteratively,
    _loads_iteratively,
    dumps_line,
    loads_line,
)
from dsh_tools import freeze_json
from tests.helpers import deep_equal, nest
from tests.strategies import json_values


def _reject(name: str) -> object:
    raise ValueError(name)


def _json_loads(text: str) -> object:
    return json.loads(text, parse_constant=_reject)


@given(value=json_values(), ensure_ascii=st.booleans(), frozen=st.booleans())
def test_s031_the_iterative_encoder_writes_what_json_writes(
    value: Any, ensure_ascii: bool, frozen: bool
) -> None:
    """S-031: byte for byte the text of ``json.dumps(..., separators=(",", ":"),
    allow_nan=False)``, for plain and frozen values (tuples are arrays)."""
    if frozen:
        value = freeze_json(value)
    expected = json.dumps(value, ensure_ascii=ensure_ascii, separators=(",", ":"), allow_nan=False)
    assert _dumps_iteratively(value, _ENCODERS[ensure_ascii]) == expected
    assert dumps_line(value, ensure_ascii=ensure_ascii) == expected


@given(
    value=json_values(),
    spaces=st.sampled_from([None, 0, 2]),
    separators=st.sampled_from([(",", ":"), (", ", ": "), (" ,\t", "\r:\n")]),
)
def test_s033_the_iterative_decoder_reads_what_json_reads(
    value: Any, spaces: int | None, separators: tuple[str, str]
) -> None:
    """S-033: the same value as ``json.loads`` for any layout ``json`` accepts."""
    text = json.dumps(value, indent=spaces, separators=separators)
    text = f" \n{text}\t "
    expected = _json_loads(text)
    found = _loads_iteratively(text)
    assert deep_equal(found, expected, tuple_is_list=False)
    assert loads_line(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "{",
        "[1,",
        "[1 2]",
        '{"a" 1}',
        '{"a":1,}',
        "{1:2}",
        "[1]]",
        "[1] x",
        "NaN",
        "[-Infinity]",
        "Infinity",
        '"unterminated',
        '"control \x01 char"',
        "tru",
        "01",
        "-",
        "1" * 5000,
        '{"a":1 "b":2}',
    ],
)
def test_s033_the_iterative_decoder_rejects_what_json_rejects(text: str) -> None:
    """S-033: text ``json.loads`` rejects (with ``NaN``/``Infinity`` refused) is a
    ``ValueError`` for the iterative decoder too, so the reader reports it as not JSON."""
    with pytest.raises(ValueError):  # noqa: PT011 - the oracle's own errors are ValueErrors
        _json_loads(text)
    with pytest.raises(ValueError):  # noqa: PT011 - same
        _loads_iteratively(text)


def test_s033_numbers_and_escapes_read_as_json_reads_them() -> None:
    text = r'[0,-0,1.5,-2e3,1E+2,3e-1,12345678901234567890,"\ud800\u00e9\n",true,false,null,{}]'
    found = _loads_iteratively(text)
    assert deep_equal(found, _json_loads(text), tuple_is_list=False)
    assert [type(x) for x in found] == [type(x) for x in _json_loads(text)]  # type: ignore[attr-defined]


def test_decision_depth_10000_deep_values_round_trip() -> None:
    """Decision "Depth": a value ``json`` cannot write or read (10,000 levels of objects
    and arrays) is written and read back equal."""
    value = nest(10_000, [1.5, "leaf", None], lambda node: {"k": [node, {}]})
    with pytest.raises(RecursionError):
        json.dumps(value)
    text = dumps_line(value, ensure_ascii=False)
    assert text.startswith('{"k":[{"k":[')
    assert text.endswith("},{}]}")
    assert deep_equal(loads_line(text), value)
    with pytest.raises(RecursionError):
        json.loads(text)


def test_the_iterative_encoder_refuses_what_json_refuses() -> None:
    """Decision "Depth": a deep value with a non-finite float or a non-``str`` key is
    refused as ``json.dumps`` refuses it, not written."""
    for leaf, error in ((math.nan, ValueError), ({(1,): 2}, TypeError), (object(), TypeError)):
        with pytest.raises(error):
            dumps_line(nest(5000, leaf, lambda node: [node]), ensure_ascii=False)


def test_keys_that_are_not_strings_are_written_as_json_writes_them() -> None:
    value = {7: "i", 2.5: "f", True: "t", None: "n", "s": [{False: 0}]}
    assert _dumps_iteratively(value, _ENCODERS[False]) == json.dumps(value, separators=(",", ":"))

"""Differential test of the hand-written subset validator against ``jsonschema``.

Hypothesis generates schemas inside the supported subset (runtime.md §12.1) and values near
them; "no violation" must agree with ``Draft202012Validator(schema).is_valid(value)`` both
ways. Within the subset the two semantics coincide: ``2.0`` is an integer, a bool is not a
number, ``1 == 1.0`` but ``true != 1`` in ``enum``/``const``, objects are open unless
``additionalProperties`` is ``false``, and annotations never constrain.

The schema and value strategies live in ``tests/strategies.py`` with the others.
"""

from __future__ import annotations

from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from dsh_tools import assert_supported_json_schema, freeze_json, thaw_json, validate_json_value
from tests.strategies import DISJOINT_SCHEMAS, SCHEMAS, json_values, near_values, valid_values


def _maybe_frozen(data: st.DataObject, value: Any) -> Any:
    return freeze_json(value) if data.draw(st.booleans()) else value


@settings(max_examples=500)
@given(st.data())
def test_validity_agrees_with_jsonschema(data: st.DataObject) -> None:
    schema = data.draw(SCHEMAS, label="schema")
    value = data.draw(st.one_of(near_values(schema), json_values(max_leaves=4)), label="value")
    assert_supported_json_schema(schema)
    oracle = Draft202012Validator(thaw_json(schema)).is_valid(thaw_json(value))
    ours = validate_json_value(_maybe_frozen(data, schema), _maybe_frozen(data, value))
    event(f"valid={oracle}")
    assert (not ours) == oracle, ours


@settings(max_examples=150)
@given(st.data())
def test_valid_values_agree_with_jsonschema(data: st.DataObject) -> None:
    # Guards the generator used by test_schema.py's H-054 property: what it calls valid,
    # the oracle calls valid too.
    schema = data.draw(DISJOINT_SCHEMAS, label="schema")
    value = data.draw(valid_values(schema), label="value")
    assert Draft202012Validator(schema).is_valid(value)
    assert validate_json_value(schema, value) == []

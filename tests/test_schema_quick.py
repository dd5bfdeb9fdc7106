"""The per-call fast path of output validation agrees with the full validator."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import freeze_json
from dsh_tools._schema_validate import CompiledSchema
from tests.strategies import json_values, near_values, schemas, valid_values

_QUICK_SCHEMAS: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.just({}),
    st.just({"description": "anything"}),
    st.sampled_from(["string", "boolean", "null", "integer", "number", "object", "array"]).map(
        lambda t: {"type": t, "title": "t"}
    ),
)


@settings(max_examples=300)
@given(st.data())
def test_validate_frozen_equals_validate_on_frozen_values(data: st.DataObject) -> None:
    schema: Any = data.draw(st.one_of(_QUICK_SCHEMAS, schemas()))
    value = data.draw(
        st.one_of(valid_values(schema), near_values(schema), json_values()), label="value"
    )
    try:
        frozen = freeze_json(value)
    except TypeError:
        return  # the pipeline only validates values that froze
    compiled = CompiledSchema(schema)
    assert compiled.validate_frozen(frozen, "value") == compiled.validate(frozen, "value")


def test_quick_types_accept_exactly_their_type() -> None:
    cases = {
        "string": ("s", 1),
        "boolean": (True, 1),
        "null": (None, 0),
        "integer": (2.0, 2.5),
        "number": (1.5, True),
        "object": (freeze_json({"a": 1}), ()),
        "array": ((1,), freeze_json({})),
    }
    for type_name, (good, bad) in cases.items():
        compiled = CompiledSchema({"type": type_name})
        assert compiled.validate_frozen(good) == [], type_name
        assert compiled.validate_frozen(bad, "v") == compiled.validate(bad, "v") != [], type_name

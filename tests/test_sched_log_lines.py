"""The session log's lines built as text are byte for byte what ``json`` writes for the
line's object (scheduler.md §11; S-031).

The oracle builds each line as the section describes it (a dict, keys in order) and
encodes it with ``json.dumps(..., ensure_ascii=False, separators=(",", ":"),
allow_nan=False)`` then UTF-8, or with ``ensure_ascii=True`` when a string holds an unpaired
surrogate.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_sched import CallCommitted, CallStarted, ContextAccepted, ModelToolCall
from dsh_sched._log_lines import _quoted, call_line, context_line, result_line
from dsh_sched._session_log import _encode
from dsh_tools import ExecutionMode, ImageContent, TextContent, ToolResult, freeze_json
from tests.strategies import json_values, tool_results, user_messages

_SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
# Model-supplied text: anything, control characters, quotes and backslashes, sometimes an
# unpaired surrogate (which UTF-8 cannot carry).
_TEXTS = st.one_of(
    st.text(max_size=12),
    st.text(alphabet='"\\\x00\x1f\x7f\n\t/é€😀 a', max_size=12),
    st.builds(lambda a, s, b: a + s + b, st.text(max_size=3), _SURROGATES, st.text(max_size=3)),
)
# Numbers a sink may be handed: the scheduler's ints, or whatever a hand-built event or a
# custom clock gives.
_NUMBERS = st.one_of(
    st.integers(min_value=0, max_value=2**40),
    st.integers(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
)
_MODES = st.sampled_from([None, *ExecutionMode])


def _oracle(obj: dict[str, Any]) -> bytes:
    try:
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
        return (text + "\n").encode("ascii")


def _line(kind: str, seq: int, time: object, data: dict[str, Any], source: int | None) -> bytes:
    obj: dict[str, Any] = {"type": kind, "seq": seq, "time": time, "data": data}
    if source is not None:
        obj["source_seqs"] = [source]
    return _oracle(obj)


@st.composite
def _calls(draw: st.DrawFn) -> ModelToolCall:
    arguments = draw(
        st.one_of(_TEXTS, st.dictionaries(st.text(max_size=6), json_values(max_leaves=6)))
    )
    return ModelToolCall(call_id=draw(_TEXTS), name=draw(_TEXTS), arguments=arguments)


_SEQS = st.integers(min_value=1, max_value=2**40)
#: What every line has: its sequence number and time, and the call's place and call.
_LINE: dict[str, st.SearchStrategy[Any]] = {
    "seq": _SEQS,
    "time": _NUMBERS,
    "batch": _NUMBERS,
    "index": _NUMBERS,
    "call": _calls(),
}


@settings(max_examples=150, deadline=None)
@given(
    **_LINE,
    mode=_MODES,
    synthetic=st.booleans(),
)
def test_s031_a_call_line_is_what_json_writes(
    seq: int,
    time: object,
    batch: int,
    index: int,
    call: ModelToolCall,
    mode: ExecutionMode | None,
    synthetic: bool,
) -> None:
    """S-031: a ``tool/call`` line, mapping or text arguments, every mode and flag."""
    event = CallStarted(
        batch=batch, index=index, call=call, mode=mode, token=None, synthetic=synthetic
    )
    data: dict[str, Any] = {
        "batch": batch,
        "index": index,
        "call_id": call.call_id,
        "name": call.name,
        "arguments": call.arguments,
    }
    if synthetic:
        data["synthetic"] = True
    elif mode is not None:
        data["mode"] = mode.value
    assert _encode(call_line, seq, time, event, 0) == _line("tool/call", seq, time, data, None)


# Results of text blocks alone (the common shape, written without the general encoder),
# and any valid result.
_RESULTS = st.one_of(
    st.builds(
        ToolResult,
        is_error=st.just(False),
        content=st.lists(st.builds(TextContent, _TEXTS), max_size=3),
        value=json_values(max_leaves=3),
    ),
    tool_results(),
)


@settings(max_examples=150, deadline=None)
@given(
    **_LINE,
    source=_SEQS,
    result=_RESULTS,
    synthetic=st.booleans(),
)
def test_s031_a_result_line_is_what_json_writes(
    seq: int,
    source: int,
    time: object,
    batch: int,
    index: int,
    call: ModelToolCall,
    result: ToolResult,
    synthetic: bool,
) -> None:
    """S-031: a ``tool/result`` line, for results of every shape."""
    event = CallCommitted(batch=batch, index=index, call=call, result=result, synthetic=synthetic)
    data: dict[str, Any] = {
        "batch": batch,
        "index": index,
        "call_id": call.call_id,
        "name": call.name,
        "result": result.to_json(),
    }
    if synthetic:
        data["synthetic"] = True
    expected = _line("tool/result", seq, time, data, source)
    assert _encode(result_line, seq, time, event, source) == expected


@settings(max_examples=100, deadline=None)
@given(
    **_LINE,
    source=_SEQS,
    message=user_messages(),
)
def test_s031_a_context_line_is_what_json_writes(
    seq: int,
    source: int,
    time: object,
    batch: int,
    index: int,
    call: ModelToolCall,
    message: Any,
) -> None:
    """S-031: a ``context`` line."""
    event = ContextAccepted(batch=batch, index=index, call=call, message=message)
    data = {"batch": batch, "index": index, "call_id": call.call_id, "message": message.to_json()}
    expected = _line("context", seq, time, data, source)
    assert _encode(context_line, seq, time, event, source) == expected


def test_s031_mixed_blocks_and_error_results_take_the_general_path() -> None:
    """S-031: an image block after a text block, and a failed result, still read back."""
    call = ModelToolCall(call_id="c", name="n", arguments="{}")
    mixed = ToolResult(
        is_error=False, content=[TextContent("a"), ImageContent("AA==", "image/png")]
    )
    event = CallCommitted(batch=1, index=0, call=call, result=mixed, synthetic=False)
    line = _encode(result_line, 2, 3, event, 1)
    assert json.loads(line)["data"]["result"] == mixed.to_json()


def test_s031_a_non_finite_clock_reading_is_refused() -> None:
    """S-031: ``allow_nan=False`` holds for the time field too."""
    call = ModelToolCall(call_id="c", name="n", arguments=freeze_json({"a": 1}))
    event = CallStarted(batch=1, index=0, call=call, mode=None, token=None, synthetic=False)
    with pytest.raises(ValueError, match="Out of range float"):
        _encode(call_line, 1, float("nan"), event, 0)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain",
        '{"a": "b", "c": [1, 2]}',  # quotes alone: the bytes.replace path
        'back\\slash "and" quote',
        "control\x01\x1f\n\t",
        "del \x7f",  # ensure_ascii escapes it, ensure_ascii=False does not
        "é and 😀",
        "\ud800 unpaired",
    ],
)
@pytest.mark.parametrize("ascii_only", [False, True])
def test_s031_a_string_is_quoted_as_json_quotes_it(text: str, ascii_only: bool) -> None:
    """S-031: every path of the string quoting writes ``json``'s text for the string (a
    surrogate raises in UTF-8, as ``json``'s output would when encoded)."""
    expected = json.dumps(text, ensure_ascii=ascii_only)
    codec = "ascii" if ascii_only else "utf-8"
    try:
        want = expected.encode(codec)
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            _quoted(text, ascii_only)
    else:
        assert _quoted(text, ascii_only) == want

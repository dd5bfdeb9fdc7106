"""Value classes reject bad fields with messages that name the field (beyond J-024/P-059)."""

from __future__ import annotations

from typing import Any

import pytest

import dsh_tools
from dsh_tools import (
    UNSET,
    Accept,
    ErrorInfo,
    ImageContent,
    TextContent,
    ToolError,
    ToolResult,
    UserMessage,
    error_result,
)
from dsh_tools._convert import converter
from tests.helpers import raw_tool

#: The public API, untyped: these tests pass wrong types on purpose.
api: Any = dsh_tools


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: api.TextContent(1), "TextContent.text must be a str, got int"),
        (
            lambda: api.ImageContent("data", None),
            "ImageContent.mime_type must be a str, got NoneType",
        ),
        (lambda: api.ErrorInfo(1, "C"), "ErrorInfo fields must be str, got int"),
        (lambda: api.ToolError(b"x"), "ToolError.message must be a str, got bytes"),
        (
            lambda: api.ToolError("x", ("N", "C")),
            "ToolError.info must be an ErrorInfo or None, got tuple",
        ),
        (
            lambda: api.ToolResult(is_error="no"),
            "ToolResult.is_error must be a bool, got str",
        ),
        (
            lambda: api.ToolResult(is_error=False, content="text"),
            "ToolResult.content must be a sequence of content blocks, got str",
        ),
        (
            lambda: api.ToolResult(is_error=False, content=[{"type": "text", "text": "x"}]),
            "ToolResult.content must be a sequence of content blocks, got an item of type dict",
        ),
        (
            lambda: api.ToolResult(is_error=False, additional_contexts="m"),
            "ToolResult.additional_contexts must be a sequence of UserMessage, got str",
        ),
        (
            lambda: api.ToolResult(is_error=False, additional_contexts=[TextContent("x")]),
            "ToolResult.additional_contexts must be a sequence of UserMessage, "
            "got an item of type TextContent",
        ),
        (
            lambda: api.ToolResult(is_error=True, error="boom"),
            "ToolResult.error must be a ToolError or None, got str",
        ),
        (
            lambda: api.ToolResult(is_error=False, concludes_turn=1),
            "ToolResult.concludes_turn must be a bool, got int",
        ),
        (
            lambda: api.UserMessage(content=(), source=["tool"]),
            "UserMessage.source must be a JSON object, got list",
        ),
        (lambda: api.UserMessage(content=(), id=7), "UserMessage.id must be a str, got int"),
        (
            lambda: api.Accept(additional_contexts="m"),
            "additional_contexts must be a sequence of UserMessage, got str",
        ),
        (
            lambda: api.Block([], additional_contexts=[1]),
            "additional_contexts must hold UserMessage objects, got int",
        ),
    ],
)
def test_bad_fields_raise_type_error_naming_the_field(build: Any, message: str) -> None:
    with pytest.raises(TypeError) as info:
        build()
    assert str(info.value) == message


def test_error_code_members_are_stored_as_plain_str() -> None:
    from dsh_tools import ErrorCode

    info = ErrorInfo("AbortError", ErrorCode.ABORTED)
    assert type(info.code) is str
    assert info == ErrorInfo("AbortError", "ABORTED")


def test_content_block_discriminators_and_unset_repr() -> None:
    assert TextContent("a").type == "text"
    assert ImageContent("AA==", "image/png").type == "image"
    assert repr(UNSET) == "UNSET"
    assert repr(Accept()) == "Accept(content=UNSET, value=UNSET, additional_contexts=())"


def test_error_result_ignores_codes_that_are_not_str_or_not_lossless() -> None:
    from dsh_tools import HarnessError

    weird = HarnessError("m", "C")
    weird.code = 7  # type: ignore[assignment]
    assert error_result(weird).error == ToolError("m")

    class Exploding(HarnessError):
        def __init__(self, message: str) -> None:
            Exception.__init__(self, message)  # deliberately never sets .code

        def __getattr__(self, name: str) -> object:
            raise RuntimeError(f"no {name}")

    assert error_result(Exploding("m")).error == ToolError("m")
    surrogate = HarnessError("m", "\ud800")
    assert error_result(surrogate).error == ToolError("m")


async def test_finish_rejects_non_lossless_error_info_and_context_ids() -> None:
    from dsh_tools import ToolCall, ToolRuntime, lowlevel

    runtime = ToolRuntime()
    runtime.register(raw_tool("t"))
    bad_results = [
        ToolResult(is_error=True, error=ToolError("m", ErrorInfo("N", "\udcff"))),
        ToolResult(is_error=True, error=ToolError("m \udcff")),
        ToolResult(is_error=False, additional_contexts=[UserMessage(content=(), id="\ud800")]),
    ]
    for bad in bad_results:
        execution = lowlevel.create(runtime, ToolCall(call_id="c", name="t"))
        final = lowlevel.finish(execution, bad)
        assert final.error == ToolError("tool result must be losslessly JSON-serializable")


def test_converter_unstructures_every_value_class_like_to_json() -> None:
    message = UserMessage(content=[TextContent("ctx")], id="m1")
    result = ToolResult(
        is_error=True,
        content=[TextContent("Error: x"), ImageContent("AA==", "image/png")],
        error=ToolError("x", ErrorInfo("E", "C")),
        meta={"k": [1]},
        additional_contexts=[message],
    )
    assert converter.unstructure(result) == result.to_json()
    assert converter.unstructure(message) == message.to_json()
    assert converter.unstructure(result.error) == {
        "message": "x",
        "info": {"name": "E", "code": "C"},
    }


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        ({"is_error": False, "content": [7]}, "content block must be an object"),
        ({"is_error": False, "content": [{"type": "video"}]}, "unknown content block type"),
        ({"is_error": False, "content": "x"}, "content must be an array"),
        ({"is_error": False, "additional_contexts": {}}, "additional_contexts must be an array"),
        ({"is_error": False, "additional_contexts": [3]}, "message must be an object"),
        (
            {
                "is_error": False,
                "additional_contexts": [
                    {"id": "i", "role": "assistant", "content": [], "source": {}}
                ],
            },
            'message role must be "user"',
        ),
        (
            {
                "is_error": False,
                "additional_contexts": [{"id": "i", "role": "user", "content": {}, "source": {}}],
            },
            "message content must be an array",
        ),
        (
            {
                "is_error": False,
                "additional_contexts": [{"id": "i", "role": "user", "content": [], "source": 1}],
            },
            "message source must be an object",
        ),
        (
            {"is_error": False, "content": [{"type": "text"}]},
            'missing keys ["text"]',
        ),
        ([], "expected an object, got an array"),
    ],
)
def test_from_json_rejects_malformed_nested_values(data: Any, detail: str) -> None:
    with pytest.raises(ValueError, match=r"^invalid tool result JSON: ") as info:
        ToolResult.from_json(data)
    assert detail in str(info.value)


def test_frozen_dict_union_returns_a_new_frozen_dict() -> None:
    from dsh_tools import FrozenDict

    base = FrozenDict({"a": 1})
    merged = base | {"b": [2]}
    assert merged == {"a": 1, "b": (2,)}
    assert type(merged) is FrozenDict
    assert base == {"a": 1}
    assert base.__or__(3) is NotImplemented


def test_cli_main_in_process(capsys: pytest.CaptureFixture[str]) -> None:
    import runpy
    import sys

    from dsh_tools.cli import main

    assert main(["inspect", "events", "tools/change"]) == 0
    assert capsys.readouterr().out.startswith("## events\n- tools/change [emit]")
    argv = sys.argv
    sys.argv = ["python -m dsh_tools", "inspect", "api", "Abort"]
    try:
        with pytest.raises(SystemExit) as info:
            runpy.run_module("dsh_tools", run_name="__main__")
    finally:
        sys.argv = argv
    assert info.value.code == 0
    assert capsys.readouterr().out.startswith("## api\n- Abort — ")


def test_from_json_reports_result_invariants_with_the_prefix() -> None:
    with pytest.raises(ValueError, match=r"^invalid tool result JSON: ") as info:
        ToolResult.from_json({"is_error": True, "content": []})
    assert str(info.value) == "invalid tool result JSON: a failed ToolResult needs an error @ $"


def test_disposer_has_no_public_constructor() -> None:
    from dsh_tools import Disposer

    with pytest.raises(TypeError, match="returned by registration methods"):
        Disposer()


def test_lists_of_strings_and_booleans_structure_at_once_or_through_cattrs() -> None:
    """A frozen array of exactly ``str`` (or ``bool``) items becomes a fresh list without a
    hook per item; anything else goes through cattrs' own list hook and its messages."""
    names = ("a", "b")
    structured = converter.structure(names, list[str])
    assert structured == ["a", "b"]
    assert type(structured) is list
    assert converter.structure((True, False), list[bool]) == [True, False]
    assert converter.structure(["a"], list[str]) == ["a"]  # a plain list: cattrs' hook
    for value, kind in (((1,), list[str]), (("a", 1), list[str]), ((1,), list[bool])):
        with pytest.raises(Exception, match="While structuring list") as info:
            converter.structure(value, kind)
        assert "expected a" in str(info.value.exceptions[0])  # type: ignore[attr-defined]


@pytest.mark.parametrize("text", ["", "ok", "é 🙂", "line\nbreak"])
def test_a_text_block_built_on_the_hot_path_is_the_constructed_one(text: str) -> None:
    # The default renderer's text_block() is TextContent(text) for a known str.
    from dsh_tools._content import text_block

    block = text_block(text)
    assert type(block) is TextContent
    assert block == TextContent(text)
    assert block.text is text
    assert block.to_json() == {"type": "text", "text": text}

"""``render_python_sdk``: the typed Python SDK of Code Mode (code-mode §4.3).

Conformance: L-073 (golden), L-074 (Hypothesis), L-075 (names), L-076 (degrading), L-012
(order-independent text) and the rendering part of L-005 (5000-deep schemas).
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path
from typing import Any, cast

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_tools import (
    FrozenDict,
    Output,
    TextContent,
    ToolDefinition,
    ToolRunContext,
    ToolRuntime,
    define_tool,
)
from dsh_tools.code import render_python_sdk
from tests.helpers import nest
from tests.strategies import schemas

GOLDEN = Path(__file__).parent / "data" / "code_sdk_golden.txt"

PREAMBLE = (
    "A `run_code` program is the body of an async Python function. Call a tool with "
    "`await tools.<name>(...)`, passing its arguments as keyword arguments or as one dict; "
    'call a tool whose name is not a Python identifier as `await tools["<name>"](...)`. '
    "A call returns the tool's output as plain JSON data (dict, list, str, int, float, bool "
    "or None) and raises `ToolCallError` when the tool fails. Run independent calls at the "
    "same time with `asyncio.gather(...)` after `import asyncio`. `print()` what you want to "
    "read back and `return` a JSON value."
)
IMPORTS = "from typing import Any, Awaitable, Callable, Literal, NotRequired, TypedDict, overload"
TOOL_CALL_ERROR = "class ToolCallError(Exception):\n    tool_name: str"
FENCE_OPEN = "```python\n"
FENCE_CLOSE = "\n```\n"
#: ``tool()``'s default parameters: an object with no properties.
OBJECT: Any = {"type": "object"}


def render_value(args: object, value: object) -> list[TextContent]:
    return [TextContent(str(value))]


async def body(args: FrozenDict, ctx: ToolRunContext) -> object:
    return None


def output(schema: object) -> Output:
    return Output(schema=schema, render=render_value)


def tool(
    name: str = "t",
    *,
    parameters: object = OBJECT,
    output_schema: object = None,
    description: str = "",
) -> ToolDefinition:
    """A raw definition: its parameters are kept as given, whatever they are."""
    return ToolDefinition(
        name=name,
        description=description,
        parameters=cast("Any", parameters),
        output=output({} if output_schema is None else output_schema),
        execute=body,
    )


def code_of(sdk: str) -> str:
    """The code inside the SDK's fence, checking the frame around it."""
    head = f"{PREAMBLE}\n\n{FENCE_OPEN}"
    assert sdk.startswith(head)
    assert sdk.endswith(FENCE_CLOSE)
    return sdk[len(head) : -len(FENCE_CLOSE)]


def blocks_of(sdk: str) -> list[str]:
    """The code's blocks (separated by two blank lines)."""
    return code_of(sdk).split("\n\n\n")


def render_one(definition: ToolDefinition) -> tuple[list[str], str]:
    """One tool's declaration blocks and its ``Tools`` entry (without the ``class`` line)."""
    blocks = blocks_of(render_python_sdk([definition]))
    assert blocks[:2] == [IMPORTS, TOOL_CALL_ERROR]
    assert blocks[-1] == "tools: Tools"
    tools_class = blocks[-2]
    assert tools_class.startswith("class Tools:\n")
    return blocks[2:-2], tools_class.removeprefix("class Tools:\n")


def output_decl(schema: object) -> list[str]:
    """The declaration blocks of a tool ``t`` with that output schema (after ``TArgs``)."""
    declared, _ = render_one(tool(output_schema=schema))
    assert declared[0] == "class TArgs(TypedDict):\n    pass"
    return declared[1:]


def args_decl(parameters: object) -> tuple[list[str], str]:
    """The argument declaration blocks of a tool ``t`` (before ``TOutput``) and its entry."""
    declared, entry = render_one(tool(parameters=parameters))
    assert declared[-1] == "TOutput = Any"
    return declared[:-1], entry


def declared_names(blocks: list[str]) -> list[str]:
    """The name each declaration block declares."""
    names = []
    for block in blocks:
        (statement,) = ast.parse(block).body
        if isinstance(statement, ast.ClassDef):
            names.append(statement.name)
        else:
            assert isinstance(statement, ast.Assign)
            assert isinstance(statement.targets[0], ast.Name)
            names.append(statement.targets[0].id)
    return names


def assert_names_declared_before_use(code: str) -> ast.Module:
    """Parse ``code``; every name an annotation reads is imported, builtin or declared above.

    Also checks that no top-level name is declared twice.
    """
    module = ast.parse(code)
    known = {"str", "int", "float", "bool", "list", "dict", "Exception"}
    for statement in module.body:
        if isinstance(statement, ast.ImportFrom):
            known.update(alias.name for alias in statement.names)
            continue
        read = {
            node.id
            for node in ast.walk(statement)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
        }
        assert read <= known, (read - known, ast.unparse(statement))
        if isinstance(statement, ast.ClassDef):
            declared = statement.name
        elif isinstance(statement, ast.Assign):
            target = statement.targets[0]
            assert isinstance(target, ast.Name)
            declared = target.id
        else:
            assert isinstance(statement, ast.AnnAssign)
            assert isinstance(statement.target, ast.Name)
            declared = statement.target.id
        assert declared not in known, declared
        known.add(declared)
    return module


# -- L-073: the golden example -------------------------------------------------------------


def golden_tools() -> list[ToolDefinition]:
    """The four tools of the specification's example, built with ``define_tool``."""
    return [
        define_tool(
            name="read_file",
            description="Read a text file.",
            parameters={
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path inside the workspace."},
                    "max_bytes": {"type": "integer"},
                },
                "required": ["path"],
            },
            output=output({"type": "string"}),
            execute=body,
        ),
        define_tool(
            name="search",
            description="Search the web.\nReturns at most `limit` hits.",
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "limit": {"type": "integer"},
                    "mode": {"enum": ["fast", "deep"]},
                },
                "required": ["query"],
            },
            output=output(
                {
                    "type": "object",
                    "properties": {
                        "hits": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "url": {"type": "string"},
                                    "score": {"type": "number"},
                                },
                                "required": ["url"],
                            },
                        },
                        "total": {"oneOf": [{"type": "integer"}, {"type": "null"}]},
                    },
                    "required": ["hits"],
                }
            ),
            execute=body,
        ),
        define_tool(
            name="fs.stat",
            description="Stat a path.",
            parameters={
                "type": "object",
                "properties": {"file-path": {"type": "string"}},
                "required": ["file-path"],
            },
            output=output({}),
            execute=body,
        ),
        define_tool(
            name="ping",
            description="Check the service.",
            parameters={"type": "object"},
            output=output({"const": "pong"}),
            execute=body,
        ),
    ]


def test_l073_golden_four_tool_example_renders_exactly() -> None:
    golden = GOLDEN.read_text(encoding="utf-8")
    sdk = render_python_sdk(golden_tools())
    assert sdk == golden
    # The frame, spelled out: preamble, one blank line, the fence, a final newline.
    assert sdk.startswith(f"{PREAMBLE}\n\n```python\nfrom typing import")
    assert sdk.endswith("\n\n\ntools: Tools\n```\n")
    assert_names_declared_before_use(code_of(sdk))


def test_l012_sdk_is_byte_identical_whatever_the_registration_order() -> None:
    golden = GOLDEN.read_text(encoding="utf-8")
    texts = set()
    for order in itertools.permutations(golden_tools()):
        runtime = ToolRuntime()
        for definition in order:
            runtime.register(definition)
        visible = [runtime.get(schema.name) for schema in runtime.schemas()]
        assert None not in visible
        texts.add(render_python_sdk(cast("list[ToolDefinition]", visible)))
        # Rendering again, from a generator this time, gives the same text.
        texts.add(render_python_sdk(d for d in reversed(order)))
    assert texts == {golden}


def test_text_depends_only_on_names_descriptions_and_schemas() -> None:
    async def other_body(args: object, ctx: ToolRunContext) -> object:
        return "other"

    plain = tool("x", description="d", output_schema={"type": "string"})
    different = ToolDefinition(
        name="x",
        description="d",
        parameters={"type": "object"},
        output=Output(schema={"type": "string"}, render=lambda a, v: []),
        execute=other_body,
        timeout=5,
        is_concurrency_safe=True,
    )
    assert render_python_sdk([plain]) == render_python_sdk([different])


# -- Frame and Tools entries -----------------------------------------------------------------


def test_empty_tool_list_declares_an_empty_tools_class() -> None:
    expected = (
        f"{PREAMBLE}\n\n```python\n{IMPORTS}\n\n\n{TOOL_CALL_ERROR}\n\n\n"
        "class Tools:\n    pass\n\n\ntools: Tools\n```\n"
    )
    assert render_python_sdk([]) == expected
    assert_names_declared_before_use(code_of(expected))


def test_run_code_is_left_out() -> None:
    assert render_python_sdk([tool("run_code", description="x")]) == render_python_sdk([])
    with_run_code = render_python_sdk([tool("run_code"), tool("a")])
    assert with_run_code == render_python_sdk([tool("a")])


def test_no_properties_gives_a_method_without_parameters() -> None:
    for parameters in ({"type": "object"}, {"type": "object", "properties": {}}):
        declared, entry = args_decl(parameters)
        assert declared == ["class TArgs(TypedDict):\n    pass"]
        assert entry == "    async def t(self) -> TOutput: ..."


def test_keyword_parameters_in_properties_order_with_defaults_for_optional_keys() -> None:
    parameters = {
        "type": "object",
        "properties": {"b": {"type": "string"}, "a": {"type": "integer"}, "c": {}},
        "required": ["c", "b", "zz"],  # "zz" names no property: ignored
    }
    declared, entry = args_decl(parameters)
    assert declared == ["class TArgs(TypedDict):\n    b: str\n    a: NotRequired[int]\n    c: Any"]
    assert entry == "    async def t(self, *, b: str, a: int = ..., c: Any) -> TOutput: ..."


def test_l075_a_self_key_takes_the_positional_args_form() -> None:
    parameters = {"type": "object", "properties": {"self": {"type": "string"}, "x": {}}}
    declared, entry = args_decl(parameters)
    assert declared == [
        "class TArgs(TypedDict):\n    self: NotRequired[str]\n    x: NotRequired[Any]"
    ]
    assert entry == "    async def t(self, args: TArgs, /) -> TOutput: ..."


@pytest.mark.parametrize(
    ("name", "literal", "output_name"),
    [
        ("fs.stat", '"fs.stat"', "FsStatOutput"),
        ("class", '"class"', "ClassOutput"),
        ("__init__", '"__init__"', "InitOutput"),
        ("__", '"__"', "ToolOutput"),
        ("1x", '"1x"', "Tool1xOutput"),
        ("", '""', "ToolOutput"),
        ("a b", '"a b"', "ABOutput"),
        ('q"\\\n', '"q\\"\\\\\\n"', "QOutput"),
        ("é-ü", '"é-ü"', "ToolOutput"),
    ],
)
def test_a_name_that_is_no_attribute_gets_a_getitem_overload(
    name: str, literal: str, output_name: str
) -> None:
    _, entry = render_one(tool(name, description="Says hi."))
    assert entry.splitlines() == [
        "    # Says hi.",
        "    @overload",
        f"    def __getitem__(self, name: Literal[{literal}])"
        f" -> Callable[..., Awaitable[{output_name}]]: ...",
    ]
    module = ast.parse(code_of(render_python_sdk([tool(name)])))
    (getitem,) = [node for node in ast.walk(module) if isinstance(node, ast.FunctionDef)]
    annotation = getitem.args.args[1].annotation
    assert isinstance(annotation, ast.Subscript)
    assert ast.literal_eval(annotation.slice) == name


@pytest.mark.parametrize("name", ["ok", "_", "_private", "é", "match", "__x", "x__", "Tools"])
def test_an_attribute_name_gets_an_async_method(name: str) -> None:
    _, entry = render_one(tool(name))
    assert entry.startswith(f"    async def {name}(self) -> ")


def test_getitem_returns_an_awaitable_of_the_output() -> None:
    _, entry = render_one(tool("a.b", output_schema={"type": "integer"}))
    assert entry == (
        "    @overload\n"
        '    def __getitem__(self, name: Literal["a.b"]) -> Callable[..., Awaitable[ABOutput]]: ...'
    )


def test_tool_descriptions_become_comments() -> None:
    description = "First line.  \n\n   indented\t\r\nlast\x0bone\u2028more\n"
    _, entry = render_one(tool("t", description=description))
    assert entry.splitlines() == [
        "    # First line.",
        "    #",
        "    #    indented",
        "    # last",
        "    # one",
        "    # more",
        "    async def t(self) -> TOutput: ...",
    ]


def test_a_whitespace_only_description_is_blank_comment_lines() -> None:
    _, entry = render_one(tool("t", description=" \n\t"))
    assert entry.splitlines()[:2] == ["    #", "    #"]
    _, entry = render_one(tool("t", description="\n"))
    assert entry.splitlines()[0] == "    #"


def test_characters_no_source_can_hold_are_replaced_in_comments() -> None:
    # NUL and unpaired surrogates stop ast.parse even inside a comment.
    _, entry = render_one(tool("t", description="a\x00b\ud800c"))
    assert entry.splitlines()[0] == "    # a\ufffdb\ufffdc"


def test_an_unpaired_surrogate_in_a_name_is_escaped_in_its_literal() -> None:
    name = "x\ud800.\udfff"
    sdk = render_python_sdk([tool(name)])
    assert 'Literal["x\\ud800.\\udfff"]' in sdk
    module = ast.parse(code_of(sdk))
    (getitem,) = [node for node in ast.walk(module) if isinstance(node, ast.FunctionDef)]
    annotation = getitem.args.args[1].annotation
    assert isinstance(annotation, ast.Subscript)
    assert ast.literal_eval(annotation.slice) == name


def test_tools_sharing_a_name_render_in_the_order_given() -> None:
    first, second = tool("x", description="one"), tool("x", description="two")
    sdk = render_python_sdk([first, second])
    assert sdk.index("# one") < sdk.index("# two")
    assert "async def x(self) -> XOutput: ..." in sdk
    assert "async def x(self) -> X2Output: ..." in sdk


# -- Annotations -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "annotation"),
    [
        ({"type": "string"}, "str"),
        ({"type": "integer"}, "int"),
        ({"type": "number"}, "float"),
        ({"type": "boolean"}, "bool"),
        ({"type": "null"}, "None"),
        ({}, "Any"),
        ({"description": "only words"}, "Any"),
        ({"type": "array"}, "list[Any]"),
        ({"type": "array", "items": {"type": "string"}}, "list[str]"),
        ({"type": "array", "items": {"type": "array"}}, "list[list[Any]]"),
        ({"type": "object"}, "dict[str, Any]"),
        ({"type": "object", "properties": {}}, "dict[str, Any]"),
        ({"type": "object", "additionalProperties": False}, "dict[str, Any]"),
        ({"enum": [None]}, "None"),
        ({"enum": [None, None]}, "None"),
        ({"type": "null", "enum": [None]}, "None"),
        ({"enum": ["a", None]}, 'Literal["a", None]'),
        ({"type": "string", "enum": ["a", "b"]}, 'Literal["a", "b"]'),
        ({"enum": [True, False, 0, -7, 10**30]}, f"Literal[True, False, 0, -7, {10**30}]"),
        ({"enum": [1.5, 2.0, 1e300, -0.25, 1e-7]}, "Literal[1.5, 2.0, 1e+300, -0.25, 1e-07]"),
        ({"enum": ['q"\\é\n\t\x01\u2028']}, 'Literal["q\\"\\\\é\\n\\t\\u0001\u2028"]'),
        ({"const": None}, "None"),
        ({"const": "pong"}, 'Literal["pong"]'),
        ({"const": True}, "Literal[True]"),
        ({"const": False}, "Literal[False]"),
        ({"const": 3}, "Literal[3]"),
        ({"const": 0.1}, "Literal[0.1]"),
        ({"type": "integer", "const": 3.0}, "Literal[3.0]"),
        ({"oneOf": [{"type": "string"}, {"type": "null"}]}, "str | None"),
        ({"oneOf": [{"type": "string"}, {"type": "string", "title": "s"}]}, "str"),
        (
            {"oneOf": [{"type": "null"}, {"const": None}, {"enum": [None]}, {"type": "integer"}]},
            "None | int",
        ),
        ({"oneOf": [{}, {"type": "array"}, {}]}, "Any | list[Any]"),
        (
            {"oneOf": [{"oneOf": [{"type": "string"}, {"type": "null"}]}, {"type": "null"}]},
            "str | None | None",
        ),
        (
            {"type": "array", "items": {"oneOf": [{"const": 1}, {"const": 2}]}},
            "list[Literal[1] | Literal[2]]",
        ),
    ],
)
def test_annotation_rules(schema: object, annotation: str) -> None:
    assert output_decl(schema) == [f"TOutput = {annotation}"]


def test_an_object_output_with_properties_is_a_typed_dict_named_output() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "description": "The A."}, "b": {}},
        "required": ["a"],
        "additionalProperties": False,
    }
    assert output_decl(schema) == [
        "class TOutput(TypedDict):\n    # The A.\n    a: str\n    b: NotRequired[Any]"
    ]


def test_nested_typed_dicts_are_declared_before_their_owner() -> None:
    schema = {
        "type": "array",
        "items": {
            "oneOf": [
                {"type": "object", "properties": {"x": {"type": "integer"}}},
                {
                    "type": "object",
                    "properties": {
                        "y": {"type": "object", "properties": {"z": {"type": "null"}}},
                        "w": {
                            "type": "array",
                            "items": {"type": "object", "properties": {"v": {}}},
                        },
                    },
                    "required": ["y", "w"],
                },
            ]
        },
    }
    assert output_decl(schema) == [
        "class TOutputItemOption1(TypedDict):\n    x: NotRequired[int]",
        "class TOutputItemOption2Y(TypedDict):\n    z: NotRequired[None]",
        "class TOutputItemOption2WItem(TypedDict):\n    v: NotRequired[Any]",
        "class TOutputItemOption2(TypedDict):\n"
        "    y: TOutputItemOption2Y\n"
        "    w: list[TOutputItemOption2WItem]",
        "TOutput = list[TOutputItemOption1 | TOutputItemOption2]",
    ]


def test_property_descriptions_become_comments_in_class_syntax_typed_dicts() -> None:
    parameters = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "description": "Line one.  \n\nLine\x00 three.\t"},
            "b": {"type": "string", "description": ""},
        },
        "required": ["a", "b"],
    }
    declared, entry = args_decl(parameters)
    assert declared == [
        "class TArgs(TypedDict):\n"
        "    # Line one.\n"
        "    #\n"
        "    # Line\ufffd three.\n"
        "    a: str\n"
        "    b: str"
    ]
    assert entry == "    async def t(self, *, a: str, b: str) -> TOutput: ..."


@pytest.mark.parametrize(
    ("key", "nested"),
    [
        ("class", "TArgsClass"),
        ("None", "TArgsNone"),
        ("a-b", "TArgsAB"),
        ("1x", "TArgsField1x"),
        ("", "TArgsField"),
        ("x y", "TArgsXY"),
        ("é.b", "TArgsB"),
    ],
)
def test_l076_keys_that_are_not_python_names_make_a_functional_typed_dict(
    key: str, nested: str
) -> None:
    parameters = {
        "type": "object",
        "properties": {
            "ok": {"type": "string", "description": "dropped in the functional form"},
            key: {"type": "object", "properties": {"n": {"type": "number"}}},
        },
        "required": ["ok"],
    }
    declared, entry = args_decl(parameters)
    assert declared == [
        f"class {nested}(TypedDict):\n    n: NotRequired[float]",
        f'TArgs = TypedDict("TArgs", {{"ok": str, "{key}": NotRequired[{nested}]}})',
    ]
    assert entry == "    async def t(self, args: TArgs, /) -> TOutput: ..."


def test_functional_typed_dict_keys_are_json_literals() -> None:
    schema = {"type": "object", "properties": {'a"\\\n': {"type": "string"}}, "required": []}
    assert output_decl(schema) == [
        'TOutput = TypedDict("TOutput", {"a\\"\\\\\\n": NotRequired[str]})'
    ]
    module = ast.parse(code_of(render_python_sdk([tool(output_schema=schema)])))
    call = next(node for node in ast.walk(module) if isinstance(node, ast.Call))
    assert isinstance(call.args[1], ast.Dict)
    assert ast.literal_eval(cast("ast.expr", call.args[1].keys[0])) == 'a"\\\n'


def test_soft_keywords_and_builtin_names_are_plain_keys() -> None:
    parameters = {"type": "object", "properties": {"match": {}, "type": {}, "str": {}}}
    declared, entry = args_decl(parameters)
    assert declared == [
        "class TArgs(TypedDict):\n"
        "    match: NotRequired[Any]\n"
        "    type: NotRequired[Any]\n"
        "    str: NotRequired[Any]"
    ]
    assert entry == (
        "    async def t(self, *, match: Any = ..., type: Any = ..., str: Any = ...)"
        " -> TOutput: ..."
    )


# -- L-075: names ----------------------------------------------------------------------------


def test_l075_read_file_and_read_dash_file_claim_in_name_order() -> None:
    sdk = render_python_sdk(
        [
            tool("read_file", parameters={"type": "object", "properties": {"p": {}}}),
            tool("read-file", parameters={"type": "object", "properties": {"p": {}}}),
        ]
    )
    blocks = blocks_of(sdk)
    assert blocks[2:6] == [
        "class ReadFileArgs(TypedDict):\n    p: NotRequired[Any]",
        "ReadFileOutput = Any",
        "class ReadFile2Args(TypedDict):\n    p: NotRequired[Any]",
        "ReadFile2Output = Any",
    ]
    assert blocks[6] == (
        "class Tools:\n"
        "    @overload\n"
        '    def __getitem__(self, name: Literal["read-file"]) '
        "-> Callable[..., Awaitable[ReadFileOutput]]: ...\n"
        "\n"
        "    async def read_file(self, *, p: Any = ...) -> ReadFile2Output: ..."
    )


@pytest.mark.parametrize(
    ("name", "base"),
    [
        ("--", "Tool"),
        ("", "Tool"),
        ("é", "Tool"),
        ("1x", "Tool1x"),
        ("9", "Tool9"),
        ("_1x", "Tool1x"),
        ("x1", "X1"),
        ("readFILE_x", "ReadFILEX"),
        ("a.b-c d", "ABCD"),
        ("é_x", "X"),
        ("mcp__github__list_issues", "McpGithubListIssues"),
    ],
)
def test_l075_base_names(name: str, base: str) -> None:
    declared, _ = render_one(tool(name))
    assert declared == [f"class {base}Args(TypedDict):\n    pass", f"{base}Output = Any"]


def test_l075_a_taken_name_gets_the_smallest_free_suffix() -> None:
    # Name order: "A2" < "a" < "a-" < "a." < "a_"; "A2" is taken by the first tool.
    sdk = render_python_sdk([tool(n) for n in ["a_", "a.", "a-", "a", "A2"]])
    assert declared_names(blocks_of(sdk)[2:-2]) == [
        "A2Args",
        "A2Output",
        "AArgs",
        "AOutput",
        "A3Args",  # "A" and "A2" are taken
        "A3Output",
        "A4Args",
        "A4Output",
        "A5Args",
        "A5Output",
    ]


def test_l075_nested_types_claim_after_args_and_before_output() -> None:
    # "a" sorts before "a_args_b": its nested argument type claims "AArgsB" first.
    nested = {"type": "object", "properties": {"b": {"type": "object", "properties": {"c": {}}}}}
    sdk = render_python_sdk([tool("a_args_b"), tool("a", parameters=nested)])
    assert declared_names(blocks_of(sdk)[2:-2]) == [
        "AArgsB",
        "AArgs",
        "AOutput",
        "AArgsB2Args",
        "AArgsB2Output",
    ]


def test_l075_an_owner_claims_before_its_nested_types() -> None:
    parameters = {
        "type": "object",
        "properties": {
            "p": {
                "type": "object",
                "properties": {"q": {"type": "object", "properties": {"r": {}}}},
            },
            "p_q": {"type": "object", "properties": {"s": {}}},
            "": {"type": "object", "properties": {"t": {}}},
            "1": {"type": "object", "properties": {"u": {}}},
        },
    }
    declared, _ = args_decl(parameters)
    assert declared_names(declared) == [
        "TArgsPQ",
        "TArgsP",
        "TArgsPQ2",
        "TArgsField",
        "TArgsField1",
        "TArgs",
    ]


def test_l075_output_names_follow_the_claimed_output_name() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "object", "properties": {"y": {}}}}}
    sdk = render_python_sdk([tool("x", output_schema=schema), tool("x.", output_schema=schema)])
    assert declared_names(blocks_of(sdk)[2:-2]) == [
        "XArgs",
        "XOutputX",
        "XOutput",
        "X2Args",
        "X2OutputX",
        "X2Output",
    ]


# -- L-076: degrading ------------------------------------------------------------------------


class _Cycle(dict[str, Any]):
    pass


def _cyclic() -> dict[str, Any]:
    node: dict[str, Any] = {"type": "object", "properties": {}}
    node["properties"]["self_ref"] = node
    return node


@pytest.mark.parametrize(
    "parameters",
    [
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}},
        {"type": "object", "properties": {"a": {"type": "strng"}}},
        {"type": "object", "properties": {"a": {"oneOf": [{}]}}},
        {"type": "object", "required": "a"},
        {"type": "object", "properties": {1: {}}},
        {"type": "object", "properties": {"a": {"enum": [float("nan")]}}},
        {"type": "string"},
        {"type": "array", "items": {}},
        {"oneOf": [{"type": "object"}, {"type": "null"}]},
        {},
        [],
        None,
        "object",
        42,
        _Cycle(type="object"),  # a dict subclass is not a schema node
        _cyclic(),
    ],
)
def test_l076_unsupported_parameters_become_a_plain_dict_and_the_positional_form(
    parameters: object,
) -> None:
    declared, entry = args_decl(parameters)
    assert declared == ["TArgs = dict[str, Any]"]
    assert entry == "    async def t(self, args: TArgs, /) -> TOutput: ..."


def test_l076_a_40_deep_array_schema_is_any_below_depth_32() -> None:
    schema = nest(40, {"type": "string"}, lambda n: {"type": "array", "items": n})
    assert output_decl(schema) == ["TOutput = " + "list[" * 33 + "Any" + "]" * 33]
    # Depth 32 is the last node with its own annotation.
    schema = nest(32, {"type": "string"}, lambda n: {"type": "array", "items": n})
    assert output_decl(schema) == ["TOutput = " + "list[" * 32 + "str" + "]" * 32]


def test_l076_a_typed_dict_at_depth_32_has_any_properties() -> None:
    def wrap(n: object) -> object:
        return {"type": "object", "properties": {"a": n, "b": {"type": "null"}}, "required": ["a"]}

    declared = output_decl(nest(40, {"type": "string"}, wrap))
    assert len(declared) == 33
    assert (
        declared[0] == f"class TOutput{'A' * 32}(TypedDict):\n    a: Any\n    b: NotRequired[Any]"
    )
    assert declared[-1] == "class TOutput(TypedDict):\n    a: TOutputA\n    b: NotRequired[None]"
    declared = output_decl(nest(33, {"type": "string"}, wrap))
    assert (
        declared[0] == f"class TOutput{'A' * 32}(TypedDict):\n    a: Any\n    b: NotRequired[Any]"
    )


def test_l076_an_output_schema_outside_the_subset_is_any() -> None:
    # Output only accepts schemas of the subset; an object that merely looks like a
    # definition can carry anything, and still renders.
    @attrs.frozen
    class LooksLikeOutput:
        schema: object

    @attrs.frozen
    class LooksLikeDefinition:
        name: str
        description: str
        parameters: object
        output: LooksLikeOutput

    for schema in (None, {"type": "strng"}, {"oneOf": "x"}, _cyclic()):
        fake = LooksLikeDefinition("t", "", {"type": "object"}, LooksLikeOutput(schema))
        declared, _ = render_one(cast("ToolDefinition", fake))
        assert declared == ["class TArgs(TypedDict):\n    pass", "TOutput = Any"]


# -- L-005: 5000-deep schemas ----------------------------------------------------------------


def _deep_object(n: object) -> object:
    return {"type": "object", "properties": {"a": n}, "required": ["a"]}


def _deep_array(n: object) -> object:
    return {"type": "array", "items": n}


def _deep_one_of(n: object) -> object:
    return {"oneOf": [n, {"type": "null"}]}


def test_l005_5000_deep_output_and_argument_schemas_render_with_any_below_depth_32() -> None:
    deep_objects = nest(5000, {"type": "string"}, _deep_object)
    definitions = [
        define_tool(
            name="objects",
            description="",
            parameters=deep_objects,
            output=output(deep_objects),
            execute=body,
        ),
        tool("arrays", output_schema=nest(5000, {"type": "string"}, _deep_array)),
        tool("choices", output_schema=nest(5000, {"type": "string"}, _deep_one_of)),
    ]
    sdk = render_python_sdk(definitions)
    assert_names_declared_before_use(code_of(sdk))
    blocks = blocks_of(sdk)
    assert "ArraysOutput = " + "list[" * 33 + "Any" + "]" * 33 in blocks
    # Depth 32 is the innermost oneOf: its branches (depth 33) are both Any.
    assert "ChoicesOutput = Any" + " | None" * 32 in blocks
    for root in ("ObjectsArgs", "ObjectsOutput"):
        declared = [b for b in blocks if b.startswith(f"class {root}")]
        assert len(declared) == 33
        assert f"class {root}{'A' * 32}(TypedDict):\n    a: Any" in declared
    assert "    async def objects(self, *, a: ObjectsArgsA) -> ObjectsOutput: ..." in sdk


# -- L-074: generated tool sets --------------------------------------------------------------

_ANY_CHARACTER = st.characters(exclude_categories=())  # surrogates included
_LINE_BREAKY = st.text(st.sampled_from("ab #\t\n\r\x0b\x0c\x1c\x85\u2028\x00 é\\\"'"), max_size=12)
_NAMES = st.one_of(
    st.text(max_size=8),
    st.text(_ANY_CHARACTER, max_size=4),
    st.sampled_from(
        ["read_file", "read-file", "fs.stat", "class", "self", "__init__", "1x", "--", "run_code"]
    ),
)
_DESCRIPTIONS = st.one_of(_LINE_BREAKY, st.text(_ANY_CHARACTER, max_size=12))
_KEYS = st.one_of(
    st.text(max_size=5), st.sampled_from(["self", "class", "a", "a_b", "aB", "match"])
)


@st.composite
def _parameters(draw: st.DrawFn) -> object:
    shape = draw(st.sampled_from(["object", "object", "object", "any root", "junk"]))
    if shape == "junk":
        return draw(
            st.one_of(
                st.none(),
                st.integers(),
                st.lists(st.integers(), max_size=2),
                st.just({"type": "object", "properties": {"a": {"format": "x"}}}),
            )
        )
    if shape == "any root":
        return draw(schemas(max_depth=2))
    properties = draw(st.dictionaries(_KEYS, schemas(max_depth=2), max_size=3))
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if properties:
        parameters["required"] = draw(st.lists(st.sampled_from(sorted(properties)), unique=True))
    if draw(st.booleans()):
        parameters["description"] = draw(_DESCRIPTIONS)
    return parameters


@st.composite
def _tool_sets(draw: st.DrawFn) -> list[ToolDefinition]:
    names = draw(st.lists(_NAMES, max_size=4, unique=True))
    return [
        tool(
            name,
            parameters=draw(_parameters()),
            output_schema=draw(schemas(max_depth=3)),
            description=draw(_DESCRIPTIONS),
        )
        for name in names
    ]


@settings(max_examples=100, deadline=None)
@given(definitions=_tool_sets(), order=st.randoms(use_true_random=False))
def test_l074_generated_tool_sets_render_parseable_stable_code(
    definitions: list[ToolDefinition], order: Any
) -> None:
    sdk = render_python_sdk(definitions)
    module = assert_names_declared_before_use(code_of(sdk))
    # One Tools entry per tool (run_code left out), and nothing else in the class.
    tools_class = next(
        node for node in module.body if isinstance(node, ast.ClassDef) and node.name == "Tools"
    )
    entries = [
        n for n in tools_class.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    assert len(entries) == len([d for d in definitions if d.name != "run_code"])
    # The same text again, and whatever the order the tools come in (L-012).
    assert render_python_sdk(definitions) == sdk
    shuffled = list(definitions)
    order.shuffle(shuffled)
    assert render_python_sdk(shuffled) == sdk

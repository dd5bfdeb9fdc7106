"""``@tool``: tool definitions from annotated ``async def`` functions (runtime.md §12.4).

Conformance: H-001..H-003, H-005..H-009, H-025..H-027, H-031, H-049..H-054, H-058, and the
``@tool`` parts of M-005, M-011.
"""

from __future__ import annotations

import enum
import inspect
import json
import math
import typing
from typing import Annotated, Any, Literal, Optional

import attrs
import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from dsh_tools import (
    ErrorInfo,
    ExecutionMode,
    FrozenDict,
    JsonValue,
    TextContent,
    ToolArgsError,
    ToolCall,
    ToolDefinition,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    assert_supported_json_schema,
    freeze_json,
    thaw_json,
    tool,
)
from tests.helpers import Picky, error_text, mode, run
from tests.strategies import near_values, valid_values

if typing.TYPE_CHECKING:
    from collections.abc import Iterator


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@attrs.frozen
class Server:
    host: str
    port: int = attrs.field(default=80)

    @port.validator
    def _positive(self, attribute: attrs.Attribute[int], value: int) -> None:
        if value <= 0:
            raise ValueError("port must be positive")


@attrs.frozen
class Defaults:
    a: int = 1
    b: str = "x"


@attrs.frozen
class Report:
    ok: bool
    servers: list[Server]


def params(defn: ToolDefinition) -> Any:
    """The parameters schema as plain JSON (definitions hold it frozen)."""
    return thaw_json(defn.parameters)


def prop(defn: ToolDefinition, name: str) -> Any:
    return params(defn)["properties"][name]


async def execute(defn: ToolDefinition, arguments: object) -> ToolResult:
    runtime = ToolRuntime()
    runtime.register(defn)
    return await runtime.execute(ToolCall(call_id="c1", name=defn.name, arguments=arguments))


# --------------------------------------------------------------------------- schema derivation


def test_h001_required_string_parameter() -> None:
    """H-001: ``path: str`` without a default."""

    @tool
    async def read(path: str) -> str:
        """Read a file."""
        return path

    expected = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    }
    assert params(read) == expected
    runtime = ToolRuntime()
    runtime.register(read)
    assert runtime.schemas()[0].to_json() == {
        "name": "read",
        "description": "Read a file.",
        "parameters": expected,
    }


def test_h002_no_parameters() -> None:
    """H-002: ``{"type":"object","properties":{}}`` and no ``required``."""

    @tool
    async def ping() -> str:
        """Ping."""
        return "pong"

    assert params(ping) == {"type": "object", "properties": {}}


def test_h003_attrs_parameter() -> None:
    """H-003: a nested, closed object with its own ``required``."""

    @tool
    async def deploy(server: Server) -> None:
        """Deploy."""

    assert prop(deploy, "server") == {
        "type": "object",
        "properties": {
            "host": {"type": "string"},
            "port": {"type": "integer", "default": 80},
        },
        "required": ["host"],
        "additionalProperties": False,
    }
    assert params(deploy)["required"] == ["server"]


def test_h005_defaults() -> None:
    """H-005: a default makes a parameter optional and is emitted as ``"default"``."""

    @tool
    async def f(a: int, b: int = 3, c: str | None = None) -> None:
        """F."""

    schema = params(f)
    assert schema["required"] == ["a"]
    assert schema["properties"]["a"] == {"type": "integer"}
    assert schema["properties"]["b"] == {"type": "integer", "default": 3}
    assert schema["properties"]["c"] == {
        "oneOf": [{"type": "string"}, {"type": "null"}],
        "default": None,
    }


def test_h006_literal_annotated_list_and_literal_default() -> None:
    """H-006: ``enum`` (+``type``), ``description``, ``items``; keys absent when unset."""

    @tool
    async def f(
        mode: Literal["a", "b"],
        note: Annotated[str, "doc"],
        tags: list[str],
        level: Literal["lo", "hi"] = "lo",
    ) -> None:
        """F."""

    assert prop(f, "mode") == {"type": "string", "enum": ["a", "b"]}
    assert prop(f, "note") == {"type": "string", "description": "doc"}
    assert prop(f, "tags") == {"type": "array", "items": {"type": "string"}}
    assert prop(f, "level") == {"type": "string", "enum": ["lo", "hi"], "default": "lo"}


def test_h007_bare_list() -> None:
    """H-007: bare ``list`` → ``{"type":"array"}``."""

    @tool
    async def f(xs: list) -> None:  # type: ignore[type-arg]
        """F."""

    assert prop(f, "xs") == {"type": "array"}


def test_h008_attrs_class_with_only_defaults() -> None:
    """H-008: no ``required`` key."""

    @tool
    async def f(d: Defaults) -> None:
        """F."""

    assert prop(f, "d") == {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "default": 1},
            "b": {"type": "string", "default": "x"},
        },
        "additionalProperties": False,
    }


async def test_h009_list_of_attrs_objects() -> None:
    """H-009: an array with object ``items``; valid arguments reach the body structured."""
    seen: list[object] = []

    @tool
    async def deploy(servers: list[Server]) -> int:
        """Deploy."""
        seen.append(servers)
        return len(servers)

    schema = prop(deploy, "servers")
    assert schema["type"] == "array"
    assert schema["items"]["type"] == "object"
    assert schema["items"]["additionalProperties"] is False
    result = await execute(deploy, {"servers": [{"host": "a"}, {"host": "b", "port": 8080}]})
    assert not result.is_error, result
    assert result.value == 2
    assert seen == [[Server("a"), Server("b", 8080)]]


@pytest.mark.parametrize(
    ("annotation", "expected"),
    [
        (str, {"type": "string"}),
        (int, {"type": "integer"}),
        (float, {"type": "number"}),
        (bool, {"type": "boolean"}),
        (None, {"type": "null"}),
        (type(None), {"type": "null"}),
        (int | None, {"oneOf": [{"type": "integer"}, {"type": "null"}]}),
        (Optional[str], {"oneOf": [{"type": "string"}, {"type": "null"}]}),  # noqa: UP045
        (Literal["a", "b"], {"type": "string", "enum": ["a", "b"]}),
        (Literal[1, 2], {"type": "integer", "enum": [1, 2]}),
        (Literal[True], {"type": "boolean", "enum": [True]}),
        (Literal["a", 1], {"enum": ["a", 1]}),
        (Color, {"enum": ["red", "green"]}),
        (Level, {"enum": [1, 2]}),
        (list[int], {"type": "array", "items": {"type": "integer"}}),
        (tuple[str, ...], {"type": "array", "items": {"type": "string"}}),
        (list, {"type": "array"}),
        (dict[str, int], {"type": "object"}),
        (Any, {}),
        (object, {}),
        (Annotated[int, "how many"], {"type": "integer", "description": "how many"}),
        (Annotated[int, 5, "text", "more"], {"type": "integer", "description": "text"}),
        (
            list[Annotated[str, "a tag"]],
            {"type": "array", "items": {"type": "string", "description": "a tag"}},
        ),
        (Optional[Any], {}),  # noqa: UP045 - Any already accepts null
        (Literal["a", None] | None, {"enum": ["a", None]}),
        (
            Defaults | None,
            {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {
                            "a": {"type": "integer", "default": 1},
                            "b": {"type": "string", "default": "x"},
                        },
                        "additionalProperties": False,
                    },
                    {"type": "null"},
                ]
            },
        ),
    ],
    ids=repr,
)
def test_h026_annotation_mapping(annotation: Any, expected: Any) -> None:
    """H-026: every supported annotation maps as in §12.4 (parameter and return)."""

    async def f(x: Any) -> Any:
        """F."""

    f.__annotations__ = {"x": annotation, "return": annotation}
    defn = tool(f)
    assert prop(defn, "x") == expected
    assert thaw_json(defn.output.schema) == expected


def test_h027_root_open_attrs_closed() -> None:
    """H-027: no ``additionalProperties`` at the root; attrs objects are closed."""

    @tool
    async def f(server: Server) -> None:
        """F."""

    assert "additionalProperties" not in params(f)
    assert prop(f, "server")["additionalProperties"] is False


async def test_h027_root_open_attrs_closed_at_run_time() -> None:
    @tool
    async def f(server: Server) -> str:
        """F."""
        return server.host

    ok = await execute(f, {"server": {"host": "h"}, "unexpected": 1})
    assert not ok.is_error, ok
    bad = await execute(f, {"server": {"host": "h", "x": 1}})
    assert error_text(bad) == (
        'Error: invalid arguments: "server.x" is not a declared property '
        "(additionalProperties: false)"
    )


# --------------------------------------------------------------------------- decoration errors


def test_h031_not_a_function() -> None:
    """H-031: ``@tool(<name>) requires a function (async def or def)``: a plain ``def`` is
    accepted since issue 19 (tests/test_sync_body.py); a generator function, a class or a
    callable object is not."""

    def gen(x: int) -> Iterator[int]:
        """Gen."""
        yield x

    class Callable_:
        """C."""

        def __call__(self, x: int) -> int:
            return x

    for fn in (gen, Callable_(), Callable_):
        with pytest.raises(TypeError) as info:
            tool(name="renamed")(fn)
        assert str(info.value) == "@tool(renamed) requires a function (async def or def)"
    with pytest.raises(TypeError) as info:
        tool(gen)
    assert str(info.value) == "@tool(gen) requires a function (async def or def)"


def test_h031_variadic_parameters() -> None:
    async def star(*args: int) -> None:
        """Star."""

    async def double_star(**kwargs: int) -> None:
        """Double star."""

    for fn in (star, double_star):
        with pytest.raises(TypeError) as info:
            tool(fn)
        assert str(info.value) == f"@tool({fn.__name__}): *args and **kwargs are not supported"


def test_h031_missing_annotation() -> None:
    async def f(path, n: int) -> None:  # type: ignore[no-untyped-def]
        """F."""

    with pytest.raises(TypeError) as info:
        tool(f)
    assert str(info.value) == '@tool(f): parameter "path" needs a type annotation'


@pytest.mark.parametrize(
    ("annotation", "offending"),
    [
        (set[int], set[int]),
        (int | str, int | str),
        (tuple[int, str], tuple[int, str]),
        (dict[int, str], dict[int, str]),
        (list[bytes], bytes),
        (Literal[1.5], Literal[1.5]),
        (dict[str, complex], complex),
    ],
    ids=repr,
)
def test_h031_unsupported_annotation(annotation: Any, offending: Any) -> None:
    async def f(p: Any) -> None:
        """F."""

    f.__annotations__ = {"p": annotation, "return": None}
    with pytest.raises(TypeError) as info:
        tool(f)
    assert str(info.value) == f'@tool(f): unsupported annotation {offending!r} for "p"'


def test_h031_unsupported_return_annotation() -> None:
    async def f() -> bytes:
        """F."""
        return b""

    with pytest.raises(TypeError) as info:
        tool(f)
    assert str(info.value) == f'@tool(f): unsupported annotation {bytes!r} for "return"'


def test_h031_no_description() -> None:
    async def f(x: int) -> None:
        pass

    with pytest.raises(ValueError, match="description") as info:
        tool(f)
    assert str(info.value) == (
        "@tool(f): a description is required (pass description= or write a docstring)"
    )
    assert tool(description="Given.")(f).description == "Given."


@attrs.define
class _Unresolvable:
    x: DoesNotExist  # type: ignore[name-defined]  # noqa: F821


class _Empty(enum.Enum):
    pass


@pytest.mark.parametrize(
    "annotation",
    [
        _Unresolvable,
        _Empty,
        attrs.make_class("Untyped", {"x": attrs.field()}),
        [int],
        Literal[Color.RED],
    ],
    ids=["unresolvable-attrs", "empty-enum", "untyped-attrs", "list-instance", "enum-literal"],
)
def test_h031_more_unsupported_annotations(annotation: Any) -> None:
    async def f(p: Any) -> None:
        """F."""

    f.__annotations__ = {"p": annotation, "return": None}
    with pytest.raises(TypeError) as info:
        tool(f)
    assert str(info.value) == f'@tool(f): unsupported annotation {annotation!r} for "p"'


def test_h031_unresolvable_annotation() -> None:
    async def f(p: Nope) -> None:  # type: ignore[name-defined]  # noqa: F821
        """F."""

    with pytest.raises(TypeError) as info:
        tool(f)
    assert str(info.value) == "@tool(f): cannot resolve the annotations: name 'Nope' is not defined"


@attrs.frozen
class Options:
    fixed: int = attrs.field(init=False, default=0)
    tags: list[str] = attrs.Factory(list)
    ratio: float = math.inf
    level: Annotated[int, 5] = 1


def test_attrs_field_details() -> None:
    @tool
    async def f(options: Options) -> None:
        """F."""

    assert prop(f, "options") == {
        "type": "object",
        "properties": {
            # init=False fields are not data; a Factory or non-JSON default is not shown.
            "tags": {"type": "array", "items": {"type": "string"}},
            "ratio": {"type": "number"},
            "level": {"type": "integer", "default": 1},
        },
        "additionalProperties": False,
    }


@attrs.frozen
class TreeNode:
    label: str
    children: list[TreeNode]


@attrs.frozen
class Forest:
    trees: list[TreeNode]


def test_self_referencing_attrs_class_is_unsupported() -> None:
    """The subset has no ``$ref``: a class that contains itself has no finite schema."""

    async def f(forest: Forest) -> None:
        """F."""

    with pytest.raises(TypeError) as info:
        tool(f)
    assert str(info.value) == f'@tool(f): unsupported annotation {TreeNode!r} for "forest"'


def test_a_class_used_twice_is_not_a_cycle() -> None:
    async def f(a: Server, b: list[Server]) -> None:
        """F."""

    defn = tool(f)
    assert prop(defn, "a") == prop(defn, "b")["items"] == prop_schema_of_server()


def test_default_must_be_lossless() -> None:
    async def f(x: float = math.nan) -> None:
        """F."""

    with pytest.raises(TypeError, match=r'^@tool\(f\): the default of "x" is not lossless JSON'):
        tool(f)


def test_a_default_too_large_to_print_is_still_reported() -> None:
    """An int beyond the interpreter's digit limit cannot even be ``repr``-ed: the error
    still names the tool and the parameter (H-031)."""

    async def f(n: int = 10**5000) -> None:
        """F."""

    with pytest.raises(TypeError) as info:
        tool(f)
    assert str(info.value) == (
        '@tool(f): the default of "n" is not lossless JSON: <int that cannot be printed>'
    )

    async def g(n: Literal[10**5000]) -> None:  # type: ignore[valid-type]
        """G."""

    with pytest.raises(TypeError) as info:
        tool(g)
    assert str(info.value).startswith("@tool(g): unsupported annotation <")
    assert str(info.value).endswith('that cannot be printed> for "n"')


@pytest.mark.parametrize("value", ["\ud800", -0.0], ids=["lone-surrogate", "negative-zero"])
def test_a_literal_value_that_is_not_lossless_json_is_unsupported(value: object) -> None:
    """H-031: a ``Literal`` (or ``Enum``) value with no lossless JSON form has no schema:
    the §12.4 ``TypeError``, not the schema checker's complaint about the derived enum."""
    annotation = Literal[value]  # type: ignore[valid-type]

    async def f(x: object) -> None:
        """F."""

    f.__annotations__["x"] = annotation  # a local: a string annotation would not resolve
    with pytest.raises(TypeError) as info:
        tool(f)
    assert str(info.value) == f'@tool(f): unsupported annotation {annotation!r} for "x"'


def test_defaults_are_unstructured() -> None:
    @tool
    async def f(color: Color = Color.GREEN, server: Server = Server("h")) -> None:
        """F."""

    assert prop(f, "color")["default"] == "green"
    assert prop(f, "server")["default"] == {"host": "h", "port": 80}


def test_name_and_description() -> None:
    @tool
    async def documented(x: int) -> None:
        """First line of the summary
        continues here.

        Details that are not part of the description.
        """

    assert documented.name == "documented"
    assert documented.description == "First line of the summary continues here."

    @tool(name="other", description="Explicit.")
    async def renamed(x: int) -> None:
        """Ignored."""

    assert isinstance(renamed, ToolDefinition)
    assert (renamed.name, renamed.description) == ("other", "Explicit.")


@pytest.mark.parametrize("timeout", [0, -2.5, math.inf, math.nan, 10**400])
def test_timeout_is_checked(timeout: float) -> None:
    async def f() -> None:
        """F."""

    with pytest.raises(ValueError, match="timeout") as info:
        tool(timeout=timeout)(f)
    assert str(info.value) == "@tool(f): timeout must be a positive finite number"
    assert tool(timeout=2)(f).timeout == 2.0


# --------------------------------------------------------------------------- running


async def test_h025_literal_and_enum_values() -> None:
    """H-025: the schema ``enum`` holds the values; the body gets the member / literal."""
    seen: list[tuple[Color, Level, str]] = []

    @tool
    async def paint(color: Color, level: Level, mode: Literal["a", "b"] = "a") -> str:
        """Paint."""
        seen.append((color, level, mode))
        return color.value

    assert prop(paint, "color")["enum"] == ["red", "green"]
    assert prop(paint, "level")["enum"] == [1, 2]
    result = await execute(paint, {"color": "green", "level": 2, "mode": "b"})
    assert not result.is_error, result
    assert seen == [(Color.GREEN, Level.HIGH, "b")]
    assert type(seen[0][1]) is Level
    bad = await execute(paint, {"color": "blue", "level": 2})
    assert error_text(bad) == 'Error: invalid arguments: "color" must be one of ["red","green"]'


async def test_arguments_are_structured_into_their_annotations() -> None:
    seen: dict[str, object] = {}

    @tool
    async def f(
        ratio: float,
        count: int,
        names: tuple[str, ...],
        table: dict[str, int],
        anything: Any,
        thing: object,
        maybe: Server | None = None,
    ) -> None:
        """F."""
        seen.update(
            ratio=ratio, count=count, names=names, table=table, anything=anything, thing=thing
        )
        seen["maybe"] = maybe

    arguments = {
        "ratio": 3,
        "count": 2.0,
        "names": ["a", "b"],
        "table": {"k": 1},
        "anything": {"x": [1]},
        "thing": [None],
        "maybe": {"host": "h"},
    }
    result = await execute(f, arguments)
    assert not result.is_error, result
    assert seen["ratio"] == 3.0
    assert type(seen["ratio"]) is float
    assert seen["count"] == 2
    assert type(seen["count"]) is int
    assert seen["names"] == ("a", "b")
    assert seen["table"] == {"k": 1}
    # Any and object receive the frozen JSON value as it is.
    assert seen["anything"] == freeze_json({"x": [1]})
    assert seen["thing"] == (None,)
    assert seen["maybe"] == Server("h")


async def test_values_of_exactly_the_annotated_scalar_type_skip_the_converter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """str, int, float and bool values of exactly that type are passed on as they are, and
    a scalar return value is rendered as it is: the converter would return them unchanged.
    So is a plain JSON container (frozen instead). Any other value still goes through it."""
    from dsh_tools import _convert, _tool_decorator

    structured: list[object] = []
    unstructured: list[object] = []
    real = _convert.converter

    class Spy:
        def structure(self, value: Any, annotation: Any) -> Any:
            structured.append(value)
            return real.structure(value, annotation)

        def unstructure(self, value: Any) -> Any:
            unstructured.append(value)
            return real.unstructure(value)

    monkeypatch.setattr(_tool_decorator, "converter", Spy())
    seen: list[object] = []

    @tool
    async def f(s: str, n: int, x: float, b: bool, m: int = 0, y: float = 0.0) -> object:
        """F."""
        seen.extend([s, n, x, b, m, y])
        if m == 7:
            return {"n": [n]}  # plain JSON
        return {"n": n, "d": Defaults(a=n)} if b else n

    result = await execute(f, {"s": "a", "n": 10**30, "x": 1.5, "b": False, "m": 2.0, "y": 3})
    assert not result.is_error, result
    assert seen == ["a", 10**30, 1.5, False, 2, 3.0]
    assert [type(v) for v in seen] == [str, int, float, bool, int, float]
    assert structured == [2.0, 3]  # only the values of another type
    assert unstructured == []  # an int is returned as it is
    assert result.content == (TextContent(str(10**30)),)
    result = await execute(f, {"s": "a", "n": 1, "x": 1.5, "b": True})
    assert not result.is_error, result
    assert unstructured == [{"n": 1, "d": Defaults(a=1)}]
    assert result.value == {"n": 1, "d": {"a": 1, "b": "x"}}
    result = await execute(f, {"s": "a", "n": 1, "x": 1.5, "b": True, "m": 7})
    assert not result.is_error, result
    assert unstructured == [{"n": 1, "d": Defaults(a=1)}]  # no second conversion
    assert result.value == {"n": (1,)}


async def test_annotated_metadata_that_is_unhashable_still_structures() -> None:
    """``Annotated`` metadata only documents, and may be unhashable (a dict), which cattrs
    cannot look hooks up by: arguments are structured into the annotation without it."""
    seen: list[object] = []

    @tool
    async def f(
        x: Annotated[int, "how many", {"unit": "items"}],
        xs: list[Annotated[float, {"unit": "m"}]],
    ) -> Annotated[int, {"unit": "items"}]:
        """F."""
        seen.extend([x, xs])
        return x

    assert f.parameters["properties"]["x"] == {"type": "integer", "description": "how many"}
    result = await execute(f, {"x": 2.0, "xs": [1, 2.5]})
    assert not result.is_error, result
    assert seen == [2, [1.0, 2.5]]
    assert type(seen[0]) is int
    assert result.value == 2


_UNHASHABLE_FIELD = Annotated[int, {"unit": "items"}]


@attrs.frozen
class _Box:
    n: _UNHASHABLE_FIELD


def test_an_attrs_field_with_unhashable_annotated_metadata_is_refused() -> None:
    """H-031: cattrs looks an attrs field's hooks up by its type, so such a class could
    never be structured or unstructured: refused when the tool is made, not on every call."""

    async def takes(box: _Box) -> None:
        """Takes."""

    async def gives() -> _Box:
        """Gives."""
        return _Box(1)

    for fn, where in ((takes, "box"), (gives, "return")):
        with pytest.raises(TypeError) as info:
            tool(fn)
        assert str(info.value) == (
            f'@tool({fn.__name__}): unsupported annotation {_UNHASHABLE_FIELD!r} for "{where}"'
        )


async def test_missing_optional_parameters_use_python_defaults() -> None:
    seen: list[object] = []

    @tool
    async def f(a: int, b: int = 7, c: Server = Server("dflt"), /) -> None:
        """F (positional-only parameters too)."""
        seen.append((a, b, c))

    result = await execute(f, {"a": 1, "c": {"host": "x"}})
    assert not result.is_error, result
    assert seen == [(1, 7, Server("x"))]
    result = await execute(f, {"a": 1})
    assert not result.is_error, result
    assert seen[-1] == (1, 7, Server("dflt"))


async def test_h050_structuring_failure() -> None:
    """H-050: ``"<p>" could not be structured: <message>`` (an attrs validator raised)."""
    seen: list[object] = []

    @tool
    async def deploy(server: Server, other: Server | None = None) -> None:
        """Deploy."""
        seen.append(server)

    result = await execute(deploy, {"server": {"host": "h", "port": -1}})
    assert error_text(result) == (
        'Error: invalid arguments: "server" could not be structured: port must be positive'
    )
    assert result.error is not None
    assert result.error.info == ErrorInfo("ToolArgsError", "INVALID_ARGS")
    both = await execute(
        deploy, {"server": {"host": "h", "port": 0}, "other": {"host": "o", "port": -5}}
    )
    assert both.error is not None
    assert both.error.message == str(
        ToolArgsError(
            [
                '"server" could not be structured: port must be positive',
                '"other" could not be structured: port must be positive',
            ]
        )
    )
    assert seen == []


async def test_h050_structuring_failure_outside_attrs() -> None:
    @tool
    async def f(x: float) -> None:
        """F."""

    result = await execute(f, {"x": 10**400})
    assert error_text(result) == (
        'Error: invalid arguments: "x" could not be structured: int too large to convert to float'
    )


async def test_h051_context_parameter() -> None:
    """H-051: the ``ToolRunContext`` parameter gets the context and is not in the schema."""
    seen: list[object] = []

    @tool
    async def f(ctx: ToolRunContext, /, path: str, *, flag: bool = False) -> str:
        """F."""
        seen.append((ctx.call_id, ctx.name, path, flag))
        return path

    assert params(f) == {
        "type": "object",
        "properties": {"path": {"type": "string"}, "flag": {"type": "boolean", "default": False}},
        "required": ["path"],
    }
    result = await execute(f, {"path": "p", "flag": True})
    assert not result.is_error, result
    assert seen == [("c1", "f", "p", True)]


def test_h051_only_one_context_parameter() -> None:
    async def f(a: ToolRunContext, b: ToolRunContext) -> None:
        """F."""

    with pytest.raises(TypeError, match="only one parameter may receive the ToolRunContext"):
        tool(f)


async def test_h049_attrs_return_value() -> None:
    """H-049: the output schema is derived; the returned instance is unstructured, validated."""

    @tool
    async def check(fail: bool = False) -> Report:
        """Check."""
        if fail:
            return "not a report"  # type: ignore[return-value]
        return Report(ok=True, servers=[Server("a")])

    assert thaw_json(check.output.schema) == {
        "type": "object",
        "properties": {
            "ok": {"type": "boolean"},
            "servers": {
                "type": "array",
                "items": prop_schema_of_server(),
            },
        },
        "required": ["ok", "servers"],
        "additionalProperties": False,
    }
    result = await execute(check, {})
    assert not result.is_error, result
    assert result.value == freeze_json({"ok": True, "servers": [{"host": "a", "port": 80}]})
    bad = await execute(check, {"fail": True})
    assert bad.error is not None
    assert bad.error.info == ErrorInfo("ToolOutputError", "INVALID_TOOL_OUTPUT")
    assert bad.error.message == 'tool "check" returned invalid output: "value" must be an object'


def prop_schema_of_server() -> Any:
    return {
        "type": "object",
        "properties": {"host": {"type": "string"}, "port": {"type": "integer", "default": 80}},
        "required": ["host"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    "value",
    [{"b": [1, "é"], "a": None}, [1, {"x": 2.5}], [], {}],
    ids=["dict", "list", "empty-list", "empty-dict"],
)
async def test_h058_default_render_of_dicts_and_lists(value: Any) -> None:
    """H-058: the text is ``json.dumps(value, ensure_ascii=False, indent=2)`` (frozen value)."""

    @tool
    async def f() -> Any:
        """F."""
        return value

    result = await execute(f, {})
    assert not result.is_error, result
    assert result.value == freeze_json(value)
    assert result.content == (
        TextContent(json.dumps(freeze_json(value), ensure_ascii=False, indent=2)),
    )


@given(
    value=st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False).filter(
        lambda f: not (f == 0 and math.copysign(1.0, f) < 0)
    )
)
def test_h058_default_render_of_a_scalar_is_its_json_text(value: Any) -> None:
    """H-058: a scalar value renders as ``json.dumps(value, ensure_ascii=False, indent=2)``,
    which for a scalar is its plain JSON text (the renderer writes it without the encoder)."""

    @tool
    async def f() -> Any:
        """F."""
        return value

    result = trio.run(execute, f, {})
    assert not result.is_error, result
    assert result.content == (TextContent(json.dumps(value, ensure_ascii=False, indent=2)),)


async def test_default_render_of_a_string_and_custom_render() -> None:
    @tool
    async def s() -> str:
        """S."""
        return "plain"

    assert (await execute(s, {})).content == (TextContent("plain"),)

    def render(args: JsonValue, value: JsonValue) -> list[TextContent]:
        return [TextContent(f"{args['n']}->{value}")]

    def meta(args: JsonValue, value: JsonValue) -> JsonValue:
        return {"n": value}

    @tool(render=render, presentation_meta=meta)
    async def double(n: int) -> int:
        """Double."""
        return n * 2

    result = await execute(double, {"n": 4})
    assert result.content == (TextContent("4->8"),)
    assert result.meta == {"n": 8}


def test_m005_m011_concurrency() -> None:
    """M-005/M-011 (@tool): ``True`` stays ``True``; a callable sees valid frozen arguments."""
    seen: list[object] = []

    def classify(args: FrozenDict) -> object:
        seen.append(args)
        return args["n"] > 0

    @tool(is_concurrency_safe=classify)
    async def c(n: int) -> None:
        """C."""

    @tool(is_concurrency_safe=True)
    async def p(n: int) -> None:
        """P."""

    @tool
    async def e(n: int) -> None:
        """E."""

    runtime = ToolRuntime()
    for defn in (c, p, e):
        runtime.register(defn)
    assert p.is_concurrency_safe is True
    assert e.is_concurrency_safe is False
    assert mode(runtime, "c", {"n": 1}) is ExecutionMode.PARALLEL
    assert mode(runtime, "c", {"n": -1}) is ExecutionMode.EXCLUSIVE
    assert mode(runtime, "c", {"n": "1"}) is ExecutionMode.EXCLUSIVE
    assert mode(runtime, "c", {}) is ExecutionMode.EXCLUSIVE
    assert seen == [{"n": 1}, {"n": -1}]
    for arguments in ({"n": 1}, {}, "junk"):
        assert mode(runtime, "p", arguments) is ExecutionMode.PARALLEL
        assert mode(runtime, "e", arguments) is ExecutionMode.EXCLUSIVE


async def test_invalid_arguments_never_reach_the_function() -> None:
    seen: list[object] = []

    @tool
    async def f(path: str) -> None:
        """F."""
        seen.append(path)

    result = await run_tool(f, {"path": 1})
    assert error_text(result) == 'Error: invalid arguments: "path" must be a string'
    assert seen == []


async def run_tool(defn: ToolDefinition, arguments: object) -> ToolResult:
    runtime = ToolRuntime()
    runtime.register(defn)
    return await run(runtime, defn.name, arguments)


# --------------------------------------------------------------------------- properties

_LEAF_ANNOTATIONS: list[Any] = [
    str,
    int,
    float,
    bool,
    type(None),
    Any,
    object,
    Literal["a", "b"],
    Literal[1, "x", None],
    Color,
    Level,
    list,
]
_FIELD_NAMES = st.sampled_from(["a", "b", "c", "path", "__proto__"])


@st.composite
def _attrs_classes(draw: st.DrawFn, inner: st.SearchStrategy[Any]) -> Any:
    fields = draw(
        st.lists(
            st.tuples(_FIELD_NAMES, inner, st.booleans()), max_size=3, unique_by=lambda f: f[0]
        )
    )
    attributes = {
        name: attrs.field(type=annotation, default=None if has_default else attrs.NOTHING)
        for name, annotation, has_default in fields
    }
    return attrs.make_class("Generated", attributes, kw_only=True, frozen=True)


def annotation_types(*, structurable: bool = False) -> st.SearchStrategy[Any]:
    """Supported annotations. ``structurable`` leaves out ``dict[str, T]`` with a typed ``T``,
    whose values the subset cannot constrain (any valid value might fail to structure)."""

    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        options = [
            inner.map(lambda t: list[t]),  # type: ignore[valid-type]
            inner.map(lambda t: tuple[t, ...]),  # type: ignore[valid-type]
            inner.map(lambda t: Optional[t]),  # noqa: UP045
            inner.map(lambda t: Annotated[t, "described"]),
            _attrs_classes(inner),
            st.just(dict[str, Any]),
        ]
        if not structurable:
            options.append(inner.map(lambda t: dict[str, t]))  # type: ignore[valid-type]
        return st.one_of(*options)

    return st.recursive(st.sampled_from(_LEAF_ANNOTATIONS), extend, max_leaves=5)


@st.composite
def signatures(draw: st.DrawFn, *, structurable: bool = False) -> list[tuple[str, Any, bool]]:
    """``(name, annotation, has_default)`` per parameter."""
    return draw(
        st.lists(
            st.tuples(_FIELD_NAMES, annotation_types(structurable=structurable), st.booleans()),
            max_size=4,
            unique_by=lambda p: p[0],
        )
    )


def function_with(
    signature: list[tuple[str, Any, bool]], received: list[dict[str, Any]] | None = None
) -> Any:
    """An ``async def`` with ``signature`` as its signature; it records its arguments."""

    async def generated(**kwargs: Any) -> None:
        """Generated."""
        if received is not None:
            received.append(kwargs)

    parameters = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=None if has_default else inspect.Parameter.empty,
            annotation=annotation,
        )
        for name, annotation, has_default in signature
    ]
    generated.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    generated.__annotations__ = {name: annotation for name, annotation, _ in signature}
    generated.__annotations__["return"] = type(None)
    return generated


def _check_required(annotation: Any, schema: Any) -> None:
    """Walk an annotation and its schema together, checking every attrs level's ``required``."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Annotated:
        _check_required(args[0], schema)
    elif origin is typing.Union:
        inner = next(a for a in args if a is not type(None))
        _check_required(inner, schema["oneOf"][0] if "oneOf" in schema else schema)
    elif origin in (list, tuple):
        _check_required(args[0], schema["items"])
    elif attrs.has(annotation):
        fields = attrs.fields(annotation)
        expected = [f.name for f in fields if f.default is attrs.NOTHING]
        assert schema.get("required", []) == expected
        assert ("required" in schema) == bool(expected)
        for f in fields:
            _check_required(f.type, schema["properties"][f.name])


@given(signature=signatures())
def test_h052_required_is_the_parameters_without_defaults(
    signature: list[tuple[str, Any, bool]],
) -> None:
    """H-052: at every level, ``required`` lists exactly the names without defaults."""
    defn = tool(function_with(signature))
    schema = params(defn)
    expected = [name for name, _, has_default in signature if not has_default]
    assert schema.get("required", []) == expected
    assert ("required" in schema) == bool(expected)
    assert list(schema["properties"]) == [name for name, _, _ in signature]
    for name, annotation, _ in signature:
        _check_required(annotation, schema["properties"][name])


@given(annotation=annotation_types())
def test_h053_derivation_is_total(annotation: Any) -> None:
    """H-053: every supported annotation derives a supported schema, as parameter and output."""

    async def f(x: Any) -> Any:
        """F."""

    f.__annotations__ = {"x": annotation, "return": annotation}
    defn = tool(f)
    assert_supported_json_schema(defn.parameters)
    assert_supported_json_schema(defn.output.schema)
    assert defn.output.schema == defn.parameters["properties"]["x"]


@given(data=st.data())
def test_h054_generated_arguments_run(data: st.DataObject) -> None:
    """H-054/H-009: arguments generated from a derived schema validate and structure."""
    signature = data.draw(signatures(structurable=True), label="signature")
    received: list[dict[str, Any]] = []
    defn = tool(function_with(signature, received))
    arguments = data.draw(valid_values(params(defn)), label="arguments")
    result = trio.run(execute, defn, arguments)
    assert not result.is_error, result
    assert len(received) == 1
    # Undeclared keys (the root is open) are validated but not passed on.
    assert set(received[0]) == set(arguments) & {name for name, _, _ in signature}


# ------------------------------------------------------ decision "Depth": deep return values


def _nested(depth: int, leaf: object) -> object:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@attrs.frozen
class Holder:
    items: list[Any]


async def test_h049_a_deep_value_too_deep_for_the_converter_is_invalid_tool_output() -> None:
    """H-049 (decision "Depth"): a returned object whose conversion to JSON would recurse
    5000 levels (attrs instances inside, so the converter must walk it) is
    ``INVALID_TOOL_OUTPUT`` saying so, not a bare recursion error from the body."""

    @tool
    async def deep_objects() -> list[Any]:
        """Return deep data."""
        return _nested(5000, Server(host="h"))  # type: ignore[return-value]

    @tool
    async def deep_holder() -> Holder:
        """Return deep data in an attrs class."""
        return Holder(items=[_nested(5000, Server(host="h"))])

    for defn, kind in ((deep_objects, "list"), (deep_holder, "Holder")):
        result = await execute(defn, {})
        assert result.error is not None
        assert result.error.info == ErrorInfo("ToolOutputError", "INVALID_TOOL_OUTPUT")
        assert result.error.message == (
            f'tool "{defn.name}" returned invalid output: the returned {kind} is nested too '
            "deeply to convert to JSON (Python's recursion limit)"
        )


async def test_h049_deep_plain_json_needs_no_converter() -> None:
    """H-049 (decision "Depth"): a plain JSON value 5000 deep (which the JSON boundary
    accepts) is taken as it is, frozen, without the converter's recursion: with a render
    that can present it, the call succeeds and carries the value."""
    seen: list[object] = []

    def render(args: JsonValue, value: JsonValue) -> list[TextContent]:
        seen.append(value)
        return [TextContent("deep")]

    @tool(render=render)
    async def deep_plain() -> dict[str, Any]:
        """Return deep data."""
        return {"a": _nested(5000, 1)}

    result = await execute(deep_plain, {})
    assert not result.is_error
    assert result.content == (TextContent("deep"),)
    assert type(result.value) is FrozenDict
    assert seen == [result.value]
    depth, node = 0, result.value["a"]
    while type(node) is tuple:
        depth, node = depth + 1, node[0]
    assert (depth, node) == (5000, 1)


async def test_j007_the_default_render_of_a_too_deep_value_says_so() -> None:
    """J-007 (decision "Depth"): the default render prints with ``json.dumps(indent=2)``,
    which cannot print a value 5000 deep: the call is ``INVALID_TOOL_OUTPUT`` with
    ``output.render failed:`` and a message that names the problem and the fix."""

    @tool
    async def deep_default() -> list[Any]:
        """Return deep data."""
        return _nested(5000, 1)  # type: ignore[return-value]

    result = await execute(deep_default, {})
    assert result.error is not None
    assert result.error.info == ErrorInfo("ToolOutputError", "INVALID_TOOL_OUTPUT")
    assert result.error.message == (
        'tool "deep_default" returned invalid output: output.render failed: the value is '
        "nested too deeply to render as indented JSON; pass render= to present it another way"
    )


# ------------------------------------------------------- compiled plans: same calls as before


@attrs.frozen
class Tag:
    name: str
    kind: Literal["a", "b"]


def _recording_tool(seen: list[tuple[object, ...]]) -> ToolDefinition:
    @tool
    async def f(
        tags: list[Tag],
        count: int,
        ratio: float,
        ctx: ToolRunContext,
        /,
        label: str = "none",
        maybe: int | None = None,
        *,
        flags: list[bool] = [],  # noqa: B006 - never mutated
        exact: bool = False,
    ) -> str:
        """Record what the body receives."""
        seen.append((tags, count, ratio, type(ctx).__name__, label, maybe, flags, exact))
        return "ok"

    return f


def _typed(value: object) -> object:
    """``value`` with the type of every part, so that ``1`` differs from ``1.0`` and a list
    from a tuple."""
    kind = type(value)
    if isinstance(value, list | tuple):
        return (kind.__name__, [_typed(x) for x in value])
    if attrs.has(kind):
        names = [f.name for f in attrs.fields(kind)]
        return (kind.__name__, [_typed(getattr(value, name)) for name in names])
    return (kind.__name__, value)


_TAG = st.fixed_dictionaries(
    {"name": st.text(max_size=3), "kind": st.sampled_from(["a", "b", "c"])}
)
_NEAR_ARGUMENTS = st.fixed_dictionaries(
    {},
    optional={
        "tags": st.one_of(st.lists(_TAG, max_size=3), st.integers()),
        "count": st.one_of(st.integers(), st.just(2.0), st.booleans()),
        # -0.0 is not lossless JSON: the boundary refuses it before any body (test_json).
        "ratio": st.one_of(
            st.floats(-10, 10).filter(lambda x: str(x) != "-0.0"), st.integers(-3, 3)
        ),
        "label": st.one_of(st.text(max_size=3), st.none()),
        "maybe": st.one_of(st.integers(), st.none(), st.text(max_size=1)),
        "flags": st.lists(st.booleans(), max_size=2),
        "exact": st.booleans(),
        "unknown": st.integers(),
    },
)


async def _a_run_context() -> ToolRunContext:
    """A real ``ToolRunContext``, taken from a call, to await a definition's ``execute``."""
    taken: list[ToolRunContext] = []

    @tool
    async def grab(ctx: ToolRunContext) -> None:
        """Take a context."""
        taken.append(ctx)

    await execute(grab, {})
    return taken[0]


@given(arguments=st.one_of(_NEAR_ARGUMENTS, st.lists(st.integers(), max_size=2), st.text()))
async def test_h009_plans_give_the_body_what_validation_and_the_converter_give(
    arguments: object,
) -> None:
    """H-009: a call whose plans all match skips validation and the converter; whether it
    does or not, the body gets the same objects, or the call the same error, as the
    validating ``execute`` (validation, then the converter for every parameter)."""
    fast: list[tuple[object, ...]] = []
    slow: list[tuple[object, ...]] = []
    result = await execute(_recording_tool(fast), arguments)
    reference = _recording_tool(slow)
    frozen = freeze_json(arguments)
    ctx = await _a_run_context()
    if result.is_error:
        with pytest.raises(ToolArgsError) as raised:
            await reference.execute(frozen, ctx)
        assert result.error is not None
        assert result.error.message == str(raised.value)
        assert fast == []
    else:
        await reference.execute(frozen, ctx)
        assert [_typed(list(x)) for x in fast] == [_typed(list(x)) for x in slow]


async def test_a_positional_parameter_with_a_default_is_filled_by_a_plan() -> None:
    """A positional-only parameter left out takes its default, and a later one still
    follows it, on the plans' path as on the converter's."""
    seen: list[object] = []

    @tool
    async def f(a: int = 1, b: list[int] = [], /) -> None:  # noqa: B006 - never mutated
        """F."""
        seen.append((a, b))

    assert not (await execute(f, {"b": [2]})).is_error
    assert seen == [(1, [2])]


async def test_h050_a_class_that_raises_while_built_fails_as_before() -> None:
    """H-050: a plan that gives up because the class's own code raised leaves the call to
    validation and the converter, whose message the model gets."""

    @tool
    async def f(p: Picky) -> str:
        """F."""
        return "ok"

    assert not (await execute(f, {"p": {"x": 1}})).is_error
    result = await execute(f, {"p": {"x": 13}})
    assert result.is_error
    assert result.error is not None
    assert result.error.message.startswith('invalid arguments: "p" could not be structured: ')


async def test_h009_a_valid_value_no_plan_takes_goes_to_the_converter_with_the_context() -> None:
    """H-009: ``2.0`` is a valid ``integer`` that no plan takes (the converter makes it
    ``2``): the call is validated, then structured by the converter, the context parameter
    filled too; awaiting the definition's own ``execute`` does the same."""
    seen: list[object] = []

    @tool
    async def f(n: int, ctx: ToolRunContext, /, *, tags: list[str] = []) -> None:  # noqa: B006
        """F."""
        seen.append((n, type(n), type(ctx).__name__, tags))

    assert not (await execute(f, {"n": 2.0})).is_error
    ctx = await _a_run_context()
    await f.execute(freeze_json({"n": 3, "tags": ["t"]}), ctx)
    assert seen == [(2, int, "ToolRunContext", []), (3, int, "ToolRunContext", ["t"])]


_KINDS = (
    inspect.Parameter.POSITIONAL_ONLY,
    inspect.Parameter.POSITIONAL_OR_KEYWORD,
    inspect.Parameter.KEYWORD_ONLY,
)


@st.composite
def call_signatures(draw: st.DrawFn) -> list[inspect.Parameter]:
    """Any valid mix of parameter kinds, defaults and (perhaps) a context parameter."""
    specs = draw(
        st.lists(
            st.tuples(
                _FIELD_NAMES,
                st.one_of(annotation_types(structurable=True), st.just(ToolRunContext)),
                st.booleans(),
                st.sampled_from(_KINDS),
            ),
            max_size=5,
            unique_by=lambda p: p[0],
        ).filter(lambda ps: sum(p[1] is ToolRunContext for p in ps) <= 1)
    )
    specs.sort(key=lambda p: p[3])  # Python's order of kinds
    parameters = []
    after_default = False
    for name, annotation, has_default, kind in specs:
        if kind is not inspect.Parameter.KEYWORD_ONLY:
            has_default = has_default or after_default  # none without one after one with
            after_default = has_default
        default = None if has_default else inspect.Parameter.empty
        parameters.append(inspect.Parameter(name, kind, default=default, annotation=annotation))
    return parameters


def _call_recording_tool(
    parameters: list[inspect.Parameter], calls: list[tuple[object, object]]
) -> ToolDefinition:
    async def generated(*args: Any, **kwargs: Any) -> None:
        """Record how the body is called."""
        calls.append((args, list(kwargs.items())))

    generated.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    generated.__annotations__ = {p.name: p.annotation for p in parameters}
    generated.__annotations__["return"] = type(None)
    return tool(generated)


def _shape(call: tuple[object, object]) -> object:
    """A recorded call with every part typed, and the (per-call) context as ``"ctx"``."""

    def typed(value: object) -> object:
        return "ctx" if isinstance(value, ToolRunContext) else _typed(value)

    args, kwargs = call
    assert isinstance(args, tuple)
    assert isinstance(kwargs, list)
    return ([typed(a) for a in args], [(k, typed(v)) for k, v in kwargs])


@given(data=st.data())
async def test_h009_a_fitted_call_is_the_converters_call(data: st.DataObject) -> None:
    """H-009: for any signature (positional-only, positional-or-keyword, keyword-only
    parameters, defaults, a context parameter), a call whose plans all match calls the body
    exactly as the converter's path does: the same values, of the same types, by position
    or by name alike, keywords in the same order, the same ones left out."""
    parameters = data.draw(call_signatures(), label="signature")
    fast: list[tuple[object, object]] = []
    slow: list[tuple[object, object]] = []
    defn = _call_recording_tool(parameters, fast)
    reference = _call_recording_tool(parameters, slow)
    schema = params(defn)
    arguments = data.draw(st.one_of(valid_values(schema), near_values(schema)), label="args")
    result = await execute(defn, arguments)
    ctx = await _a_run_context()
    if result.is_error:
        assert fast == []
        with pytest.raises(ToolArgsError) as raised:
            await reference.execute(freeze_json(arguments), ctx)
        assert result.error is not None
        assert result.error.message == str(raised.value)
    else:
        await reference.execute(freeze_json(arguments), ctx)
        assert [_shape(c) for c in fast] == [_shape(c) for c in slow]


async def test_a_positional_parameter_taking_any_value_is_passed_as_it_is_or_its_default() -> None:
    """An ``Any`` parameter needs no test: its frozen value as it is; left out, a
    positional-only one its default (the next one still follows), a keyword one nothing."""
    seen: list[object] = []

    @tool
    async def g(a: Any = None, b: object = 1, /, c: Any = "left out") -> None:
        """G."""
        seen.append((a, b, c))

    assert not (await execute(g, {"b": [2]})).is_error
    assert not (await execute(g, {"a": {"x": 1}, "c": 3})).is_error
    assert seen == [(None, (2,), "left out"), (freeze_json({"x": 1}), 1, 3)]

"""Code Mode's Python SDK (code-mode §4.3): ``render_python_sdk``.

The SDK is the text a model reads to write a ``run_code`` program: a short preamble, then
typed Python declarations of every tool (a ``Tools`` class with one ``async def`` per tool).
It is a pure function of the tools' names, descriptions and schemas, so an unchanged tool
set renders byte-identical text whatever order the tools were registered in.
"""

from __future__ import annotations

import json
import keyword
import re
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from ._errors import JsonSchemaError
from ._registry import RUN_CODE_NAME
from ._schema_check import assert_supported_json_schema

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._definition import ToolDefinition

__all__ = ["SDK_PREAMBLE", "render_python_sdk"]

#: The SDK's first line: how a program calls the tools and what it gets back.
SDK_PREAMBLE: Final = (
    "A `run_code` program is the body of an async Python function. Call a tool with "
    "`await tools.<name>(...)`, passing its arguments as keyword arguments or as one dict; "
    'call a tool whose name is not a Python identifier as `await tools["<name>"](...)`. '
    "A call returns the tool's output as plain JSON data (dict, list, str, int, float, bool "
    "or None) and raises `ToolCallError` when the tool fails. Run independent calls at the "
    "same time with `asyncio.gather(...)` after `import asyncio`. `print()` what you want to "
    "read back and `return` a JSON value."
)

_IMPORTS: Final = (
    "from typing import Any, Awaitable, Callable, Literal, NotRequired, TypedDict, overload"
)
_TOOL_CALL_ERROR: Final = "class ToolCallError(Exception):\n    tool_name: str"
# Blocks of the module are separated by two blank lines, entries of ``Tools`` by one.
_BLOCK_SEPARATOR: Final = "\n\n\n"
_ENTRY_SEPARATOR: Final = "\n\n"


def render_python_sdk(definitions: Iterable[ToolDefinition]) -> str:
    """Render the Python SDK that a ``run_code`` program is written against.

    The text is the preamble, a blank line, then code in a Markdown ``python`` fence, code
    that parses with :func:`ast.parse`: the ``typing`` imports, ``ToolCallError``, each
    tool's argument and output types, a ``Tools`` class with one entry per tool, and
    ``tools: Tools``. Tools appear in name order (by code point); ``run_code`` itself is
    left out. The function never raises for a schema: parameters outside the supported
    subset, or without an object root, are ``dict[str, Any]``, and whatever else cannot be
    expressed (including a node nested deeper than 32 levels) is ``Any``.

    Args:
        definitions: The tools to declare, in any order. Names are expected to be unique,
            as in a runtime's view; tools that share a name are rendered in the order given.

    Returns:
        The SDK text, ending with a newline. The same tools always give the same text.

    Example:
        >>> sdk = render_python_sdk([])
        >>> sdk.endswith("class Tools:\\n    pass\\n\\n\\ntools: Tools\\n```\\n")
        True
    """
    # sorted() is stable: tools sharing a name keep the order they were given in.
    tools = sorted(
        (definition for definition in definitions if definition.name != RUN_CODE_NAME),
        key=lambda definition: definition.name,
    )
    types = _TypeDeclarations(_NameClaimer())
    entries = [_render_tool(definition, types) for definition in tools]
    tools_class = _ENTRY_SEPARATOR.join(entries) if entries else "    pass"
    code = _BLOCK_SEPARATOR.join(
        [_IMPORTS, _TOOL_CALL_ERROR, *types.blocks, f"class Tools:\n{tools_class}", "tools: Tools"]
    )
    return f"{SDK_PREAMBLE}\n\n```python\n{code}\n```\n"


def _render_tool(definition: ToolDefinition, types: _TypeDeclarations) -> str:
    """Declare one tool's types (claiming its names in order); return its ``Tools`` entry."""
    name = definition.name
    base = types.names.claim(_camel(name, "Tool"))
    args_name = types.names.claim(f"{base}Args")
    fields = types.declare_args(args_name, definition.parameters)
    output_name = types.names.claim(f"{base}Output")
    types.declare_output(output_name, definition.output.schema)
    lines = _comment_lines(definition.description, "    ")
    if not _is_attribute_name(name):
        lines.append("    @overload")
        lines.append(
            f"    def __getitem__(self, name: Literal[{_python_string(name)}])"
            f" -> Callable[..., Awaitable[{output_name}]]: ..."
        )
    elif fields is None or any(key == "self" for key, _, _, _ in fields):
        # Keyword parameters can only spell keys that are Python names, and a key named
        # ``self`` would clash with the method's own first parameter: take one dict instead.
        lines.append(f"    async def {name}(self, args: {args_name}, /) -> {output_name}: ...")
    elif not fields:
        lines.append(f"    async def {name}(self) -> {output_name}: ...")
    else:
        parameters = ", ".join(_keyword_parameter(field) for field in fields)
        lines.append(f"    async def {name}(self, *, {parameters}) -> {output_name}: ...")
    return "\n".join(lines)


def _keyword_parameter(field: _Field) -> str:
    key, annotation, required, _ = field
    return f"{key}: {annotation}" if required else f"{key}: {annotation} = ..."


def _is_attribute_name(name: str) -> bool:
    """Whether ``tools.<name>`` reaches the tool (code-mode §4.2): not a keyword or dunder."""
    return _is_plain_identifier(name) and not (name.startswith("__") and name.endswith("__"))


# Types: names, annotations and TypedDicts.

#: The deepest schema node that gets its own annotation; the root is depth 0.
_MAX_DEPTH: Final = 32

_RUN: Final = re.compile(r"[A-Za-z0-9]+")
_SURROGATE: Final = re.compile(r"[\ud800-\udfff]")
# What a Python source text cannot hold at all, even in a comment: a NUL character and an
# unpaired surrogate (the source is encoded as UTF-8 before it is parsed).
_UNSPEAKABLE: Final = re.compile(r"[\x00\ud800-\udfff]")
_SCALAR_TYPES: Final = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
}

#: One key of a ``TypedDict``: ``(key, annotation, required, description)``; the annotation
#: is the plain one, without ``NotRequired[...]``.
_Field: TypeAlias = tuple[str, str, bool, str]


def _camel(text: str, fallback: str) -> str:
    """Join the ASCII letter-and-digit runs of ``text``, each with its first letter upper-cased.

    ``fallback`` is prefixed when the result is empty or starts with a digit, so the result is
    always a Python identifier: ``_camel("read_file", "Tool")`` is ``"ReadFile"``,
    ``_camel("--", "Tool")`` is ``"Tool"`` and ``_camel("1x", "Tool")`` is ``"Tool1x"``.
    """
    joined = "".join(run[0].upper() + run[1:] for run in _RUN.findall(text))
    if not joined or joined[0].isdigit():
        return fallback + joined
    return joined


def _is_plain_identifier(name: str) -> bool:
    """Whether ``name`` can be written as a Python name: an identifier and not a keyword."""
    return name.isidentifier() and not keyword.iskeyword(name)


def _python_string(text: str) -> str:
    """``text`` as a Python string literal: its JSON text (``ensure_ascii=False``).

    A JSON string literal is a Python one with the same value. An unpaired surrogate, which
    JSON leaves raw and Python source cannot hold, is written as its ``\\uXXXX`` escape, so
    the literal still has exactly ``text``'s value.
    """
    literal = json.dumps(text, ensure_ascii=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m[0]):04x}", literal)


def _comment_lines(description: str, indent: str) -> list[str]:
    """``description`` as Python comment lines, one per line of text, at ``indent``.

    A line is ``# <line>`` with its trailing whitespace removed, or ``#`` when blank; an
    empty description gives no line. A character no Python source can hold (NUL, an
    unpaired surrogate) is shown as U+FFFD, so the comments never stop the code parsing.
    """
    lines: list[str] = []
    for line in _UNSPEAKABLE.sub("\ufffd", description).splitlines():
        text = line.rstrip()
        lines.append(f"{indent}# {text}" if text else f"{indent}#")
    return lines


class _NameClaimer:
    """Hands out Python names from one set: a name already taken gets a numeric suffix.

    The suffix is the smallest of ``2``, ``3``, ... that is free. Names are only ever
    added, so the smallest free suffix of a wanted name never goes down: remembering where
    the last search ended keeps many claims of one name linear overall.
    """

    def __init__(self) -> None:
        self._taken: set[str] = set()
        self._next_suffix: dict[str, int] = {}

    def claim(self, wanted: str) -> str:
        """Claim ``wanted``, or ``wanted`` with the smallest free suffix; return the name."""
        name = wanted
        if name in self._taken:
            suffix = self._next_suffix.get(wanted, 2)
            while f"{wanted}{suffix}" in self._taken:
                suffix += 1
            self._next_suffix[wanted] = suffix + 1
            name = f"{wanted}{suffix}"
        self._taken.add(name)
        return name


def _is_supported(schema: object) -> bool:
    """Whether ``schema`` lies inside the supported JSON Schema subset (runtime.md §12.1)."""
    try:
        assert_supported_json_schema(schema)
    except JsonSchemaError:
        return False
    return True


def _literal_value(value: Any) -> str:
    """A JSON scalar as it is written inside ``Literal[...]``."""
    if type(value) is str:
        return _python_string(value)
    if type(value) is float:
        return repr(value)
    return str(value)  # an int, True, False or None


def _literal(values: Any) -> str:
    """``Literal[...]`` of a non-empty list of JSON scalars, or ``None`` when all are null."""
    if all(value is None for value in values):
        return "None"
    return f"Literal[{', '.join(_literal_value(value) for value in values)}]"


class _TypeDeclarations:
    """Annotations and the declarations they need, for the tools of one SDK, in order.

    Every declaration is one block of code, appended to :attr:`blocks` after the
    declarations it refers to (nested ones first). Names come from ``names``, claimed in
    the order the nodes are reached, an owner before its nested types.
    """

    def __init__(self, names: _NameClaimer) -> None:
        self.names = names
        #: The declaration blocks made so far, each without a trailing newline.
        self.blocks: list[str] = []

    def declare_args(self, name: str, parameters: Any) -> list[_Field] | None:
        """Declare ``<Base>Args`` as ``name`` (already claimed) from a tool's parameters.

        Parameters inside the supported subset with ``"type": "object"`` become a
        ``TypedDict`` (even with no keys); any others ``dict[str, Any]``.

        Returns:
            The keys when the arguments became a class-syntax ``TypedDict`` (an empty list
            for no keys), else ``None`` (a functional ``TypedDict`` or ``dict[str, Any]``).
        """
        if not _is_supported(parameters) or parameters.get("type") != "object":
            self.blocks.append(f"{name} = dict[str, Any]")
            return None
        return self._typed_dict(name, parameters, 0)

    def declare_output(self, name: str, schema: Any) -> None:
        """Declare ``<Base>Output`` as ``name`` (already claimed) from an output schema.

        An object schema with properties becomes a ``TypedDict`` of that name, anything
        else an alias of its annotation. ``Output`` only accepts schemas of the subset; a
        schema outside it (from an object that merely looks like a definition) is ``Any``.
        """
        if not _is_supported(schema):
            self.blocks.append(f"{name} = Any")
            return
        annotation = self.annotation(schema, name, 0, claimed=name)
        # ``name`` is claimed, so no other annotation can be exactly ``name``: equal means
        # the root itself was declared as that TypedDict.
        if annotation != name:
            self.blocks.append(f"{name} = {annotation}")

    def annotation(self, node: Any, hint: str, depth: int, *, claimed: str | None = None) -> str:
        """The annotation of schema ``node`` at ``depth``, declaring what it needs.

        ``node`` lies inside the supported subset. ``hint`` is the node's name hint: the
        name it claims if it becomes a ``TypedDict`` (``claimed`` instead when given), and
        the stem of its nested nodes' hints. Recursion stops at :data:`_MAX_DEPTH`.
        """
        if depth > _MAX_DEPTH:
            return "Any"
        if "oneOf" in node:
            # dict.fromkeys drops repeated annotations and keeps the branches' order.
            annotations = dict.fromkeys(
                self.annotation(branch, f"{hint}Option{i}", depth + 1)
                for i, branch in enumerate(node["oneOf"], 1)
            )
            return " | ".join(annotations)
        if "enum" in node:
            return _literal(node["enum"])
        if "const" in node:
            return _literal((node["const"],))
        kind = node.get("type")
        if kind == "array":
            if "items" not in node:
                return "list[Any]"
            return f"list[{self.annotation(node['items'], hint + 'Item', depth + 1)}]"
        if kind == "object":
            if not node.get("properties"):
                return "dict[str, Any]"
            name = self.names.claim(hint) if claimed is None else claimed
            self._typed_dict(name, node, depth)
            return name
        return _SCALAR_TYPES.get(kind, "Any")

    def _typed_dict(self, name: str, node: Any, depth: int) -> list[_Field] | None:
        """Declare ``name`` as a ``TypedDict`` of object ``node``; see :meth:`declare_args`."""
        required = set(node.get("required", ()))
        fields: list[_Field] = []
        for key, sub in node.get("properties", {}).items():
            annotation = self.annotation(sub, name + _camel(key, "Field"), depth + 1)
            fields.append((key, annotation, key in required, sub.get("description", "")))
        if all(_is_plain_identifier(key) for key, _, _, _ in fields):
            lines = [f"class {name}(TypedDict):"]
            for key, annotation, is_required, description in fields:
                lines.extend(_comment_lines(description, "    "))
                lines.append(f"    {key}: {_field_annotation(annotation, is_required)}")
            if not fields:
                lines.append("    pass")
            self.blocks.append("\n".join(lines))
            return fields
        items = ", ".join(
            f"{_python_string(key)}: {_field_annotation(annotation, is_required)}"
            for key, annotation, is_required, _ in fields
        )
        self.blocks.append(f'{name} = TypedDict("{name}", {{{items}}})')
        return None


def _field_annotation(annotation: str, required: bool) -> str:
    return annotation if required else f"NotRequired[{annotation}]"

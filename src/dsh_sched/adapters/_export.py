"""Checks shared by the three ``tools`` exports (integrations §2.4)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from dsh_tools import ToolSchema

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = ["checked_schemas", "strict_problem"]

# fullmatch, not "$": "$" would also accept a name ending in a newline.
_NAME: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_NAME_CHARS: Final = re.compile(r"[a-zA-Z0-9_,-]+")


def checked_schemas(
    provider: str, schemas: Iterable[ToolSchema], *, strict: bool
) -> list[ToolSchema]:
    """The schemas, each checked for export to ``provider``; the first failure raises.

    Raises:
        TypeError: an item is not a ``ToolSchema``.
        ValueError: a name outside the providers' charset, parameters that are not an
            object schema, or (with ``strict``) a schema the strict modes cannot take.
    """
    items = list(schemas)
    if not _plainly_valid(items):
        for schema in items:
            _check(provider, schema)  # raises at the first schema that fails
    if strict:
        for schema in items:
            problem = strict_problem(schema.parameters)
            if problem is not None:
                raise ValueError(
                    f'tool "{schema.name}" cannot be exported with strict=True: {problem}'
                )
    return items


def _plainly_valid(items: Sequence[object]) -> bool:
    # The usual case in one pass: ToolSchema items with dict parameters of type "object".
    # The names are then checked together: one character-class match over the names
    # joined by commas (a name holding a comma changes the comma count), and their lengths.
    # Anything else takes the per-schema path, which finds the first failure in order.
    names = []
    for schema in items:
        if type(schema) is not ToolSchema:
            return False
        parameters = schema.parameters
        if type(parameters) is not dict or parameters.get("type") != "object":
            return False
        names.append(schema.name)
    try:
        joined = ",".join(names)
    except TypeError:
        return False  # a name that is not a str
    lengths = list(map(len, names))
    return (
        _NAME_CHARS.fullmatch(joined) is not None
        and joined.count(",") == len(names) - 1
        and min(lengths) > 0
        and max(lengths) <= 64
    )


def _check(provider: str, schema: object) -> None:
    if type(schema) is not ToolSchema:
        raise TypeError(f"tools() expects ToolSchema items, got {type(schema).__name__}")
    name: object = schema.name  # a hand-built ToolSchema may hold anything
    if type(name) is not str or _NAME.fullmatch(name) is None:
        raise ValueError(
            f'tool "{name}" cannot be exported to {provider}: '
            "names must match ^[a-zA-Z0-9_-]{1,64}$"
        )
    parameters = schema.parameters
    if not isinstance(parameters, Mapping) or parameters.get("type") != "object":
        raise ValueError(
            f'tool "{name}" cannot be exported to {provider}: '
            'parameters must be a JSON Schema object with "type": "object"'
        )


def _escape(token: str) -> str:
    # RFC 6901: "~" and "/" inside a reference token are written "~0" and "~1".
    return token.replace("~", "~0").replace("/", "~1")


def strict_problem(root: Mapping[str, object]) -> str | None:
    """The first ``<pointer>: <problem>`` that strict mode would refuse, or ``None``.

    Nodes reachable through ``properties`` and ``items`` are visited in pre-order
    (properties in their order). A node with ``oneOf`` is itself the problem, so nothing
    below one is ever visited. Iterative, so a deep schema cannot exhaust the stack.
    """
    stack: list[tuple[str, object]] = [("#", root)]
    while stack:
        pointer, node = stack.pop()
        if not isinstance(node, Mapping):
            continue  # not a schema object: the runtime's own checks cover it
        if "oneOf" in node:
            return f'{pointer}: "oneOf" is not supported'
        properties = node.get("properties")
        if node.get("type") == "object":
            if node.get("additionalProperties") is not False:
                return f'{pointer}: "additionalProperties" must be false'
            required = node.get("required")
            listed = required if isinstance(required, list | tuple) else ()
            for key in properties if isinstance(properties, Mapping) else ():
                if key not in listed:
                    return f'{pointer}: property "{key}" must be listed in "required"'
        children: list[tuple[str, object]] = []
        if isinstance(properties, Mapping):
            children.extend(
                (f"{pointer}/properties/{_escape(key)}", child) for key, child in properties.items()
            )
        if "items" in node:
            children.append((f"{pointer}/items", node["items"]))
        stack.extend(reversed(children))
    return None

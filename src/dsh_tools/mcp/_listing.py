"""How a server's tool listing becomes registrations: pure rules, no I/O.

Names, schema checks, classification from annotations (integrations §4.2 and §4.3), and the
difference between two listings that a refresh applies (§4.5).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from dsh_tools import FrozenDict, JsonSchemaError, assert_supported_json_schema, freeze_json

__all__ = ["Listed", "Plan", "diff", "listed", "plan"]

_NOT_NAME_CHAR = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64


@attrs.frozen(kw_only=True)
class Listed:
    """One tool of a listing, as plain data.

    Two listings of a tool are the same when these fields are equal.
    """

    mcp_name: str
    description: str
    input_schema: object
    annotations: FrozenDict | None


def listed(tool: Any) -> Listed:
    """Read an SDK ``Tool`` into a :class:`Listed` (annotations as their wire JSON)."""
    annotations = getattr(tool, "annotations", None)
    wire = None
    if annotations is not None:
        frozen = freeze_json(annotations.model_dump(mode="json", by_alias=True, exclude_none=True))
        assert isinstance(frozen, FrozenDict)
        wire = frozen
    return Listed(
        mcp_name=tool.name,
        description=tool.description or "",
        input_schema=tool.input_schema,
        annotations=wire,
    )


@attrs.frozen(kw_only=True)
class Plan:
    """How one listed tool registers, or why it does not.

    ``skip`` is the reason when it does not; the other fields then mean nothing.
    """

    name: str
    validated: bool = False
    destructive: bool = True
    parallel: bool = False
    skip: str | None = None


def registered_name(prefix: str, mcp_name: str) -> str:
    """``prefix`` + the MCP name with every character outside ``[A-Za-z0-9_-]`` made ``_``."""
    return prefix + _NOT_NAME_CHAR.sub("_", mcp_name)


def _schema_problem(schema: object) -> str | None:
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return 'inputSchema must be a JSON Schema object with "type": "object"'
    try:
        freeze_json(schema)
    except TypeError:
        return "inputSchema is not lossless JSON"
    return None


def _supported(schema: object) -> bool:
    try:
        assert_supported_json_schema(schema)
    except JsonSchemaError:
        return False
    return True


def plan(tool: Listed, *, prefix: str, trusted: bool, taken: Mapping[str, str]) -> Plan:
    """Plan one tool: the schema rules, then the name rules (integrations §4.2).

    Args:
        tool: The listed tool.
        prefix: The source's name prefix.
        trusted: Whether the server's annotations are believed (§4.3).
        taken: Registered name → MCP name, for the tools of this source already planned.
    """
    name = registered_name(prefix, tool.mcp_name)
    problem = _schema_problem(tool.input_schema)
    if problem is None and not 1 <= len(name) <= _MAX_NAME:
        problem = f'registered name "{name}" must have 1 to {_MAX_NAME} characters'
    if problem is None and name in taken:
        problem = f'registered name "{name}" is already used by MCP tool "{taken[name]}"'
    if problem is not None:
        return Plan(name=name, skip=problem)
    hints = tool.annotations or FrozenDict()
    read_only = hints.get("readOnlyHint") is True
    return Plan(
        name=name,
        validated=_supported(tool.input_schema),
        # Hints of an untrusted server decide nothing: every tool may change its environment.
        destructive=not trusted or (not read_only and hints.get("destructiveHint") is not False),
        parallel=trusted and read_only,
    )


def diff(
    registered: Mapping[str, Listed], listing: Iterable[Listed]
) -> tuple[list[str], list[Listed], list[Listed]]:
    """Compare a new listing with the registered tools, by MCP name.

    Returns:
        The MCP names removed (registered order), the tools changed (new listing order) and
        the tools not registered yet (new listing order; skipped ones come back here).
    """
    seen: dict[str, Listed] = {}
    for tool in listing:
        seen.setdefault(tool.mcp_name, tool)
    removed = [name for name in registered if name not in seen]
    changed = [t for n, t in seen.items() if n in registered and registered[n] != t]
    added = [t for n, t in seen.items() if n not in registered]
    return removed, changed, added

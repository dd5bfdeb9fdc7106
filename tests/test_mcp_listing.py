"""The pure rules of ``dsh_tools.mcp``: names, schema checks, classification, listing
differences and the block mapping (integrations §4.2–§4.4), without a server or an event loop.

Some rules cannot be reached through the mcp SDK 2.x: it refuses a listing whose
``inputSchema`` is not rooted in an object before dsh-trio sees it, and content blocks of
an unknown type. They are pinned here, on the functions the source uses.
"""

from __future__ import annotations

import importlib
import sys
from types import SimpleNamespace

import pytest

from dsh_tools import FrozenDict, ImageContent, TextContent
from dsh_tools.mcp._blocks import error_message, map_blocks, render
from dsh_tools.mcp._listing import Listed, diff, plan, registered_name


def listed(name: str, schema: object = None, **hints: bool) -> Listed:
    return Listed(
        mcp_name=name,
        description="",
        input_schema={"type": "object"} if schema is None else schema,
        annotations=FrozenDict(hints) if hints else None,
    )


def test_x001_importing_without_mcp_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """X-001: the ImportError text, in this process."""
    for name in [m for m in sys.modules if m == "dsh_tools.mcp" or m.startswith("dsh_tools.mcp.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)
    with pytest.raises(ImportError) as info:
        importlib.import_module("dsh_tools.mcp")
    assert str(info.value) == (
        "dsh_tools.mcp requires the mcp package (mcp>=2,<3): pip install 'dsh-trio[mcp]'"
    )


def test_x005_x006_registered_names() -> None:
    """X-005, X-006: unsafe characters become "_"; names must have 1 to 64 characters."""
    assert registered_name("srv__", "get.weather") == "srv__get_weather"
    assert registered_name("", "é a/b-c_d") == "__a_b-c_d"
    assert plan(listed(""), prefix="", trusted=False, taken={}).skip == (
        'registered name "" must have 1 to 64 characters'
    )
    assert plan(listed("x" * 64), prefix="", trusted=False, taken={}).skip is None
    assert plan(listed("x" * 60), prefix="abcde", trusted=False, taken={}).skip == (
        f'registered name "abcde{"x" * 60}" must have 1 to 64 characters'
    )
    assert plan(listed("a_b"), prefix="", trusted=False, taken={"a_b": "a.b"}).skip == (
        'registered name "a_b" is already used by MCP tool "a.b"'
    )


def test_x008_schema_rules_come_before_name_rules() -> None:
    """X-008: a schema not rooted in an object is skipped, before any name rule."""
    text = 'inputSchema must be a JSON Schema object with "type": "object"'
    schemas: list[object] = [{"type": "array"}, [], {"properties": {}}]
    for schema in schemas:
        assert plan(listed("x" * 80, schema), prefix="", trusted=False, taken={}).skip == text
    weird = {"type": "object", "properties": {"v": {"anyOf": [{"type": "integer"}]}}}
    assert not plan(listed("w", weird), prefix="", trusted=False, taken={}).validated
    assert plan(listed("w"), prefix="", trusted=False, taken={}).validated


def test_x013_classification_by_trust_and_hints() -> None:
    """X-013 (I§4.3): only a trusted server's hints count; the defaults are the spec's."""
    cases = [
        ({}, False, (False, True)),
        ({"readOnlyHint": True}, False, (False, True)),
        ({"readOnlyHint": True}, True, (True, False)),
        ({}, True, (False, True)),
        ({"destructiveHint": False}, True, (False, False)),
        ({"destructiveHint": True, "readOnlyHint": True}, True, (True, False)),
        ({"idempotentHint": True, "openWorldHint": False}, True, (False, True)),
    ]
    for hints, trusted, expected in cases:
        p = plan(listed("t", **hints), prefix="", trusted=trusted, taken={})
        assert (p.parallel, p.destructive) == expected, (hints, trusted)


def test_x019_diff_orders_removed_changed_and_new() -> None:
    """X-019 (I§4.5): removed in registered order; changed and new in the new listing order."""
    registered = {"a": listed("a"), "b": listed("b"), "c": listed("c")}
    b_changed = listed("b", {"type": "object", "properties": {}})
    new = [listed("d"), listed("c", readOnlyHint=True), listed("a"), b_changed]
    removed, changed, added = diff(registered, new)
    assert removed == []
    assert [t.mcp_name for t in changed] == ["c", "b"]
    assert [t.mcp_name for t in added] == ["d"]
    removed, changed, added = diff(registered, [listed("b"), listed("b", readOnlyHint=True)])
    assert (removed, changed, added) == (["a", "c"], [], [])


def test_x010_block_mapping_and_error_text() -> None:
    """X-010, X-011 (I§4.4): blocks the SDK would refuse are still described, not dropped."""
    blocks = map_blocks([SimpleNamespace(type="video"), SimpleNamespace(type="text", text="t")])
    assert blocks == (TextContent("[video content omitted]"), TextContent("t"))
    assert error_message((), "x") == 'MCP tool "x" reported an error without text'
    assert error_message((ImageContent("AA", "image/png"),), "x") == "[image content]"
    assert render({}, {"content": [], "structured_content": None}) == []


def test_the_public_surface_is_integrations_section_1() -> None:
    import dsh_tools.mcp

    assert sorted(dsh_tools.mcp.__all__) == sorted(
        ["open_mcp_source", "McpToolSource", "McpTool", "McpToolError", "McpProtocolError",
         "McpConnectionError", "MCP_TOOL_ERROR", "MCP_PROTOCOL_ERROR", "MCP_CONNECTION_LOST"]
    )  # fmt: skip
    for name in dsh_tools.mcp.__all__:
        value = getattr(dsh_tools.mcp, name)
        if not isinstance(value, str):
            assert value.__doc__, name
            assert value.__module__.startswith("dsh_tools.mcp._")
    for name in ("refresh", "tools", "skipped", "connected", "closed", "protocol_version"):
        assert getattr(dsh_tools.mcp.McpToolSource, name).__doc__, name

"""A success from a tool's value (``_success``): the default renderer's blocks need no check."""

from __future__ import annotations

from typing import Any

from hypothesis import given

from dsh_tools import TextContent, ToolCall, ToolRuntime, tool
from dsh_tools._success import _checked_blocks, default_render
from tests.strategies import frozen_json_values


@given(frozen_json_values())
def test_the_default_renderer_writes_only_blocks_the_checks_pass(value: Any) -> None:
    # build_success takes default_render's list as it is, skipping the sequence and
    # lossless checks a custom renderer's blocks go through: they would pass, unchanged.
    blocks = default_render(None, value)
    assert all(type(block) is TextContent for block in blocks)
    assert _checked_blocks("t", blocks) == tuple(blocks)


async def test_a_tool_without_render_gets_the_default_renderers_blocks() -> None:
    @tool(name="echo")
    async def echo(text: str) -> str:
        """Return ``text``."""
        return text

    runtime = ToolRuntime()
    runtime.register(echo)
    result = await runtime.execute(
        ToolCall(call_id="c1", name="echo", arguments={"text": "é 🙂 ok"})
    )
    assert not result.is_error
    assert result.content == (TextContent("é 🙂 ok"),)
    assert result.value == "é 🙂 ok"

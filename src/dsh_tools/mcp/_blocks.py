"""From an MCP ``tools/call`` result to a dsh-trio value and its content blocks.

Pure functions over the SDK's result objects (read by attribute, so no SDK type is needed
here): the block mapping of integrations §4.4, the error text, and the ``Output`` every
MCP tool declares.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from dsh_tools import ContentBlock, ImageContent, JsonValue, Output, TextContent, freeze_json

__all__ = ["VALUE_SCHEMA", "error_message", "map_blocks", "output", "render", "success_value"]

#: The schema of an MCP tool's value: the mapped content and the structured content.
VALUE_SCHEMA: Final = freeze_json(
    {
        "type": "object",
        "properties": {"content": {"type": "array"}, "structured_content": {}},
        "required": ["content", "structured_content"],
        "additionalProperties": False,
    }
)


def _map_block(block: object) -> ContentBlock:
    kind = getattr(block, "type", None)
    if kind == "text":
        return TextContent(str(getattr(block, "text", "")))
    if kind == "image":
        return ImageContent(str(getattr(block, "data", "")), str(getattr(block, "mime_type", "")))
    if kind == "audio":
        return TextContent(f"[audio omitted: {getattr(block, 'mime_type', '')}]")
    if kind == "resource_link":
        return TextContent(f"[resource link: {getattr(block, 'uri', '')}]")
    if kind == "resource":
        resource = getattr(block, "resource", None)
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return TextContent(text)
        return TextContent(f"[resource omitted: {getattr(resource, 'uri', '')}]")
    return TextContent(f"[{kind} content omitted]")


def map_blocks(content: Iterable[object]) -> tuple[ContentBlock, ...]:
    """Map each MCP content block to a dsh-trio block (text and images kept, others described)."""
    return tuple(_map_block(block) for block in content)


def error_message(blocks: Sequence[ContentBlock], mcp_name: str) -> str:
    """The message of an ``isError`` result: its texts, one per line, other blocks named."""
    if not blocks:
        return f'MCP tool "{mcp_name}" reported an error without text'
    return "\n".join(
        b.text if isinstance(b, TextContent) else f"[{b.type} content]" for b in blocks
    )


def success_value(blocks: Sequence[ContentBlock], structured: object) -> dict[str, Any]:
    """The value of a successful call: the blocks' JSON forms and the structured content."""
    return {"content": [b.to_json() for b in blocks], "structured_content": structured}


def render(args: JsonValue, value: JsonValue) -> list[ContentBlock]:
    """Turn a value made by :func:`success_value` back into blocks.

    With no content and a structured value, the model sees that value as indented JSON.
    """
    assert isinstance(value, Mapping)  # the runtime checked it against VALUE_SCHEMA
    blocks: list[ContentBlock] = []
    for item in value["content"]:
        if item["type"] == "image":
            blocks.append(ImageContent(item["data"], item["mime_type"]))
        else:
            blocks.append(TextContent(item["text"]))
    structured = value["structured_content"]
    if not blocks and structured is not None:
        blocks.append(TextContent(json.dumps(structured, ensure_ascii=False, indent=2)))
    return blocks


def output() -> Output:
    """The ``Output`` of every MCP tool."""
    return Output(schema=VALUE_SCHEMA, render=render)

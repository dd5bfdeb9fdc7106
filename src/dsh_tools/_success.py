"""A success from a tool's raw value: the output checks of runtime.md §7.6."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from ._content import ImageContent, TextContent, text_block
from ._definition import close_awaitable
from ._errors import ToolOutputError, normalize_message
from ._json import freeze_json
from ._results import blocks_lossless, sealed_result

if TYPE_CHECKING:
    from ._calls import ExecState, ToolExecution
    from ._content import ContentBlock
    from ._definition import ToolDefinition
    from ._json import JsonValue
    from ._results import ToolResult

__all__ = ["RESULT_NOT_LOSSLESS", "as_blocks", "build_success", "default_render"]

RESULT_NOT_LOSSLESS: Final = "tool result must be losslessly JSON-serializable"


def build_success(
    defn: ToolDefinition, execution: ToolExecution, state: ExecState, value: object
) -> ToolResult:
    """Build a success from a raw value (runtime.md §7.6).

    Raises:
        ToolOutputError: at the first failing step.
    """
    name = execution.name
    try:
        frozen = freeze_json(value)
    except TypeError:
        raise ToolOutputError(name, ["value is not lossless JSON"]) from None
    output = defn.output
    violations = output._validator.validate_frozen(frozen, "value")
    if violations:
        raise ToolOutputError(name, violations)
    arguments = execution.arguments
    render = output.render
    try:
        blocks = render(arguments, frozen)
    except Exception as exc:
        raise ToolOutputError(name, [f"output.render failed: {normalize_message(exc)}"]) from exc
    # The default renderer's blocks are text blocks of lossless strings: nothing to check.
    content = tuple(blocks) if render is default_render else _checked_blocks(name, blocks)
    meta = None
    presentation_meta = output.presentation_meta
    if presentation_meta is not None and execution.parent is None:
        try:
            raw_meta = presentation_meta(arguments, frozen)
        except Exception as exc:
            raise ToolOutputError(
                name, [f"output.presentation_meta failed: {normalize_message(exc)}"]
            ) from exc
        if raw_meta is not None:
            try:
                meta = freeze_json(raw_meta)
            except TypeError:
                close_awaitable(raw_meta)
                raise ToolOutputError(
                    name, ["output.presentation_meta returned non-lossless JSON"]
                ) from None
    result = sealed_result(False, content, frozen, None, meta, (), state.concluded)
    # Every string of this result is checked above (its content) or frozen (value, meta):
    # stage 4 need not check this very object again.
    state.lossless = result
    return result


def _checked_blocks(name: str, blocks: object) -> tuple[Any, ...]:
    content = as_blocks(blocks)
    if content is None:
        close_awaitable(blocks)
        raise ToolOutputError(
            name,
            [
                f"output.render returned {type(blocks).__name__}; "
                "expected a sequence of content blocks"
            ],
        )
    if not blocks_lossless(content):
        raise ToolOutputError(name, ["output.render returned non-lossless JSON"])
    return content


_JSON_CONSTANTS: Final = {None: "null", True: "true", False: "false"}


def default_render(args: JsonValue, value: JsonValue) -> list[ContentBlock]:
    """``@tool``'s renderer when none is given: a text block of the value, a ``str`` as it
    is, anything else as its JSON text (``indent=2``). Its blocks hold only lossless
    strings (the frozen value's own, or JSON text written from it)."""
    kind = type(value)
    if kind is str:
        return [text_block(value)]
    # A scalar prints the same with or without indent=, but indent= makes json.dumps take its
    # pure-Python encoder (3 µs for an int): write the scalar's JSON text directly, as json's
    # own encoder does (a frozen float is finite, so its repr is its JSON text).
    if kind is int or kind is float:
        return [text_block(repr(value))]
    if kind is bool or value is None:
        return [text_block(_JSON_CONSTANTS[value])]
    try:
        return [text_block(json.dumps(value, ensure_ascii=False, indent=2))]
    except RecursionError:
        # json.dumps recurses once per level; the value itself is valid (it was frozen and
        # validated iteratively), it is only too deep to print this way.
        raise ValueError(
            "the value is nested too deeply to render as indented JSON; "
            "pass render= to present it another way"
        ) from None


def as_blocks(blocks: object) -> tuple[Any, ...] | None:
    """``blocks`` as a tuple of content blocks, or ``None`` if it is not a list/tuple of them."""
    kind = type(blocks)
    if kind is tuple:
        content: tuple[Any, ...] = blocks  # type: ignore[assignment]
    elif kind is list:
        content = tuple(blocks)  # type: ignore[arg-type]
    else:
        return None
    for block in content:
        if type(block) is not TextContent and type(block) is not ImageContent:
            return None
    return content

"""A success from a tool's raw value: the output checks of runtime.md §7.6."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from ._content import ImageContent, TextContent
from ._definition import close_awaitable
from ._errors import ToolOutputError, normalize_message
from ._json import freeze_json
from ._results import ToolResult, blocks_lossless

if TYPE_CHECKING:
    from ._calls import ExecState, ToolExecution
    from ._definition import ToolDefinition

__all__ = ["RESULT_NOT_LOSSLESS", "as_blocks", "build_success"]

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
    try:
        blocks = output.render(arguments, frozen)
    except Exception as exc:
        raise ToolOutputError(name, [f"output.render failed: {normalize_message(exc)}"]) from exc
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
    result = ToolResult._success(content, frozen, meta, state.concluded)
    # Every string of this result is checked above (its content) or frozen (value, meta):
    # stage 4 need not check this very object again.
    state.lossless = result
    return result


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

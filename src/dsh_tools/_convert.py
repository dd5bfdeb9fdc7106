"""The package's one cattrs converter: the durable JSON form of results and messages.

Structuring is strict: no coercion (``"yes"`` is not a bool, ``5`` is not a str), unknown keys
are rejected, and every failure becomes ``ValueError("invalid tool result JSON: <detail>")``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, TypeVar

import cattrs
from cattrs.gen import make_dict_structure_fn, override

from ._content import ContentBlock, ImageContent, TextContent, UserMessage
from ._json import FrozenDict, JsonValue, freeze_json
from ._results import ErrorInfo, ToolError, ToolResult

__all__ = ["converter", "structure_message", "structure_result", "unstructure_result"]

T = TypeVar("T")

#: The package converter. Other modules (``@tool``) register their hooks on it too.
converter: Final = cattrs.Converter(forbid_extra_keys=True)


def _strict(kind: type[T]) -> Any:
    def structure(value: object, _: object) -> T:
        if type(value) is not kind:
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    return structure


converter.register_structure_hook(str, _strict(str))
converter.register_structure_hook(bool, _strict(bool))


def _structure_json(value: object, _: object) -> JsonValue:
    return freeze_json(value)


def _structure_block(value: object, _: object) -> ContentBlock:
    if not isinstance(value, Mapping):
        raise TypeError(f"content block must be an object, got {type(value).__name__}")
    kind = value.get("type")
    if kind == "text":
        _exact_keys(value, {"type", "text"}, {"type", "text"})
        return TextContent(converter.structure(value["text"], str))
    if kind == "image":
        keys = {"type", "data", "mime_type"}
        _exact_keys(value, keys, keys)
        return ImageContent(
            converter.structure(value["data"], str), converter.structure(value["mime_type"], str)
        )
    raise ValueError(f"unknown content block type {kind!r}")


def _exact_keys(value: Mapping[str, Any], allowed: set[str], required: set[str]) -> None:
    extra = [k for k in value if k not in allowed]
    if extra:
        raise ValueError(f"unknown keys {sorted(map(str, extra))}")
    missing = sorted(required.difference(value))
    if missing:
        raise ValueError(f"missing keys {missing}")


def _structure_message(value: object, _: object) -> UserMessage:
    if not isinstance(value, Mapping):
        raise TypeError(f"message must be an object, got {type(value).__name__}")
    keys = {"id", "role", "content", "source"}
    _exact_keys(value, keys, keys)
    if value["role"] != "user":
        raise ValueError(f'message role must be "user", got {value["role"]!r}')
    content = value["content"]
    if not isinstance(content, list | tuple):
        raise TypeError(f"message content must be an array, got {type(content).__name__}")
    source = freeze_json(value["source"])
    if type(source) is not FrozenDict:
        raise TypeError("message source must be an object")
    return UserMessage(
        id=converter.structure(value["id"], str),
        content=tuple(_structure_block(b, ContentBlock) for b in content),
        source=source,
    )


def _structure_blocks(value: object, _: object) -> tuple[ContentBlock, ...]:
    if not isinstance(value, list | tuple):
        raise TypeError(f"content must be an array, got {type(value).__name__}")
    return tuple(_structure_block(b, ContentBlock) for b in value)


def _structure_messages(value: object, _: object) -> tuple[UserMessage, ...]:
    if not isinstance(value, list | tuple):
        raise TypeError(f"additional_contexts must be an array, got {type(value).__name__}")
    return tuple(_structure_message(m, UserMessage) for m in value)


converter.register_structure_hook(TextContent | ImageContent, _structure_block)
converter.register_structure_hook(UserMessage, _structure_message)
converter.register_structure_hook(ErrorInfo, make_dict_structure_fn(ErrorInfo, converter))
converter.register_structure_hook(ToolError, make_dict_structure_fn(ToolError, converter))

_structure_tool_result = make_dict_structure_fn(
    ToolResult,
    converter,
    _cattrs_forbid_extra_keys=True,
    content=override(struct_hook=_structure_blocks),
    value=override(omit=True),
    meta=override(struct_hook=_structure_json),
    additional_contexts=override(struct_hook=_structure_messages),
)
converter.register_structure_hook(ToolResult, _structure_tool_result)


def _unstructure_message(message: UserMessage) -> dict[str, Any]:
    return message.to_json()


def _unstructure_error(error: ToolError) -> dict[str, Any]:
    out: dict[str, Any] = {"message": error.message}
    if error.info is not None:
        out["info"] = {"name": error.info.name, "code": error.info.code}
    return out


def unstructure_result(result: ToolResult) -> dict[str, Any]:
    """Return the durable JSON form of ``result`` (runtime.md §2.5)."""
    out: dict[str, Any] = {
        "is_error": result.is_error,
        "content": [block.to_json() for block in result.content],
    }
    if result.error is not None:
        out["error"] = _unstructure_error(result.error)
    if result.meta is not None:
        out["meta"] = result.meta
    if result.additional_contexts:
        out["additional_contexts"] = [m.to_json() for m in result.additional_contexts]
    if result.concludes_turn:
        out["concludes_turn"] = True
    return out


converter.register_unstructure_hook(TextContent, TextContent.to_json)
converter.register_unstructure_hook(ImageContent, ImageContent.to_json)
converter.register_unstructure_hook(UserMessage, _unstructure_message)
converter.register_unstructure_hook(ToolError, _unstructure_error)
converter.register_unstructure_hook(ToolResult, unstructure_result)


def structure_result(data: object) -> ToolResult:
    """Structure a ``ToolResult`` from its durable JSON form.

    Raises:
        ValueError: ``invalid tool result JSON: <detail>``, chained from the cause.
    """
    if not isinstance(data, Mapping):
        raise ValueError(f"invalid tool result JSON: expected an object, got {type(data).__name__}")
    try:
        return converter.structure(data, ToolResult)
    except Exception as exc:
        raise ValueError(f"invalid tool result JSON: {_detail(exc)}") from exc


def structure_message(data: object) -> UserMessage:
    """Structure a ``UserMessage`` from its JSON form.

    Raises:
        ValueError: ``invalid user message JSON: <detail>``, chained from the cause.
    """
    try:
        return converter.structure(data, UserMessage)
    except Exception as exc:
        raise ValueError(f"invalid user message JSON: {_detail(exc)}") from exc


def _detail(exc: BaseException) -> str:
    if isinstance(exc, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(exc, format_exception=_format_leaf))
    return _format_leaf(exc, None)


def _format_leaf(exc: BaseException, _: object) -> str:
    # Our hooks raise messages that already say what is wrong; keep them (cattrs' default
    # formatter would replace them with a generic "invalid value for type").
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        return f"unknown keys {sorted(exc.extra_fields)}"
    return str(exc) or type(exc).__name__

"""The package's one cattrs converter: the durable JSON form of results and messages.

Structuring is strict: no coercion (``"yes"`` is not a bool, ``5`` is not a str), unknown keys
are rejected, and every failure becomes ``ValueError("invalid tool result JSON: <detail>")``.
"""

from __future__ import annotations

import json
import re
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


class _Invalid(ValueError):
    """Internal: a structuring problem already worded for the user (JSON terms only)."""


def json_kind(value: object) -> str:
    """What ``value`` is, in JSON terms: ``a string``, ``an array``, ``null``, ...

    Messages about the durable form describe the data as JSON; anything else (a Python
    object that JSON cannot hold) is ``a non-JSON value``, never its class or repr.
    """
    t = type(value)
    if value is None:
        return "null"
    if t is bool:
        return "a boolean"
    if t is int or t is float:
        return "a number"
    if t is str:
        return "a string"
    if t is list or t is tuple:
        return "an array"
    if t is dict or t is FrozenDict:
        return "an object"
    return "a non-JSON value"


def _quoted(text: object) -> str:
    # ASCII-escaped JSON text: safe to print whatever the string holds.
    return json.dumps(text) if type(text) is str else json_kind(text)


def _keys_text(keys: Any) -> str:
    """``["a", "b"]`` for string keys (sorted, as JSON)."""
    return "[" + ", ".join(json.dumps(k) for k in sorted(keys)) + "]"


def _unknown_keys(keys: Any) -> str:
    """``unknown keys ["a"]``; a key that is not a string is counted, never shown."""
    names = [k for k in keys if type(k) is str]
    others = len(keys) - len(names)
    parts = [f"unknown keys {_keys_text(names)}"] if names else []
    if others == 1:
        parts.append("a key that is not a string")
    elif others:
        parts.append(f"{others} keys that are not strings")
    return " and ".join(parts)


_KIND_NAMES: Final = {str: "a string", bool: "a boolean"}


def _strict(kind: type[T]) -> Any:
    expected = _KIND_NAMES[kind]

    def structure(value: object, _: object) -> T:
        if type(value) is not kind:
            raise _Invalid(f"expected {expected}, got {json_kind(value)}")
        return value

    return structure


converter.register_structure_hook(str, _strict(str))
converter.register_structure_hook(bool, _strict(bool))


def _scalar_list(kind: type) -> Any:
    # A frozen array of exactly that scalar (what validated arguments hold) becomes a list
    # at once; anything else takes the converter's own hook, with its messages.
    general = converter.get_structure_hook(list[kind])  # type: ignore[valid-type]

    def structure(value: object, annotation: object) -> list[Any]:
        if type(value) is tuple and all(type(x) is kind for x in value):
            return list(value)
        return general(value, annotation)  # type: ignore[no-any-return]

    return structure


def _is(annotation: object) -> Any:
    return lambda candidate: candidate == annotation


for _kind in (str, bool):
    converter.register_structure_hook_func(_is(list[_kind]), _scalar_list(_kind))  # type: ignore[valid-type]

# freeze_json names the Python type it refused ("unsupported type mod.Class"); the durable
# form speaks JSON, so that reason is reworded.
_UNSUPPORTED: Final = re.compile(r"unsupported type \S+")


def _structure_json(value: object, _: object) -> JsonValue:
    try:
        return freeze_json(value)
    except TypeError as exc:
        raise _Invalid(_UNSUPPORTED.sub("a non-JSON value", str(exc))) from exc


def _structure_block(value: object, _: object) -> ContentBlock:
    if not isinstance(value, Mapping):
        raise _Invalid(f"content block must be an object, got {json_kind(value)}")
    if "type" not in value:
        _exact_keys(value, {"type", "text", "data", "mime_type"}, set())
        raise _Invalid('content block is missing "type"')
    kind = value["type"]
    if kind == "text":
        _exact_keys(value, {"type", "text"}, {"type", "text"})
        return TextContent(converter.structure(value["text"], str))
    if kind == "image":
        keys = {"type", "data", "mime_type"}
        _exact_keys(value, keys, keys)
        return ImageContent(
            converter.structure(value["data"], str), converter.structure(value["mime_type"], str)
        )
    if type(kind) is not str:
        raise _Invalid(f'content block "type" must be a string, got {json_kind(kind)}')
    raise _Invalid(f"unknown content block type {_quoted(kind)}")


def _exact_keys(value: Mapping[Any, Any], allowed: set[str], required: set[str]) -> None:
    extra = [k for k in value if k not in allowed]
    if extra:
        raise _Invalid(_unknown_keys(extra))
    missing = sorted(required.difference(value))
    if missing:
        raise _Invalid(f"missing keys {_keys_text(missing)}")


def _structure_message(value: object, _: object) -> UserMessage:
    if not isinstance(value, Mapping):
        raise _Invalid(f"message must be an object, got {json_kind(value)}")
    keys = {"id", "role", "content", "source"}
    _exact_keys(value, keys, keys)
    role = value["role"]
    if role != "user":
        raise _Invalid(f'message role must be "user", got {_quoted(role)}')
    content = value["content"]
    if not isinstance(content, list | tuple):
        raise _Invalid(f"message content must be an array, got {json_kind(content)}")
    source = _structure_json(value["source"], None)
    if type(source) is not FrozenDict:
        raise _Invalid(f"message source must be an object, got {json_kind(source)}")
    return UserMessage(
        id=converter.structure(value["id"], str),
        content=tuple(_structure_block(b, ContentBlock) for b in content),
        source=source,
    )


def _structure_blocks(value: object, _: object) -> tuple[ContentBlock, ...]:
    if not isinstance(value, list | tuple):
        raise _Invalid(f"content must be an array, got {json_kind(value)}")
    return tuple(_structure_block(b, ContentBlock) for b in value)


def _structure_messages(value: object, _: object) -> tuple[UserMessage, ...]:
    if not isinstance(value, list | tuple):
        raise _Invalid(f"additional_contexts must be an array, got {json_kind(value)}")
    return tuple(_structure_message(m, UserMessage) for m in value)


converter.register_structure_hook(TextContent | ImageContent, _structure_block)
converter.register_structure_hook(UserMessage, _structure_message)


def _object_first(what: str, structure: Any) -> Any:
    """``structure`` for an attrs class, after checking that the value is an object at all
    (cattrs' own function would fail on a non-mapping with a Python-internal message)."""

    def hook(value: object, kind: object) -> Any:
        if not isinstance(value, Mapping):
            raise _Invalid(f"{what} must be an object, got {json_kind(value)}")
        return structure(value, kind)

    return hook


converter.register_structure_hook(
    ErrorInfo, _object_first("info", make_dict_structure_fn(ErrorInfo, converter))
)
converter.register_structure_hook(
    ToolError, _object_first("error", make_dict_structure_fn(ToolError, converter))
)

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
        raise ValueError(f"invalid tool result JSON: expected an object, got {json_kind(data)}")
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
    # Our hooks raise messages that already say what is wrong, in JSON terms; keep them
    # (cattrs' default formatter would replace them with a generic "invalid value for
    # type"). The result's own invariants (attrs post-init) are ValueErrors worded for
    # users too. Anything else would be Python talking about its own objects: not shown.
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, cattrs.ForbiddenExtraKeysError):
        return _unknown_keys(list(exc.extra_fields))
    if type(exc) is _Invalid or type(exc) is ValueError:
        return str(exc)
    return "invalid value"

"""Hook decisions: ``Allow``/``Deny``/``Ask`` before dispatch, ``Accept``/``Block`` after it."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any, Final, Literal, TypeAlias, final

import attrs

from ._content import ContentBlock, UserMessage, to_blocks
from ._json import JsonValue, freeze_json

__all__ = [
    "UNSET",
    "Accept",
    "Allow",
    "Ask",
    "Block",
    "Deny",
    "PostDecision",
    "PreDecision",
]


class _Unset(enum.Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


#: Marks "not given" in :class:`Accept`, so that ``Accept(value=None)`` can mean JSON null.
UNSET: Final = _Unset.UNSET
UnsetType: TypeAlias = Literal[_Unset.UNSET]


def _contexts(value: object) -> tuple[UserMessage, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(
            f"additional_contexts must be a sequence of UserMessage, got {type(value).__name__}"
        )
    contexts = tuple(value)
    for item in contexts:
        if type(item) is not UserMessage:
            raise TypeError(
                f"additional_contexts must hold UserMessage objects, got {type(item).__name__}"
            )
    return contexts


@final
@attrs.frozen
class Allow:
    """Let the call proceed (guards still run)."""


def _deny_reason(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if type(value) is not str:
        raise TypeError("Deny reason must be a str")


@final
@attrs.frozen
class Deny:
    """Refuse the call with ``reason`` (may be empty); post-execute still sees the denial."""

    reason: str = attrs.field(validator=_deny_reason)


def _ask_reason(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and type(value) is not str:
        raise TypeError("Ask reason must be a str or None")


@final
@attrs.frozen
class Ask:
    """Route the call through the runtime's approval service (runtime.md §9)."""

    reason: str | None = attrs.field(default=None, validator=_ask_reason)


def _accept_content(value: object) -> tuple[ContentBlock, ...] | UnsetType:
    if value is UNSET:
        return UNSET
    return to_blocks(value, "Accept content")


def _accept_value(value: object) -> JsonValue:
    return value if value is UNSET else freeze_json(value)


@final
@attrs.frozen(kw_only=True)
class Accept:
    """Accept a dispatched result, optionally replacing its content *or* its value.

    Raises:
        TypeError: both ``content`` and ``value`` are given.
    """

    content: tuple[ContentBlock, ...] | UnsetType = attrs.field(
        default=UNSET, converter=_accept_content
    )
    value: JsonValue = attrs.field(default=UNSET, converter=_accept_value)
    additional_contexts: tuple[UserMessage, ...] = attrs.field(default=(), converter=_contexts)

    def __attrs_post_init__(self) -> None:
        if self.content is not UNSET and self.value is not UNSET:
            raise TypeError(
                "tools/post-execute accept decision cannot replace both value and content"
            )


def _feedback(value: object) -> tuple[ContentBlock, ...]:
    try:
        return to_blocks(value, "Block feedback")
    except TypeError:
        raise TypeError("Block feedback must be a sequence of content blocks") from None


@final
@attrs.frozen
class Block:
    """Turn a dispatched result into a failure whose content is ``feedback``."""

    feedback: tuple[ContentBlock, ...] = attrs.field(converter=_feedback)
    additional_contexts: tuple[UserMessage, ...] = attrs.field(
        default=(), converter=_contexts, kw_only=True
    )


#: What a ``tools/pre-execute`` hook returns.
PreDecision: TypeAlias = Allow | Deny | Ask
#: What a ``tools/post-execute`` hook returns.
PostDecision: TypeAlias = Accept | Block

"""Content blocks and user messages: what a result shows the model."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias, final

import attrs

from ._json import FrozenDict, freeze_json

__all__ = ["ContentBlock", "ImageContent", "TextContent", "UserMessage", "to_blocks"]


def _require_str(field: str) -> Any:
    def check(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if type(value) is not str:
            raise TypeError(
                f"{type(inst).__name__}.{field} must be a str, got {type(value).__name__}"
            )

    return check


@final
@attrs.frozen
class TextContent:
    """A text block: ``{"type": "text", "text": ...}``.

    Example:
        >>> TextContent("hello").to_json()
        {'type': 'text', 'text': 'hello'}
    """

    text: str = attrs.field(validator=_require_str("text"))

    @property
    def type(self) -> Literal["text"]:
        """The JSON discriminator, always ``"text"``."""
        return "text"

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form of this block."""
        return {"type": "text", "text": self.text}


@final
@attrs.frozen
class ImageContent:
    """An image block: base64 ``data`` and its ``mime_type``."""

    data: str = attrs.field(validator=_require_str("data"))
    mime_type: str = attrs.field(validator=_require_str("mime_type"))

    @property
    def type(self) -> Literal["image"]:
        """The JSON discriminator, always ``"image"``."""
        return "image"

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form of this block."""
        return {"type": "image", "data": self.data, "mime_type": self.mime_type}


#: A block of result content.
ContentBlock: TypeAlias = TextContent | ImageContent

_BLOCK_TYPES = (TextContent, ImageContent)


def to_blocks(value: object, what: str) -> tuple[ContentBlock, ...]:
    """Convert a sequence of content blocks to a tuple, or raise ``TypeError`` naming ``what``."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{what} must be a sequence of content blocks, got {type(value).__name__}")
    blocks = tuple(value)
    for block in blocks:
        if type(block) not in _BLOCK_TYPES:
            raise TypeError(
                f"{what} must be a sequence of content blocks, got an item of type "
                f"{type(block).__name__}"
            )
    return blocks


def _content_converter(value: object) -> tuple[ContentBlock, ...]:
    return to_blocks(value, "UserMessage.content")


def _source_converter(value: object) -> FrozenDict:
    frozen = freeze_json(value)
    if type(frozen) is not FrozenDict:
        raise TypeError(f"UserMessage.source must be a JSON object, got {type(value).__name__}")
    return frozen


def _default_source() -> FrozenDict:
    return FrozenDict._from_frozen({"kind": "tool"})


def _new_id() -> str:
    return str(uuid.uuid4())


@final
@attrs.frozen(kw_only=True)
class UserMessage:
    """A user-role message carried as an additional context of a result.

    Args:
        content: The message's content blocks (any sequence; stored as a tuple).
        source: Where the message came from (lossless JSON object), default ``{"kind": "tool"}``.
        id: A unique id, default a fresh UUID4 string.
    """

    content: tuple[ContentBlock, ...] = attrs.field(converter=_content_converter)
    source: FrozenDict = attrs.field(factory=_default_source, converter=_source_converter)
    id: str = attrs.field(factory=_new_id, validator=_require_str("id"))

    @property
    def role(self) -> Literal["user"]:
        """Always ``"user"``."""
        return "user"

    def to_json(self) -> dict[str, Any]:
        """Return ``{"id", "role": "user", "content": [...], "source": {...}}``."""
        return {
            "id": self.id,
            "role": "user",
            "content": [block.to_json() for block in self.content],
            "source": self.source,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> UserMessage:
        """Rebuild a message from :meth:`to_json` output, through the package's converter.

        Exactly what a result's ``additional_contexts`` accept in ``ToolResult.from_json``.

        Args:
            data: The message's JSON form.

        Returns:
            The message, deeply frozen.

        Raises:
            ValueError: ``invalid user message JSON: <detail>`` for missing or unknown keys, a
                role other than ``"user"``, or a value of the wrong type.

        Example:
            >>> message = UserMessage(content=[TextContent("hi")], id="m1")
            >>> UserMessage.from_json(message.to_json()) == message
            True
        """
        from ._convert import structure_message

        return structure_message(data)

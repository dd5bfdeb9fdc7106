"""Frozen results: ``ToolResult``, ``ToolError``, ``ErrorInfo`` and ``error_result``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, final

import attrs

from ._content import ContentBlock, TextContent, UserMessage, to_blocks
from ._errors import AbortError, ErrorCode, HarnessError, normalize_message
from ._json import JsonValue, freeze_json, is_lossless_str
from ._slots import sealable, sealed_factory

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ErrorInfo", "ToolError", "ToolResult", "aborted_result", "error_result"]


def _str_field(owner: str, name: str) -> Any:
    def check(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if type(value) is not str:
            raise TypeError(f"{owner}.{name} must be a str, got {type(value).__name__}")

    return check


def _plain_str(value: object) -> str:
    # str subclasses (ErrorCode members, say) are stored as plain str: equal, and serialized
    # the same.
    if not isinstance(value, str):
        raise TypeError(f"ErrorInfo fields must be str, got {type(value).__name__}")
    return value if type(value) is str else str.__str__(value)


@final
@attrs.frozen
class ErrorInfo:
    """Machine-readable error identity: the exception class ``name`` and its ``code``."""

    name: str = attrs.field(converter=_plain_str)
    code: str = attrs.field(converter=_plain_str)


def _info_validator(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and type(value) is not ErrorInfo:
        raise TypeError(f"ToolError.info must be an ErrorInfo or None, got {type(value).__name__}")


@final
@attrs.frozen
class ToolError:
    """The error of a failed result: its ``message`` and optional ``info``."""

    message: str = attrs.field(validator=_str_field("ToolError", "message"))
    info: ErrorInfo | None = attrs.field(default=None, validator=_info_validator)


def _content_converter(value: object) -> tuple[ContentBlock, ...]:
    return to_blocks(value, "ToolResult.content")


def _contexts_converter(value: object) -> tuple[UserMessage, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(
            "ToolResult.additional_contexts must be a sequence of UserMessage, "
            f"got {type(value).__name__}"
        )
    contexts = tuple(value)
    for item in contexts:
        if type(item) is not UserMessage:
            raise TypeError(
                "ToolResult.additional_contexts must be a sequence of UserMessage, "
                f"got an item of type {type(item).__name__}"
            )
    return contexts


def _meta_converter(value: object) -> JsonValue:
    return None if value is None else freeze_json(value)


def _error_validator(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and type(value) is not ToolError:
        raise TypeError(f"ToolResult.error must be a ToolError or None, got {type(value).__name__}")


def _bool_validator(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if type(value) is not bool:
        raise TypeError(f"ToolResult.{attribute.name} must be a bool, got {type(value).__name__}")


class _ToolResultSlots:
    """:class:`ToolResult`'s slots, writable: its trusted factories fill them (``_slots``)."""

    __slots__ = (
        "__weakref__",
        "additional_contexts",
        "concludes_turn",
        "content",
        "error",
        "is_error",
        "meta",
        "value",
    )


@final
@sealable
@attrs.frozen(kw_only=True)
class ToolResult(_ToolResultSlots):
    """The frozen, lossless outcome of one call.

    Immutable all the way down: content and contexts are tuples of frozen blocks and
    messages, ``value`` and ``meta`` are frozen JSON (:func:`freeze_json`). ``value`` is
    carried in memory only; :meth:`to_json` never writes it.

    Raises:
        ValueError: ``a successful ToolResult cannot carry an error``,
            ``a failed ToolResult needs an error``, ``a failed ToolResult cannot carry a
            value`` or ``a failed ToolResult cannot conclude the turn``.
        TypeError: a field of the wrong type, or a ``value``/``meta`` that is not lossless JSON.
    """

    is_error: bool = attrs.field(validator=_bool_validator)
    content: tuple[ContentBlock, ...] = attrs.field(default=(), converter=_content_converter)
    value: JsonValue = attrs.field(default=None, converter=freeze_json)
    error: ToolError | None = attrs.field(default=None, validator=_error_validator)
    meta: JsonValue | None = attrs.field(default=None, converter=_meta_converter)
    additional_contexts: tuple[UserMessage, ...] = attrs.field(
        default=(), converter=_contexts_converter
    )
    concludes_turn: bool = attrs.field(default=False, validator=_bool_validator)

    def __attrs_post_init__(self) -> None:
        if self.is_error:
            if self.error is None:
                raise ValueError("a failed ToolResult needs an error")
            if self.value is not None:
                raise ValueError("a failed ToolResult cannot carry a value")
            if self.concludes_turn:
                raise ValueError("a failed ToolResult cannot conclude the turn")
        elif self.error is not None:
            raise ValueError("a successful ToolResult cannot carry an error")

    @classmethod
    def _trusted(
        cls,
        *,
        is_error: bool,
        content: tuple[ContentBlock, ...],
        value: JsonValue = None,
        error: ToolError | None = None,
        meta: JsonValue | None = None,
        additional_contexts: tuple[UserMessage, ...] = (),
        concludes_turn: bool = False,
    ) -> ToolResult:
        """Build from fields that are already frozen and checked (the runtime's rebuilds)."""
        return sealed_result(
            is_error, content, value, error, meta, additional_contexts, concludes_turn
        )

    def to_json(self) -> dict[str, Any]:
        """Return the durable JSON form (``value`` is never written; empty fields are omitted)."""
        from ._convert import unstructure_result

        return unstructure_result(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolResult:
        """Rebuild a result from :meth:`to_json` output (``value`` comes back ``None``).

        Raises:
            ValueError: ``invalid tool result JSON: <detail>`` for unknown keys or wrong types.
        """
        from ._convert import structure_result

        return structure_result(data)


def error_info_of(exc: BaseException) -> ErrorInfo | None:
    """Return ``ErrorInfo(<class name>, code)`` for a ``HarnessError`` with a ``str`` code."""
    if not isinstance(exc, HarnessError):
        return None
    try:
        code: object = exc.code
    except Exception:
        return None
    if not isinstance(code, str):
        return None
    name = type(exc).__name__
    if not is_lossless_str(name) or not is_lossless_str(code):
        return None
    return ErrorInfo(name, code)


@sealed_factory(ToolResult)
def sealed_result(
    is_error: bool,
    content: tuple[ContentBlock, ...],
    value: JsonValue,
    error: ToolError | None,
    meta: JsonValue | None,
    additional_contexts: tuple[UserMessage, ...],
    concludes_turn: bool,
) -> ToolResult:
    """``ToolResult._trusted`` by position, for the body's hot path, which builds every
    success so: no converter, no validator, no frozen ``__setattr__`` (see ``_slots``)."""
    raise AssertionError("compiled by sealed_factory")  # pragma: no cover


def error_result(exc: BaseException) -> ToolResult:
    """Build the standard failure for a raised exception.

    ``content`` is ``(TextContent("Error: " + M),)`` and ``error`` is ``ToolError(M, I)``,
    where ``M`` is the normalized message and ``I`` the :class:`ErrorInfo` of a
    :class:`HarnessError` (``None`` otherwise).

    Example:
        >>> error_result(HarnessError("x", "C")).error
        ToolError(message='x', info=ErrorInfo(name='HarnessError', code='C'))
    """
    message = normalize_message(exc)
    return ToolResult._trusted(
        is_error=True,
        content=(TextContent("Error: " + message),),
        error=ToolError(message, error_info_of(exc)),
    )


def _build_aborted(code: ErrorCode) -> ToolResult:
    return error_result(AbortError(code))


_ABORTED = _build_aborted(ErrorCode.ABORTED)
_ABORTED_BEFORE_DISPATCH = _build_aborted(ErrorCode.ABORTED_BEFORE_DISPATCH)


def aborted_result(
    body_started: bool, contexts: tuple[UserMessage, ...] = (), reason: object = None
) -> ToolResult:
    """The cancellation result (runtime.md §8.1), carrying ``contexts``.

    ``reason`` is the ``Abort``'s reason: a non-empty ``str`` is appended to the texts
    (as :class:`AbortError` decides).
    """
    if isinstance(reason, str) and reason:
        result = error_result(
            AbortError(
                ErrorCode.ABORTED if body_started else ErrorCode.ABORTED_BEFORE_DISPATCH, reason
            )
        )
        return replace_contexts(result, contexts) if contexts else result
    base = _ABORTED if body_started else _ABORTED_BEFORE_DISPATCH
    if not contexts:
        # A fresh object per call: observers and callers may rely on identity per execution.
        return ToolResult._trusted(is_error=True, content=base.content, error=base.error)
    return ToolResult._trusted(
        is_error=True, content=base.content, error=base.error, additional_contexts=contexts
    )


def replace_contexts(result: ToolResult, contexts: tuple[UserMessage, ...]) -> ToolResult:
    """Return ``result`` with ``additional_contexts`` set to ``contexts`` (no re-validation)."""
    if contexts is result.additional_contexts:
        return result
    return ToolResult._trusted(
        is_error=result.is_error,
        content=result.content,
        value=result.value,
        error=result.error,
        meta=result.meta,
        additional_contexts=contexts,
        concludes_turn=result.concludes_turn,
    )


def replace_content(result: ToolResult, content: tuple[ContentBlock, ...]) -> ToolResult:
    """Return ``result`` with its content replaced (no re-validation)."""
    return ToolResult._trusted(
        is_error=result.is_error,
        content=content,
        value=result.value,
        error=result.error,
        meta=result.meta,
        additional_contexts=result.additional_contexts,
        concludes_turn=result.concludes_turn,
    )


def result_strings_lossless(result: ToolResult) -> bool:
    """Check every string that did not pass through ``freeze_json`` (runtime.md §7.7)."""
    if not blocks_lossless(result.content):
        return False
    error = result.error
    if error is not None:
        if not is_lossless_str(error.message):
            return False
        info = error.info
        if info is not None and not (is_lossless_str(info.name) and is_lossless_str(info.code)):
            return False
    for message in result.additional_contexts:
        if not is_lossless_str(message.id) or not blocks_lossless(message.content):
            return False
    return True


def blocks_lossless(blocks: tuple[ContentBlock, ...]) -> bool:
    """Whether every string of the blocks encodes as UTF-8."""
    for block in blocks:
        if type(block) is TextContent:
            text = block.text
            if not text.isascii() and not is_lossless_str(text):
                return False
        elif not (is_lossless_str(block.data) and is_lossless_str(block.mime_type)):
            return False
    return True

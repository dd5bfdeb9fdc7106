"""The adapters' shared values: ``ToolTurn``, ``ProviderFormatError``, ``IMAGE_MIME_TYPES``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final, final

import attrs

from dsh_tools import FrozenDict, freeze_json

from .._calls import ModelToolCall

__all__ = ["IMAGE_MIME_TYPES", "PROVIDERS", "ProviderFormatError", "ToolTurn"]

#: The image types that OpenAI Chat, OpenAI Responses and Anthropic Messages all accept.
IMAGE_MIME_TYPES: Final = ("image/png", "image/jpeg", "image/gif", "image/webp")

#: The adapter module names, which are also the values of ``ToolTurn.provider``.
PROVIDERS: Final = ("openai_chat", "openai_responses", "anthropic_messages")


class ProviderFormatError(ValueError):
    """Raised by ``read_calls`` when the provider's output does not have the expected shape.

    ``str(error)`` is ``"<provider>: <path> <problem>"``, for example
    ``openai_chat: tool_calls[0].id must be a non-empty string``.

    Args:
        provider: The adapter that read it (``"openai_chat"``, ...).
        path: Where the problem is: ``message`` or ``output`` for the root, otherwise the
            field path from the root (``tool_calls[1].function.arguments``).
        problem: What is wrong (``must be a non-empty string``).

    Example:
        >>> str(ProviderFormatError("openai_chat", "role", 'must be "assistant"'))
        'openai_chat: role must be "assistant"'
    """

    provider: str
    path: str
    problem: str

    def __init__(self, provider: str, path: str, problem: str) -> None:
        # The three fields are the exception's args, so pickle and copy rebuild it as is.
        super().__init__(provider, path, problem)
        self.provider = provider
        self.path = path
        self.problem = problem

    def __str__(self) -> str:
        return f"{self.provider}: {self.path} {self.problem}"


def _check_provider(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in PROVIDERS or type(value) is not str:
        raise ValueError(
            'ToolTurn.provider must be one of "openai_chat", "openai_responses", '
            '"anthropic_messages"'
        )


def _calls_tuple(value: Iterable[ModelToolCall]) -> tuple[ModelToolCall, ...]:
    calls = tuple(value)
    for call in calls:
        if type(call) is not ModelToolCall:
            raise TypeError("ToolTurn.calls must contain ModelToolCall objects")
    return calls


def _echo_tuple(value: Iterable[Mapping[str, object]]) -> tuple[FrozenDict, ...]:
    # Frozen copies: a turn never shares a mutable object with what it was read from.
    echo = []
    for entry in value:
        if type(entry) is FrozenDict:
            echo.append(entry)  # already a deep, immutable copy
        elif isinstance(entry, Mapping):
            echo.append(freeze_json(dict(entry)))
        else:
            raise TypeError("ToolTurn.echo must contain JSON objects")
    return tuple(echo)


@final
@attrs.frozen(kw_only=True)
class ToolTurn:
    """The function calls of one assistant message, as read by one adapter.

    Pass ``calls`` to ``run_tool_calls`` (or ``open_batch``), then give the outcome to the same
    adapter's ``write_results``.

    Args:
        provider: The adapter that reads and answers this turn: ``"openai_chat"``,
            ``"openai_responses"`` or ``"anthropic_messages"``.
        calls: The calls, in model order (any iterable; stored as a tuple).
        echo: ``()``, or one JSON object per call whose keys the adapter copies unchanged
            into that call's result entry (Responses ``caller``, Anthropic
            ``toolset_name``); stored as frozen copies.

    Raises:
        ValueError: ``provider`` is not one of the three names; ``echo`` is neither empty
            nor of the same length as ``calls``.
        TypeError: an item of ``calls`` is not a ``ModelToolCall``; an ``echo`` entry is
            not a mapping of lossless JSON.

    Example:
        >>> call = ModelToolCall(call_id="c1", name="echo", arguments="{}")
        >>> ToolTurn(provider="openai_chat", calls=[call]).calls == (call,)
        True
    """

    provider: str = attrs.field(validator=_check_provider)
    calls: tuple[ModelToolCall, ...] = attrs.field(converter=_calls_tuple)
    echo: tuple[FrozenDict, ...] = attrs.field(default=(), converter=_echo_tuple)

    @echo.validator
    def _check_echo(self, attribute: attrs.Attribute[Any], value: tuple[FrozenDict, ...]) -> None:
        if value and len(value) != len(self.calls):
            raise ValueError("ToolTurn.echo must be empty or have one entry per call")

    @classmethod
    def _trusted(
        cls, provider: str, calls: tuple[ModelToolCall, ...], echo: tuple[FrozenDict, ...]
    ) -> ToolTurn:
        # For the adapters' own reader, which has already checked every field: skips the
        # per-item validation that a turn built by an application goes through.
        turn = object.__new__(cls)
        _SET_PROVIDER(turn, provider)
        _SET_CALLS(turn, calls)
        _SET_ECHO(turn, echo)
        return turn


_SET_PROVIDER, _SET_CALLS, _SET_ECHO = (
    vars(ToolTurn)[name].__set__ for name in ("provider", "calls", "echo")
)

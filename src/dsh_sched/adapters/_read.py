"""Reading helpers shared by the three ``read_calls`` (integrations §2.2).

The provider modules walk their own shapes; these helpers hold the rules every provider
shares: SDK objects through their JSON dump, the exact error texts, ids that must be unique
within a turn, and arguments kept verbatim or passed on as a mapping.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, NoReturn

from dsh_tools import FrozenDict, freeze_json

from .._calls import ModelToolCall
from ._turn import ProviderFormatError, ToolTurn

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["EMPTY_ECHO", "TurnBuilder", "as_list", "as_object", "plain", "type_name"]

#: The echo of a call that has no provider field to copy (one shared, immutable object).
EMPTY_ECHO: Final = FrozenDict()


def plain(value: object) -> object:
    """``value``, or its JSON dump when it is an SDK object (a pydantic model).

    Mappings, lists and tuples are taken as they are; anything else with a callable
    ``model_dump`` is dumped the way the SDKs serialize a request (JSON mode, aliases, only
    the fields that were set), so an SDK object reads exactly like the JSON it came from.
    """
    if type(value) is dict or isinstance(value, Mapping | list | tuple):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", by_alias=True, exclude_unset=True)
    return value


def type_name(value: object) -> str:
    """The type name used in error texts (``NoneType`` for a missing field)."""
    return type(value).__name__


def as_object(provider: str, value: object, path: str) -> Mapping[str, object]:
    """``value`` after :func:`plain`, which must be a mapping."""
    value = plain(value)
    if not isinstance(value, Mapping):
        raise ProviderFormatError(provider, path, f"must be a JSON object, got {type_name(value)}")
    return value


def as_list(provider: str, value: object, path: str) -> Sequence[object]:
    """``value`` after :func:`plain`, which must be a list (or a tuple)."""
    value = plain(value)
    if not isinstance(value, list | tuple):
        raise ProviderFormatError(provider, path, f"must be a list, got {type_name(value)}")
    return value


class TurnBuilder:
    """Collects one turn's calls in model order, checking ids and arguments.

    Entries are addressed by their index in the provider's list (``tool_calls``, ``output``
    or ``content``, the ``prefix``); error paths are only formatted when a check fails, so a
    well-formed turn costs little more than building its ``ModelToolCall`` objects.
    """

    __slots__ = ("calls", "echo", "has_echo", "prefix", "provider", "seen")

    def __init__(self, provider: str, prefix: str, *, has_echo: bool) -> None:
        self.provider = provider
        self.prefix = prefix
        self.has_echo = has_echo
        self.calls: list[ModelToolCall] = []
        self.echo: list[FrozenDict] = []
        self.seen: dict[str, int] = {}  # call id -> index of the entry that used it first

    def fail(self, index: int, field: str, problem: str) -> NoReturn:
        """Raise the :class:`ProviderFormatError` for ``<prefix>[index]<field>``."""
        raise ProviderFormatError(self.provider, f"{self.prefix}[{index}]{field}", problem)

    def entry(self, index: int, value: object, field: str = "") -> Mapping[str, object]:
        """The entry (or a nested object of it) as a mapping, SDK objects dumped."""
        if type(value) is dict:
            return value
        value = plain(value)
        if not isinstance(value, Mapping):
            self.fail(index, field, f"must be a JSON object, got {type_name(value)}")
        return value

    def text(self, index: int, value: object, field: str) -> str:
        """``value``, which must be a non-empty ``str``."""
        if type(value) is not str or not value:
            self.fail(index, field, "must be a non-empty string")
        return value

    def bad_call_id(self, index: int, value: object, field: str) -> NoReturn:
        """Raise for a call id that is not a non-empty ``str`` or repeats an earlier one."""
        value = self.text(index, value, field)
        # Providers pair results by id: a repeated id cannot be answered.
        self.fail(index, field, f"repeats the id of {self.prefix}[{self.seen[value]}]")

    def add(
        self,
        index: int,
        call_id: str,
        name: str,
        arguments: object,
        field: str,
        *,
        text_ok: bool,
        echo: FrozenDict = EMPTY_ECHO,
    ) -> None:
        """Append one call whose arguments are not text; ``field`` locates them.

        (Text arguments are appended by the providers themselves, kept verbatim: the
        scheduler parses them, so "", bad JSON and non-objects reach the runtime as written.)
        """
        if isinstance(arguments, Mapping):
            call = self._mapping_call(index, call_id, name, arguments, field)
        else:
            expected = "a string or a JSON object" if text_ok else "a JSON object"
            self.fail(index, field, f"must be {expected}, got {type_name(arguments)}")
        self.calls.append(call)
        if self.has_echo:
            self.echo.append(echo)

    def _mapping_call(
        self, index: int, call_id: str, name: str, arguments: Mapping[str, object], field: str
    ) -> ModelToolCall:
        try:
            # Passed on as parsed: ModelToolCall freezes a copy, so values and key order are
            # exactly what the provider's JSON parser produced.
            return ModelToolCall(call_id=call_id, name=name, arguments=arguments)
        except TypeError:
            pass  # not lossless (-0.0, NaN, ...): let the runtime answer the call instead
        try:
            text = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError, RecursionError):
            self.fail(index, field, "must be a JSON object, got a value that is not JSON")
        return ModelToolCall(call_id=call_id, name=name, arguments=text)

    def frozen(self, index: int, value: object, field: str) -> FrozenDict:
        """A frozen copy of a JSON object the adapter echoes back unchanged."""
        mapping = self.entry(index, value, field)
        try:
            frozen = freeze_json(dict(mapping))
        except TypeError:
            self.fail(index, field, "must be a JSON object, got a value that is not JSON")
        assert type(frozen) is FrozenDict  # a dict freezes to a FrozenDict
        return frozen

    def turn(self) -> ToolTurn:
        """The finished :class:`ToolTurn`."""
        return ToolTurn._trusted(self.provider, tuple(self.calls), tuple(self.echo))

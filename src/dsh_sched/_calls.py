"""The model's raw tool call and argument parsing (scheduler.md §2, §2.2)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, final

import attrs

from dsh_tools import FrozenDict, Scope, ToolRuntime, freeze_json
from dsh_tools.lowlevel import parse_frozen_json_text, parse_json_text

__all__ = ["ModelToolCall", "call_arguments", "has_classifier", "parse_arguments"]


def _str_field(name: str) -> Any:
    def check(inst: object, attribute: attrs.Attribute[Any], value: object) -> None:
        # Exact type, as ToolCall checks it: a str subclass would only fail later, when the
        # call's ToolCall is built, as an internal failure of the batch.
        if type(value) is not str:
            raise TypeError(f"ModelToolCall {name} must be a str, got {type(value).__name__}")

    return attrs.field(validator=check)


def _freeze_arguments(value: str | Mapping[str, object]) -> str | FrozenDict:
    # A str is kept exactly as received: it is what the session log writes back, and it is
    # parsed only when the call is first classified (never for a call that gets a synthetic
    # pair). A mapping is snapshotted now, so a caller mutating its dict later changes
    # nothing, and a non-lossless mapping fails here, where the bad value was built.
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        frozen: FrozenDict = freeze_json(value)
        return frozen
    raise TypeError(
        f"ModelToolCall arguments must be a str or a mapping, got {type(value).__name__}"
    )


@final
@attrs.frozen(kw_only=True)
class ModelToolCall:
    """One tool call as the model emitted it.

    Args:
        call_id: The model's id for the call (duplicates are allowed; the scheduler keys
            everything by position).
        name: The tool name the model asked for.
        arguments: The model's raw argument text, or a JSON object that is already parsed.
            A mapping is frozen with ``freeze_json`` at construction (so the field then
            holds a ``FrozenDict``); a text is kept unchanged and parsed by
            :func:`parse_arguments` when the call is first classified.

    Raises:
        TypeError: ``call_id`` or ``name`` is not a ``str``; ``arguments`` is neither a
            ``str`` nor a mapping, or is a mapping that is not lossless JSON.

    Example:
        >>> ModelToolCall(call_id="c1", name="echo", arguments='{"text": "hi"}').name
        'echo'
    """

    call_id: str = _str_field("call_id")
    name: str = _str_field("name")
    arguments: str | FrozenDict = attrs.field(converter=_freeze_arguments)


def parse_arguments(raw: str) -> object:
    """Turn a model's raw argument text into the value given to the runtime.

    ``""`` becomes a new empty ``dict``; valid JSON (without ``NaN``/``Infinity`` and without
    a key given twice in one object) becomes the parsed value, whatever its type; anything
    else (malformed JSON, a rejected constant, a repeated key, nesting too deep for the
    parser) is returned unchanged as the raw string, for the tool's validation to explain.
    Nothing else is checked: the runtime's argument snapshot and the tool's own validation
    decide.

    Args:
        raw: The argument text.

    Returns:
        The parsed value, or ``raw`` itself when it is not JSON.

    Example:
        >>> parse_arguments('{"a": 1}'), parse_arguments(""), parse_arguments("{bad")
        ({'a': 1}, {}, '{bad')
    """
    if raw == "":
        return {}
    try:
        return parse_json_text(raw)
    except json.JSONDecodeError:
        # Malformed JSON, a rejected constant, a repeated key, an integer too long or
        # nesting too deep: the tool's validation explains it to the model (with the same
        # parser, so they agree).
        return raw


def has_classifier(runtime: ToolRuntime, name: str, scope: Scope | None) -> bool:
    """Whether classifying a call of ``name`` now calls a classifier with its arguments."""
    defn = runtime.get(name, scope)
    return defn is not None and type(defn.is_concurrency_safe) is not bool


def call_arguments(
    runtime: ToolRuntime, scope: Scope | None, call: ModelToolCall, *, may_freeze: bool
) -> tuple[object, bool]:
    """The arguments of ``call``'s ``ToolCall``, and whether they are a frozen snapshot.

    A classifier is called with the parsed value of a text (§2.2). While the visible tool
    has none (its ``is_concurrency_safe`` is a bool, or there is no such tool), nothing
    sees that value but the runtime's snapshot, so with ``may_freeze`` the text is parsed
    straight into the frozen snapshot, which the runtime then takes as it is. The driver
    asks again without ``may_freeze`` if the tool is replaced by one with a classifier
    before the call starts: the call then gets the parsed value, the first arguments
    object any classifier sees.
    """
    arguments = call.arguments
    if not isinstance(arguments, str):
        return arguments, False
    if may_freeze and arguments and not has_classifier(runtime, call.name, scope):
        try:
            return parse_frozen_json_text(arguments), True
        except ValueError:
            pass  # the general path decides, and explains
    return parse_arguments(arguments), False

"""The ``inspect`` report: the runtime's API and events, read from the live code.

Nothing here is hand-maintained text: summaries come from docstrings and signatures from
``inspect.signature`` with the annotations exactly as written in the source.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Final, final

import attrs

from ._abort import Abort
from ._hooks import ChangeObserver, ExecuteWrapper, PostExecuteHook, PreExecuteHook, ResultObserver
from ._runtime import ToolRuntime
from ._scope import Scope

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = [
    "API_CATALOGUE",
    "CAUTION",
    "EVENT_CATALOGUE",
    "EventEntry",
    "UnknownEntryError",
    "report",
]

CAUTION: Final = (
    "waterfall listeners receive a trailing call_next() and MUST call it to delegate — "
    "returning without call_next() short-circuits the chain."
)


@final
@attrs.frozen(kw_only=True)
class EventEntry:
    """One catalogued event: its name, mode, protocol and registration methods."""

    name: str
    mode: str
    protocol: type
    registered_with: tuple[str, ...]


#: The api section's entries, in report order.
API_CATALOGUE: tuple[type, ...] = (ToolRuntime, Scope, Abort)


def _event(name: str, mode: str, protocol: type, method: str) -> EventEntry:
    # Every hook registers through the same-named method on the runtime and on a scope.
    return EventEntry(
        name=name,
        mode=mode,
        protocol=protocol,
        registered_with=(f"ToolRuntime.{method}", f"Scope.{method}"),
    )


#: The events section's entries (printed sorted by name).
EVENT_CATALOGUE: tuple[EventEntry, ...] = (
    _event("tools/pre-execute", "waterfall", PreExecuteHook, "on_pre_execute"),
    _event("tools/execute", "waterfall", ExecuteWrapper, "wrap_execute"),
    _event("tools/post-execute", "waterfall", PostExecuteHook, "on_post_execute"),
    _event("tools/result", "emit", ResultObserver, "on_result"),
    _event("tools/change", "emit", ChangeObserver, "on_change"),
)


class UnknownEntryError(LookupError):
    """Raised by :func:`report` for a ``name`` that is not catalogued in its section."""


def summary(doc: str | None) -> str:
    """The first sentence of a docstring's first paragraph, on one line."""
    if not doc:
        return "(no summary)"
    cleaned = inspect.cleandoc(doc)
    paragraph = " ".join(cleaned.split("\n\n", 1)[0].split())
    if not paragraph:
        return "(no summary)"
    for i, char in enumerate(paragraph):
        if char == "." and (i + 1 == len(paragraph) or paragraph[i + 1].isspace()):
            return paragraph[: i + 1]
    return paragraph


def _format_annotation(annotation: object) -> str:
    if isinstance(annotation, str):
        return annotation  # as written in the source (we use postponed annotations)
    if isinstance(annotation, type):
        return annotation.__qualname__
    return repr(annotation)


def _format_parameters(fn: Callable[..., Any], *, drop_self: bool) -> str:
    parameters = list(inspect.signature(fn).parameters.values())
    if drop_self and parameters:
        parameters = parameters[1:]
    parts: list[str] = []
    kw_only_marked = False
    for index, p in enumerate(parameters):
        if p.kind is p.KEYWORD_ONLY and not kw_only_marked:
            parts.append("*")
            kw_only_marked = True
        elif p.kind is p.VAR_POSITIONAL:
            kw_only_marked = True
        text = p.name
        if p.kind is p.VAR_POSITIONAL:
            text = "*" + text
        elif p.kind is p.VAR_KEYWORD:
            text = "**" + text
        if p.annotation is not p.empty:
            text += ": " + _format_annotation(p.annotation)
            if p.default is not p.empty:
                text += " = " + repr(p.default)
        elif p.default is not p.empty:
            text += "=" + repr(p.default)
        parts.append(text)
        is_last_positional_only = p.kind is p.POSITIONAL_ONLY and (
            index + 1 == len(parameters) or parameters[index + 1].kind is not p.POSITIONAL_ONLY
        )
        if is_last_positional_only:
            parts.append("/")
    return ", ".join(parts)


def signature_line(fn: Callable[..., Any], name: str, *, drop_self: bool = True) -> str:
    """``[async ]name(params) -> return``, annotations as written in the source."""
    prefix = "async " if inspect.iscoroutinefunction(fn) else ""
    text = f"{prefix}{name}({_format_parameters(fn, drop_self=drop_self)})"
    returns = inspect.signature(fn).return_annotation
    if returns is not inspect.Signature.empty:
        text += " -> " + _format_annotation(returns)
    return text


def _public_methods(cls: type) -> list[tuple[str, Callable[..., Any]]]:
    methods: list[tuple[str, Callable[..., Any]]] = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if inspect.isfunction(value):
            methods.append((name, value))
    return methods


def _indented(doc: str | None) -> list[str]:
    if not doc:
        return []
    return [f"    {line}" if line.strip() else "" for line in inspect.cleandoc(doc).splitlines()]


def _api_lines(name: str | None) -> list[str]:
    entries: Sequence[type] = API_CATALOGUE
    if name is not None:
        entries = [cls for cls in API_CATALOGUE if cls.__name__ == name]
        if not entries:
            raise UnknownEntryError(f'no catalogued api entry named "{name}"')
    lines = ["## api"]
    for cls in entries:
        lines.append(f"- {cls.__name__} — {summary(cls.__doc__)}")
        for method_name, fn in _public_methods(cls):
            if name is not None:
                lines.extend(_indented(fn.__doc__))
            lines.append("    " + signature_line(fn, method_name))
    return lines


def _event_lines(name: str | None) -> list[str]:
    entries = sorted(EVENT_CATALOGUE, key=lambda e: e.name)
    if name is not None:
        entries = [e for e in entries if e.name == name]
        if not entries:
            raise UnknownEntryError(f'no catalogued event named "{name}"')
    lines = ["## events"]
    for entry in entries:
        doc = entry.protocol.__doc__
        lines.append(f"- {entry.name} [{entry.mode}] — {summary(doc)}")
        if name is not None:
            lines.extend(_indented(doc))
        call = vars(entry.protocol)["__call__"]
        lines.append("    " + signature_line(call, "", drop_self=True))
        lines.append("    registered with: " + ", ".join(entry.registered_with))
    lines.append(CAUTION)
    return lines


def report(section: str | None = None, name: str | None = None) -> str:
    """Build the inspect report (what ``python -m dsh_tools inspect`` prints).

    Args:
        section: ``"api"``, ``"events"`` or ``None`` for both (``## api`` first).
        name: With a section, one catalogued entry (exact, case-sensitive), shown with its
            full docstrings.

    Returns:
        The report, ending with a newline.

    Raises:
        ValueError: an unknown section, or a ``name`` without a section.
        UnknownEntryError: ``name`` is not catalogued in ``section``.
    """
    if section not in (None, "api", "events"):
        raise ValueError(f'unknown section "{section}"; expected "api" or "events"')
    if section is None and name is not None:
        raise ValueError("a name needs a section: inspect api NAME or inspect events NAME")
    if section == "api":
        lines = _api_lines(name)
    elif section == "events":
        lines = _event_lines(name)
    else:
        lines = [*_api_lines(None), "", *_event_lines(None)]
    return "\n".join(lines) + "\n"

"""The ``inspect`` report: the public API of both packages and the events, from live code.

Nothing here is hand-maintained text: summaries come from docstrings and signatures from
``inspect.signature`` with the annotations exactly as written in the source.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import re
import types
from typing import TYPE_CHECKING, Any, Final, final

import attrs

from ._abort import Abort
from ._code_events import CodeDispatchLogHook, CodeDispatchObserver, CodeDispatchStartObserver
from ._hooks import ChangeObserver, ExecuteWrapper, PostExecuteHook, PreExecuteHook, ResultObserver
from ._runtime import ToolRuntime
from ._scope import Scope

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "API_CATALOGUE",
    "API_MODULES",
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


#: The api section's first entries, in report order (``dsh_tools``' own names follow them).
API_CATALOGUE: tuple[object, ...] = (ToolRuntime, Scope, Abort)

#: The modules whose public names (``__all__``) the api section lists after
#: ``API_CATALOGUE``, in this order. A package's names are catalogued by their bare names
#: (``run_tool_calls``); a submodule is an entry of its own (``dsh_sched.testing``) and its
#: names are catalogued under their dotted names (``dsh_sched.testing.check_trace``).
#: Modules are imported only when the api section is built: ``dsh_tools`` itself never
#: imports ``dsh_sched``, and ``inspect events`` never loads it.
API_MODULES: tuple[str, ...] = (
    "dsh_tools",
    "dsh_tools.lowlevel",
    "dsh_tools.policies",
    "dsh_tools.testing",
    "dsh_tools.code",
    "dsh_sched",
    "dsh_sched.testing",
    "dsh_sched.aio",
)


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
    _event(
        "tools/code-dispatch-start", "emit", CodeDispatchStartObserver, "on_code_dispatch_start"
    ),
    _event("tools/code-dispatch", "emit", CodeDispatchObserver, "on_code_dispatch"),
    _event("tools/code-dispatch-log", "waterfall", CodeDispatchLogHook, "on_code_dispatch_log"),
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


def _format_default(default: object) -> str:
    if isinstance(default, enum.Enum):
        # As written in the source, not the member's angle-bracket repr.
        return f"{type(default).__name__}.{default.name}"
    # A private sentinel's repr carries its address, which changes from run to run.
    text = repr(default)
    return "..." if re.fullmatch(r"<.* at 0x[0-9a-fA-F]+>", text) else text


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
                text += " = " + _format_default(p.default)
        elif p.default is not p.empty:
            text += "=" + _format_default(p.default)
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


def _member_lines(cls: type) -> list[tuple[str | None, str]]:
    """``(docstring, line)`` for each public member of a class, without the indent.

    The constructor first (when the class body defines ``__init__``), then enum members,
    then the attributes the class body annotates, then in definition order its properties
    (``name: type``), methods (signatures) and a ``__call__`` (a protocol's hook shape).
    """
    body = vars(cls)
    lines: list[tuple[str | None, str]] = []
    init = body.get("__init__")
    if inspect.isfunction(init) and _takes_arguments(init):
        lines.append((None, signature_line(init, cls.__name__)))
    if isinstance(cls, enum.EnumMeta):
        lines.extend((None, f"{m.name} = {m.value!r}") for m in cls)  # type: ignore[var-annotated]
    for attribute, annotation in body.get("__annotations__", {}).items():
        written = _format_annotation(annotation)
        if not attribute.startswith("_") and not written.startswith(("ClassVar", "Final")):
            lines.append((None, f"{attribute}: {written}"))
    for name, value in body.items():
        if name == "__call__" and inspect.isfunction(value):
            lines.append((value.__doc__, signature_line(value, "")))
        if name.startswith("_"):
            continue
        if isinstance(value, property) and value.fget is not None:
            returns = inspect.signature(value.fget).return_annotation
            written = "" if returns is inspect.Signature.empty else _format_annotation(returns)
            lines.append((value.__doc__, f"{name}: {written}".rstrip(": ")))
        elif isinstance(value, classmethod | staticmethod):
            kind = type(value).__name__
            drop = isinstance(value, classmethod)
            lines.append(
                (value.__doc__, f"{kind} {signature_line(value.__func__, name, drop_self=drop)}")
            )
        elif inspect.isfunction(value):
            lines.append((value.__doc__, signature_line(value, name)))
    return lines


def _takes_arguments(init: Callable[..., Any]) -> bool:
    # Shown only when it says something: not for ``X()`` (often made by the library, such
    # as a ``Scope``), nor for a bare ``(*args, **kwargs)`` (a protocol, a guarded class).
    kinds = {p.kind for p in list(inspect.signature(init).parameters.values())[1:]}
    return bool(kinds - {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD})


def _format_value(value: object) -> str:
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, types.UnionType):
        return " | ".join(_format_annotation(arg) for arg in value.__args__)
    # Typing constructs print their modules (``collections.abc.Callable``): drop them.
    return re.sub(r"\b(?:[a-z_]\w*\.)+(?=[A-Za-z_])|~", "", repr(value))


@final
@attrs.frozen
class _ApiEntry:
    name: str
    value: object


def _catalogue() -> list[_ApiEntry]:
    entries = [_ApiEntry(getattr(v, "__name__", repr(v)), v) for v in API_CATALOGUE]
    seen = {id(entry.value) for entry in entries}
    for module_name in API_MODULES:
        module = importlib.import_module(module_name)
        prefix = ""
        if "." in module_name:
            entries.append(_ApiEntry(module_name, module))
            prefix = module_name + "."
        for name in module.__all__:
            value = getattr(module, name)
            if id(value) not in seen or prefix:
                seen.add(id(value))
                entries.append(_ApiEntry(prefix + name, value))
    return entries


def _indented(doc: str | None) -> list[str]:
    if not doc:
        return []
    return [f"    {line}" if line.strip() else "" for line in inspect.cleandoc(doc).splitlines()]


def _doc_after_summary(doc: str | None) -> str | None:
    """A docstring without its first paragraph when that paragraph is only the summary
    (which the entry's header line already shows)."""
    if not doc:
        return None
    cleaned = inspect.cleandoc(doc)
    first, _, rest = cleaned.partition("\n\n")
    if " ".join(first.split()) == summary(doc):
        return rest.strip("\n") or None
    return cleaned


def _entry_lines(entry: _ApiEntry, *, full: bool) -> list[str]:
    value = entry.value
    documented = _documented(value)
    doc = getattr(value, "__doc__", None) if documented else None
    lines = [f"- {entry.name} — {summary(doc)}"]
    if full:
        lines.extend(_indented(_doc_after_summary(doc)))
    members: list[tuple[str | None, str]]
    if isinstance(value, types.ModuleType):
        members = [
            (None, f"{name} — {summary(getattr(getattr(value, name), '__doc__', None))}")
            for name in value.__all__
        ]
    elif isinstance(value, type) and documented:
        members = _member_lines(value)
    elif inspect.isfunction(value) and documented:
        members = [(None, signature_line(value, entry.name.rpartition(".")[2], drop_self=False))]
    else:
        members = [(None, f"{entry.name.rpartition('.')[2]} = {_format_value(value)}")]
    for member_doc, line in members:
        if full:
            lines.extend(_indented(member_doc))
        lines.append("    " + line)
    return lines


def _documented(value: object) -> bool:
    # A constant's ``__doc__`` is its type's (an enum member, a string): not its own; an
    # alias of a foreign type (``JsonValue`` is ``typing.Any``) is a constant too.
    if isinstance(value, types.ModuleType):
        return True
    special = getattr(value, "__module__", None) == "typing"
    return not special and (isinstance(value, type) or inspect.isfunction(value))


def _api_lines(name: str | None) -> list[str]:
    entries = _catalogue()
    if name is not None:
        found = [entry for entry in entries if entry.name == name]
        if not found:
            # A submodule's names are catalogued dotted: point at them by their last part.
            dotted = [entry.name for entry in entries if entry.name.endswith("." + name)]
            hint = "".join(f'; did you mean "{other}"?' for other in dotted)
            raise UnknownEntryError(f'no catalogued api entry named "{name}"{hint}')
        entries = found
    lines = ["## api"]
    for entry in entries:
        lines.extend(_entry_lines(entry, full=name is not None))
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
            lines.extend(_indented(_doc_after_summary(doc)))
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

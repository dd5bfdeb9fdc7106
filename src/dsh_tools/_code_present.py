"""Code Mode's presentation: the modes, ``present_as``, the effective mode and the collapse.

A runtime presents its tools to a model natively (one schema per tool), in Code Mode (one
``run_code`` tool whose programs call the others through an SDK) or both. The runtime-wide
mode is the constructor's; a scope may declare its own with ``scope.present_as``, inherited
by its descendants. The shared ``run_code`` definition lives in no layer: it is visible
exactly where the effective mode is ``CODE`` or ``BOTH`` (code-mode §2).

This module sits below the registry (which asks it for the effective mode when it resolves
``run_code``), so it imports none of the registry, scope or runtime modules.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final, final

import attrs

from ._code_values import require_code_runtime
from ._definition import ExecutionMode, classify
from ._errors import ToolNotFoundError
from ._results import ToolResult, error_result

if TYPE_CHECKING:
    from ._calls import ToolCall
    from ._code_values import CodeRuntime
    from ._disposer import Disposer
    from ._registry import Registry
    from ._runtime import ToolRuntime
    from ._scope import Scope

__all__ = [
    "CODE_ONLY_RULE",
    "RUN_CODE_NAME",
    "CodeModePrompt",
    "PresentationMode",
    "check_code_runtime",
    "classify_call",
    "coerce_mode",
    "collapse_result",
    "collapses",
    "effective_mode",
    "present_as",
]

#: The reserved name of Code Mode's one tool.
RUN_CODE_NAME: Final = "run_code"

#: The code-only rule a ``CODE`` prompt starts with (code-mode §2.6).
CODE_ONLY_RULE: Final = (
    "`run_code` is the only tool you can call directly — a tool call naming any other tool "
    "fails. Reach every tool the SDK declares below from inside the program."
)


class PresentationMode(enum.StrEnum):
    """How a runtime (or a scope) presents its tools to the model.

    ``NATIVE``: one schema per visible tool, no ``run_code``. ``CODE``: only the ``run_code``
    schema, and a model's direct call to any other tool fails before any policy runs.
    ``BOTH``: every visible tool's schema, then ``run_code``. Wherever a mode is accepted,
    the member's value (``"native"``, ``"code"``, ``"both"``) is accepted too.

    Example:
        >>> PresentationMode("code") is PresentationMode.CODE
        True
    """

    NATIVE = "native"
    CODE = "code"
    BOTH = "both"


_NATIVE: Final = PresentationMode.NATIVE
_CODE: Final = PresentationMode.CODE
_BAD_MODE: Final = 'mode must be one of "native", "code", "both"'


def coerce_mode(value: object) -> PresentationMode:
    """A :class:`PresentationMode` as is, a ``str`` as the member of that value.

    Raises:
        ValueError: a ``str`` that is no member's value.
        TypeError: anything else.
    """
    if isinstance(value, PresentationMode):
        return value
    if isinstance(value, str):
        try:
            return PresentationMode(value)
        except ValueError:
            raise ValueError(_BAD_MODE) from None
    raise TypeError(f"mode must be a PresentationMode, got {type(value).__name__}")


def effective_mode(registry: Registry, scope: Scope | None) -> PresentationMode:
    """The mode declared on the nearest of ``scope`` and its ancestors, else the runtime's.

    O(1) while no scope of the runtime holds a declaration; O(chain depth) otherwise.
    """
    if scope is not None and registry.declarations:
        for owner in scope._chain_nearest_first:
            mode = owner.presentation
            if mode is not None:
                return mode
    return registry.mode


def collapses(registry: Registry, name: str, scope: Scope | None) -> bool:
    """Whether a top-level call of ``name`` from ``scope`` is collapsed (code-mode §2.5).

    The caller checks that the call has no parent: nested calls are never collapsed.
    """
    return name != RUN_CODE_NAME and effective_mode(registry, scope) is _CODE


def classify_call(registry: Registry, call: ToolCall) -> ExecutionMode:
    """The execution mode of ``call`` (``ToolRuntime.execution_mode`` once its arguments are
    checked): ``EXCLUSIVE`` for a top-level call that Code Mode collapses, else the
    classification of the tool visible now."""
    scope = call.scope
    if (
        call.parent is None
        and (registry.declarations or registry.mode is _CODE)
        and collapses(registry, call.name, scope)
    ):
        # A model-direct call under CODE fails alone, like a barrier (code-mode §2.4).
        return ExecutionMode.EXCLUSIVE
    return classify(registry.resolve(call.name, scope), call.arguments)


def collapse_result(name: str) -> ToolResult:
    """The ``UNKNOWN_TOOL`` result of a collapsed call of ``name``."""
    return error_result(
        ToolNotFoundError(
            name,
            f"only `run_code` is callable directly — call `{name}` from inside a `run_code` "
            "program instead",
        )
    )


def present_as(scope: Scope, mode: object) -> Disposer:
    """``scope.present_as(mode)``: declare this scope's presentation (code-mode §2.3).

    Raises:
        RuntimeError: the scope is closed.
        TypeError: ``mode`` is neither a ``PresentationMode`` nor a ``str``.
        ValueError: ``mode`` is no mode's value, or the scope already has a declaration.
    """
    if scope.closed:
        raise RuntimeError("scope is closed")
    new = coerce_mode(mode)
    owner = scope._owner
    old = owner.presentation
    if old is not None:
        raise ValueError(
            f'scope.present_as("{new.value}") conflicts with "{old.value}" already declared '
            "for this scope; one composition selects one presentation"
        )
    registry = scope._registry

    def do() -> None:
        owner.presentation = new
        registry.declarations += 1

    def undo() -> None:
        owner.presentation = None
        registry.declarations -= 1

    return registry.apply_change(do, undo, scope._registrations)


def check_code_runtime(runtime: ToolRuntime, mode: PresentationMode) -> CodeRuntime:
    """The code runtime check (code-mode §2.7) for a scope whose effective mode is ``mode``.

    Returns:
        The runtime's code runtime, checked.

    Raises:
        RuntimeError: no code runtime, or one whose language has no SDK renderer.
        TypeError: ``runtime.code_runtime`` is not a valid code runtime.
    """
    code_runtime = runtime.code_runtime
    if code_runtime is None:
        raise RuntimeError(
            f'mode "{mode.value}" requires a code runtime: pass code_runtime= to ToolRuntime, '
            "or present the tools natively"
        )
    require_code_runtime(code_runtime)
    language = code_runtime.language
    if language != "python":
        raise RuntimeError(
            f'no SDK renderer for code runtime language "{language}" (known: "python")'
        )
    return code_runtime


@final
@attrs.frozen(kw_only=True)
class CodeModePrompt:
    """The Code Mode parts of a system prompt, from ``runtime.code_mode_prompt(scope)``.

    Args:
        rule: The code-only rule under ``CODE``, else ``""``: put it before the per-tool
            guidance of the prompt.
        sdk: The Python SDK declaring the tools a program can call, under ``CODE`` and
            ``BOTH``, else ``""``: put it after that guidance.

    Example:
        >>> CodeModePrompt(rule="r", sdk="s").text
        'r\\n\\ns'
        >>> CodeModePrompt(rule="", sdk="").text
        ''
    """

    rule: str
    sdk: str

    @property
    def text(self) -> str:
        """The non-empty parts, the rule first, joined by a blank line; ``""`` if none."""
        return "\n\n".join(part for part in (self.rule, self.sdk) if part)


_NO_PROMPT: Final = CodeModePrompt(rule="", sdk="")


def code_mode_prompt(runtime: ToolRuntime, scope: Scope | None) -> CodeModePrompt:
    """The body of ``runtime.code_mode_prompt`` once ``scope`` is checked (code-mode §2.6)."""
    registry = runtime._registry
    mode = effective_mode(registry, scope)
    if mode is _NATIVE:
        return _NO_PROMPT
    check_code_runtime(runtime, mode)
    # Imported here: the renderer imports the registry, which imports this module.
    from ._code_sdk import render_python_sdk

    # The view holds no run_code: it lives in no layer.
    sdk = render_python_sdk(registry.visible(scope))
    return CodeModePrompt(rule=CODE_ONLY_RULE if mode is _CODE else "", sdk=sdk)

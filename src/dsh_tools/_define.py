"""``define_tool``: a tool definition whose arguments are validated (runtime.md §12.3)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import attrs

from ._definition import Output, ToolDefinition, check_timeout
from ._errors import JsonSchemaError, ToolArgsError
from ._json import FrozenDict, freeze_json
from ._schema_check import assert_supported_json_schema
from ._schema_validate import CompiledSchema
from ._sync_body import async_body

if TYPE_CHECKING:
    from ._calls import ToolExecution, ToolRunContext
    from ._content import ContentBlock
    from ._results import ToolResult

__all__ = ["build_validating_tool", "define_tool"]

_OBJECT_ROOT = '#: parameters must have "type": "object"'

Execute = Callable[[FrozenDict, "ToolRunContext"], Awaitable[object]]
#: What ``define_tool`` takes: an ``async def`` body or a plain ``def`` one.
AnyExecute = Callable[[FrozenDict, "ToolRunContext"], object]
Classifier = bool | Callable[[FrozenDict], object]
FinalizeContent = Callable[["ToolExecution", "ToolResult"], "Sequence[ContentBlock] | None"]


def define_tool(
    *,
    name: str,
    description: str,
    parameters: Any,
    output: Output,
    execute: AnyExecute,
    timeout: float | None = None,
    is_concurrency_safe: Classifier = False,
    finalize_content: FinalizeContent | None = None,
    present_call: Callable[[FrozenDict], object] | None = None,
    present_result: Callable[[FrozenDict, ToolResult], object] | None = None,
    blocking: bool | None = None,
) -> ToolDefinition:
    """Build a :class:`ToolDefinition` whose arguments are validated against ``parameters``.

    The definition's ``execute`` validates the frozen arguments with ``validate_args`` and
    raises :class:`ToolArgsError` (code ``INVALID_ARGS``) before the user function runs; a
    valid call passes the frozen arguments through unchanged. ``parameters`` is frozen and
    compiled once, here. A callable ``is_concurrency_safe``, ``present_call`` and
    ``present_result`` only see valid, frozen arguments: for invalid ones they give
    ``False`` / ``None`` without calling the user function. ``is_concurrency_safe=True``
    classifies every call as ``PARALLEL`` without validating it.

    Args:
        name: The tool name.
        description: Shown to the model.
        parameters: A JSON Schema of the supported subset with ``"type": "object"`` at the
            root.
        output: The :class:`Output` declaration.
        execute: ``async execute(arguments, ctx)`` with the validated, frozen arguments,
            or a plain ``def execute(arguments, ctx)`` (see ``blocking``).
        timeout: Seconds, enforced by the timeout policy; positive and finite.
        is_concurrency_safe: ``True``, ``False`` or a classifier over the valid arguments.
        finalize_content: As for :class:`ToolDefinition`.
        present_call: Optional ``present_call(arguments)`` for a UI.
        present_result: Optional ``present_result(arguments, result)`` for a UI.
        blocking: For a plain ``def`` only: ``False`` calls it inline, in the trio thread
            (it must never block; nothing can interrupt it); otherwise (the default) it runs
            in a worker thread the call always waits for, as for ``@tool``.

    Returns:
        The definition, ready to register.

    Raises:
        TypeError: ``timeout`` is not a number, ``blocking`` is given for something that
            is not a plain ``def``, or a :class:`ToolDefinition` check failed.
        ValueError: ``define_tool(<name>): timeout must be a positive finite number``.
        JsonSchemaError: ``parameters`` is unsupported or has no object root
            (``#: parameters must have "type": "object"``).

    Example:
        >>> async def upper(args, ctx):
        ...     return args["text"].upper()
        >>> shout = define_tool(
        ...     name="shout",
        ...     description="Upper-case a text.",
        ...     parameters={
        ...         "type": "object",
        ...         "properties": {"text": {"type": "string"}},
        ...         "required": ["text"],
        ...     },
        ...     output=Output(schema={"type": "string"}, render=lambda a, v: [TextContent(v)]),
        ...     execute=upper,
        ... )  # doctest: +SKIP
    """
    label = f"define_tool({name})"
    body = async_body(label, execute, blocking)
    return build_validating_tool(
        label=label,
        name=name,
        description=description,
        parameters=parameters,
        output=output,
        # Any other callable is checked, and reported, by ToolDefinition as before.
        execute=cast("Execute", execute) if body is None else body,
        timeout=timeout,
        is_concurrency_safe=is_concurrency_safe,
        finalize_content=finalize_content,
        present_call=present_call,
        present_result=present_result,
    )


def build_validating_tool(
    *,
    label: str,
    name: str,
    description: str,
    parameters: Any,
    output: Output,
    execute: Execute,
    timeout: float | None,
    is_concurrency_safe: Classifier,
    finalize_content: FinalizeContent | None,
    present_call: Callable[[FrozenDict], object] | None,
    present_result: Callable[[FrozenDict, ToolResult], object] | None,
    checked_execute: Callable[[CompiledSchema], Execute] | None = None,
) -> ToolDefinition:
    """The body of :func:`define_tool`; ``label`` prefixes the timeout message (``@tool``).

    With ``checked_execute``, the pipeline awaits ``checked_execute(validator)`` and does not
    validate first: that body validates the arguments itself, as its first step, whenever it
    has not proved them valid on its own (``@tool``'s compiled plans).
    """
    check_timeout(timeout, f"{label}: timeout")
    problems: list[str] = []
    try:
        assert_supported_json_schema(parameters)
    except JsonSchemaError as exc:
        problems.extend(exc.violations)
    if isinstance(parameters, dict) and parameters.get("type") != "object":
        problems.insert(0, _OBJECT_ROOT)
    if problems:
        raise JsonSchemaError(problems)
    frozen_parameters = freeze_json(parameters)
    validator = CompiledSchema(frozen_parameters)
    # Build with the user's own callables first, so that every ToolDefinition check runs in
    # its documented order against what the user passed; then swap in the validating
    # wrappers (the checks run again and pass).
    plain = ToolDefinition(
        name=name,
        description=description,
        parameters=frozen_parameters,
        output=output,
        execute=execute,
        finalize_content=finalize_content,
        timeout=timeout,
        is_concurrency_safe=is_concurrency_safe,
        present_call=present_call,
        present_result=present_result,
    )
    validating = attrs.evolve(
        plain,
        execute=_validating_execute(validator, execute),
        is_concurrency_safe=(
            is_concurrency_safe
            if type(is_concurrency_safe) is bool
            else _soft_classifier(validator, is_concurrency_safe)
        ),
        present_call=None if present_call is None else _soft_present_call(validator, present_call),
        present_result=(
            None if present_result is None else _soft_present_result(validator, present_result)
        ),
    )
    if checked_execute is not None:
        return validating._with_validation(None, checked_execute(validator))
    # The pipeline runs the two steps itself: it validates, then awaits the user's body.
    return validating._with_validation(validator, execute)


def _validating_execute(validator: CompiledSchema, execute: Execute) -> Execute:
    # The public ``execute`` of a validating definition, for a caller that awaits it
    # directly; the pipeline's body step validates the same way, then awaits ``execute``.
    async def validated(arguments: FrozenDict, ctx: ToolRunContext) -> object:
        violations = validator.validate_frozen(arguments, "")
        if violations:
            raise ToolArgsError(violations)
        return await execute(arguments, ctx)

    return validated


def _valid_arguments(validator: CompiledSchema, arguments: object) -> FrozenDict | None:
    """The frozen arguments when they are valid, else ``None`` (never raises)."""
    try:
        frozen = freeze_json(arguments)
    except TypeError:
        return None
    if not validator.is_valid(frozen):
        return None
    return frozen  # type: ignore[no-any-return]


def _soft_classifier(
    validator: CompiledSchema, fn: Callable[[FrozenDict], object]
) -> Callable[[object], object]:
    def is_concurrency_safe(arguments: object) -> object:
        valid = _valid_arguments(validator, arguments)
        return False if valid is None else fn(valid)

    return is_concurrency_safe


def _soft_present_call(
    validator: CompiledSchema, fn: Callable[[FrozenDict], object]
) -> Callable[[object], object]:
    def present_call(arguments: object) -> object:
        valid = _valid_arguments(validator, arguments)
        return None if valid is None else fn(valid)

    return present_call


def _soft_present_result(
    validator: CompiledSchema, fn: Callable[[FrozenDict, ToolResult], object]
) -> Callable[[object, ToolResult], object]:
    def present_result(arguments: object, result: ToolResult) -> object:
        valid = _valid_arguments(validator, arguments)
        return None if valid is None else fn(valid, result)

    return present_result

"""Tool definitions: ``Output``, ``ToolDefinition``, ``ToolSchema`` and ``ExecutionMode``."""

from __future__ import annotations

import enum
import inspect
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, final

import attrs

from ._content import ContentBlock
from ._json import JsonValue, freeze_json
from ._results import ToolResult
from ._schema_validate import CompiledSchema

if TYPE_CHECKING:
    # Type-only: _calls imports the scope machinery, which imports this module.
    from ._calls import ToolExecution, ToolRunContext  # noqa: TC004 - a cycle; never structured

__all__ = ["ExecutionMode", "Output", "ToolDefinition", "ToolSchema", "classify"]

logger = logging.getLogger("dsh_tools")


class ExecutionMode(enum.Enum):
    """How the scheduler may run a call: alongside others, or alone as a barrier."""

    PARALLEL = "parallel"
    EXCLUSIVE = "exclusive"


def _freeze_schema(schema: object) -> JsonValue:
    return freeze_json(schema)


@final
@attrs.frozen(kw_only=True)
class Output:
    """What a tool returns: the value's JSON Schema and how it is shown.

    Args:
        schema: A JSON Schema in the supported subset (runtime.md §12.1), any root; frozen.
        render: ``render(args, value)`` returns the result's content blocks.
        presentation_meta: Optional ``presentation_meta(args, value)`` returning the result's
            ``meta`` (``None`` for none).

    Raises:
        TypeError: ``output.render must be callable`` or
            ``output.presentation_meta must be callable or None``.
        JsonSchemaError: the schema is outside the supported subset.
    """

    schema: JsonValue = attrs.field(converter=_freeze_schema)
    render: Callable[[JsonValue, JsonValue], Sequence[ContentBlock]]
    presentation_meta: Callable[[JsonValue, JsonValue], JsonValue] | None = None
    # Compiled once here, so that validating a value per call walks no schema.
    _validator: CompiledSchema = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        if not callable(self.render):
            raise TypeError("output.render must be callable")
        if self.presentation_meta is not None and not callable(self.presentation_meta):
            raise TypeError("output.presentation_meta must be callable or None")
        object.__setattr__(self, "_validator", CompiledSchema(self.schema))


_OPTIONAL_CALLABLES = ("finalize_content", "present_call", "present_result")


@final
@attrs.frozen(kw_only=True, eq=False)
class ToolDefinition:
    """A tool: its name, description, parameters schema, output and body.

    A raw ``ToolDefinition`` is the "MCP-style" form: the runtime does not validate its
    arguments (``define_tool`` and ``@tool`` build definitions that do). Definitions have
    identity semantics.

    Args:
        name: The tool's name (unique within a layer; ``run_code`` is reserved).
        description: Shown to the model.
        parameters: The arguments' JSON Schema, kept exactly as given; checked and copied only
            when ``schemas()`` projects it.
        output: The :class:`Output` declaration.
        execute: ``async execute(arguments, ctx)``: the body.
        finalize_content: Optional ``fn(execution, result)`` returning replacement content
            blocks or ``None``; called exactly once per execution (stage 4).
        timeout: Seconds, enforced only by the timeout policy; positive and finite.
        is_concurrency_safe: ``True``, ``False`` or a classifier over the raw arguments.
        present_call: Optional presenter of a call for a UI.
        present_result: Optional presenter of a result for a UI.

    Raises:
        TypeError: a field of the wrong type (the message names the tool and the field).
        ValueError: ``timeout`` is not positive and finite.
    """

    name: str
    description: str
    parameters: JsonValue
    output: Output
    execute: Callable[[JsonValue, ToolRunContext], Awaitable[object]]
    finalize_content: (
        Callable[[ToolExecution, ToolResult], Sequence[ContentBlock] | None] | None
    ) = None
    timeout: float | None = None
    is_concurrency_safe: bool | Callable[[Any], object] = False
    present_call: Callable[[Any], object] | None = None
    present_result: Callable[[Any, ToolResult], object] | None = None
    # What the pipeline's body step runs for this tool: the compiled parameters schema it
    # validates the arguments against just before the body (``None``: no validation), and
    # the body. A raw definition validates nothing and its body is ``execute``;
    # ``define_tool``/``@tool`` set both (their public ``execute`` still validates, for a
    # caller that awaits it directly).
    _arguments_schema: CompiledSchema | None = attrs.field(init=False, default=None, repr=False)
    _body: Callable[[Any, ToolRunContext], Awaitable[object]] = attrs.field(init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        name = self.name
        if type(name) is not str:
            raise TypeError("tool name must be a str")
        if type(self.description) is not str:
            raise TypeError(f'tool "{name}" description must be a str')
        if type(self.output) is not Output:
            raise TypeError(
                f'tool "{name}" must declare output=Output(schema, render, presentation_meta=None)'
            )
        if not callable(self.execute):
            raise TypeError(f'tool "{name}" execute must be callable')
        for field in _OPTIONAL_CALLABLES:
            value = getattr(self, field)
            if value is not None and not callable(value):
                raise TypeError(f'tool "{name}" {field} must be callable or None')
        safe = self.is_concurrency_safe
        if type(safe) is not bool and not callable(safe):
            raise TypeError(f'tool "{name}" is_concurrency_safe must be a bool or callable')
        timeout = check_timeout(self.timeout, f'tool "{name}" timeout')
        object.__setattr__(self, "timeout", timeout)
        object.__setattr__(self, "_body", self.execute)

    def _with_validation(
        self,
        arguments_schema: CompiledSchema | None,
        body: Callable[[Any, ToolRunContext], Awaitable[object]],
    ) -> ToolDefinition:
        # define_tool/@tool: the pipeline validates against ``arguments_schema`` (unless
        # ``None``: ``body`` then validates itself), then awaits ``body`` (no wrapper frame
        # around the body).
        object.__setattr__(self, "_arguments_schema", arguments_schema)
        object.__setattr__(self, "_body", body)
        return self


def check_timeout(timeout: object, label: str) -> float | None:
    """Validate a timeout in seconds; return it as a ``float`` (or ``None``).

    Raises:
        TypeError: not ``None``, an ``int`` or a ``float`` (bools rejected).
        ValueError: not positive and finite.
    """
    if timeout is None:
        return None
    message = f"{label} must be a positive finite number"
    if type(timeout) is not int and type(timeout) is not float:
        raise TypeError(message)
    try:
        value = float(timeout)
    except OverflowError:  # an int beyond any float: not finite
        raise ValueError(message) from None
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(message)
    return value


@final
@attrs.frozen(kw_only=True)
class ToolSchema:
    """What the model sees of a tool: ``name``, ``description`` and ``parameters``.

    ``parameters`` is a fresh plain copy on every ``schemas()`` call.
    """

    name: str
    description: str
    parameters: Any

    def to_json(self) -> dict[str, Any]:
        """Return ``{"name", "description", "parameters"}``."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


# Module constants: an enum member read from its class is a slow attribute lookup, and
# every call is classified.
_PARALLEL: Final = ExecutionMode.PARALLEL
_EXCLUSIVE: Final = ExecutionMode.EXCLUSIVE


def classify(defn: ToolDefinition | None, arguments: object) -> ExecutionMode:
    """The execution mode of a call to ``defn`` (runtime.md §10). Never raises."""
    if defn is None:
        return _EXCLUSIVE
    safe = defn.is_concurrency_safe
    if safe is True:
        return _PARALLEL
    if safe is False:
        return _EXCLUSIVE
    try:
        verdict = safe(arguments)
    except Exception:
        logger.debug("is_concurrency_safe of tool %r raised", defn.name, exc_info=True)
        return _EXCLUSIVE
    if verdict is True:
        return _PARALLEL
    close_awaitable(verdict)
    return _EXCLUSIVE


def close_awaitable(value: object) -> None:
    """Close an awaitable that will never be awaited (a coroutine warns otherwise)."""
    if inspect.isawaitable(value):
        close = getattr(value, "close", None)
        if callable(close):
            close()

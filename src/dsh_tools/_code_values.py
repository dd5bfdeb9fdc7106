"""The values of Code Mode's code-runtime protocol: limits, outcomes and the call error.

A *code runtime* runs one program a model wrote; every tool call the program makes goes
through the :data:`Dispatch` it is given. These are the plain values both sides agree on.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final, Protocol, TypeAlias

import attrs

from ._code_program import ToolCallError
from ._decisions import UNSET
from ._json import FrozenDict, JsonValue, freeze_json

__all__ = [
    "CODE_MODE_SOURCE",
    "CodeRunLimits",
    "CodeRunOutcome",
    "CodeRuntime",
    "Dispatch",
    "ToolCallError",
    "is_valid_code_runtime",
    "require_code_limits",
    "require_code_runtime",
]

#: The ``source`` of the image messages Code Mode defers for sub-call results with images.
CODE_MODE_SOURCE: Final = FrozenDict({"kind": "plugin", "plugin": "tools-code-mode"})

Dispatch: TypeAlias = Callable[[str, object], Awaitable[JsonValue]]
"""``await dispatch(name, args)``: submit one tool call of the program and wait for its value.

Raises :class:`ToolCallError` when the call is refused or fails.
"""


def _positive_seconds(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    message = f"CodeRunLimits.{attribute.name} must be a positive finite number"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(message)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(message)


def _positive_int(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    message = f"CodeRunLimits.{attribute.name} must be a positive integer"
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(message)
    if value < 1:
        raise ValueError(message)


def _as_float(value: float) -> float:
    # Runs before the validator; a non-number is left alone for it to refuse.
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            return math.inf
    return value


@attrs.frozen(kw_only=True)
class CodeRunLimits:
    """What one Code Mode run may use.

    Which runtime enforces which limit: ``cpu_seconds`` and ``memory_bytes`` only the WASI
    sandbox; ``wall_seconds`` and ``output_bytes`` both shipped runtimes; ``max_sub_calls`` the
    sub-call lane, for every runtime. A run that goes over a limit fails with
    ``CODE_RUN_FAILED`` and the limit's kind (``timeout``, ``memory``, ``output-limit``), or,
    for ``max_sub_calls``, its next tool call raises ``ToolCallError`` in the program.

    Attributes:
        cpu_seconds: The program's CPU budget (default 10). The sandbox counts it in
            wasmtime *fuel*, which is deterministic (a program stops at the same instruction
            every time) but only approximates seconds: on the machines measured, one
            second of budget was 0.45–1.0 s of real CPU, depending on what the program does.
            A fixed start-up allowance comes on top, so ``return 1`` never runs out.
        wall_seconds: Seconds from the program's start to its end, its tool calls included
            (default 300).
        memory_bytes: The sandbox's memory (default 256 MiB); an allocation beyond it raises
            ``MemoryError`` in the program, which may catch it.
        output_bytes: UTF-8 bytes of printed output kept (default 1 MiB); printing more fails
            the run with kind ``output-limit``, even if the program catches the error.
        max_sub_calls: Tool calls accepted per run (default 1000).

    Example:
        >>> CodeRunLimits(wall_seconds=5).wall_seconds
        5.0
        >>> CodeRunLimits(max_sub_calls=0)
        Traceback (most recent call last):
        ...
        ValueError: CodeRunLimits.max_sub_calls must be a positive integer
    """

    cpu_seconds: float = attrs.field(default=10.0, converter=_as_float, validator=_positive_seconds)
    wall_seconds: float = attrs.field(
        default=300.0, converter=_as_float, validator=_positive_seconds
    )
    memory_bytes: int = attrs.field(default=268_435_456, validator=_positive_int)
    output_bytes: int = attrs.field(default=1_048_576, validator=_positive_int)
    max_sub_calls: int = attrs.field(default=1000, validator=_positive_int)


def _as_logs(value: object) -> tuple[str, ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise TypeError("CodeRunOutcome.logs must be a sequence of str")
    logs = tuple(value)
    if not all(type(line) is str for line in logs):
        raise TypeError("CodeRunOutcome.logs must be a sequence of str")
    return logs


def _as_result(value: object) -> JsonValue:
    return value if value is UNSET else freeze_json(value)


@attrs.frozen(kw_only=True)
class CodeRunOutcome:
    """What a finished program produced: its printed lines and its return value.

    ``result`` is :data:`~dsh_tools.UNSET` when the program returned nothing (or ``None``);
    any other value is frozen as lossless JSON.

    Example:
        >>> CodeRunOutcome(logs=["hi"], result=[1, 2])
        CodeRunOutcome(logs=('hi',), result=(1, 2))
    """

    logs: tuple[str, ...] = attrs.field(default=(), converter=_as_logs)
    result: JsonValue = attrs.field(default=UNSET, converter=_as_result)


class CodeRuntime(Protocol):
    """Runs one program a model wrote, by the contract below (code-mode §7.1).

    ``run`` calls ``dispatch`` once per tool call of the program, from a trio task of the
    caller's run; returns a :class:`CodeRunOutcome`, or raises
    :class:`~dsh_tools.CodeRunFailedError` built with ``for_run``; returns only after the
    program has stopped; on cancellation, stops the program and lets ``Cancelled`` propagate.
    """

    @property
    def language(self) -> str:
        """The language of the programs this runtime runs; ``"python"``."""
        ...

    async def run(
        self,
        code: str,
        *,
        tools: tuple[str, ...],
        dispatch: Dispatch,
        limits: CodeRunLimits,
    ) -> CodeRunOutcome:
        """Run ``code`` with the tools named in ``tools`` bound; see the class docstring."""
        ...


def is_valid_code_runtime(obj: object) -> bool:
    """Whether ``obj`` has a ``str`` ``language`` and a coroutine-function ``run``."""
    try:
        language = obj.language  # type: ignore[attr-defined]
        run = obj.run  # type: ignore[attr-defined]
    except Exception:
        return False
    return isinstance(language, str) and inspect.iscoroutinefunction(run)


def require_code_runtime(obj: object) -> None:
    """Raise the one ``TypeError`` for an object that is not a valid code runtime."""
    if not is_valid_code_runtime(obj):
        raise TypeError("code_runtime must provide language: str and async run()")


def require_code_limits(value: object) -> CodeRunLimits:
    """Return ``value`` if it is a :class:`CodeRunLimits`, else raise the one ``TypeError``."""
    if not isinstance(value, CodeRunLimits):
        raise TypeError(f"code_limits must be a CodeRunLimits, got {type(value).__name__}")
    return value

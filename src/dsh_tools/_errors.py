"""The error hierarchy, the stable error codes and exception normalization."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final

from ._json import is_lossless_str

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "ABORTED",
    "ABORTED_BEFORE_DISPATCH",
    "CODE_RUN_FAILED",
    "INVALID_ARGS",
    "INVALID_TOOL_OUTPUT",
    "TOOL_DENIED",
    "TOOL_TIMEOUT",
    "UNKNOWN_TOOL",
    "AbortError",
    "CodeRunFailedError",
    "CodeRunFailureKind",
    "ErrorCode",
    "HarnessError",
    "JsonSchemaError",
    "ToolArgsError",
    "ToolDeniedError",
    "ToolNotFoundError",
    "ToolOutputError",
    "ToolTimeoutError",
    "normalize_message",
]


class ErrorCode(enum.StrEnum):
    """The stable error codes the library itself produces.

    Codes of user :class:`HarnessError` instances are free-form strings; these eight are the
    ones a caller can rely on from the runtime, the scheduler and the policies.
    """

    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    INVALID_ARGS = "INVALID_ARGS"
    INVALID_TOOL_OUTPUT = "INVALID_TOOL_OUTPUT"
    TOOL_TIMEOUT = "TOOL_TIMEOUT"
    ABORTED = "ABORTED"
    ABORTED_BEFORE_DISPATCH = "ABORTED_BEFORE_DISPATCH"
    TOOL_DENIED = "TOOL_DENIED"
    CODE_RUN_FAILED = "CODE_RUN_FAILED"


UNKNOWN_TOOL: Final = ErrorCode.UNKNOWN_TOOL
INVALID_ARGS: Final = ErrorCode.INVALID_ARGS
INVALID_TOOL_OUTPUT: Final = ErrorCode.INVALID_TOOL_OUTPUT
TOOL_TIMEOUT: Final = ErrorCode.TOOL_TIMEOUT
ABORTED: Final = ErrorCode.ABORTED
ABORTED_BEFORE_DISPATCH: Final = ErrorCode.ABORTED_BEFORE_DISPATCH
TOOL_DENIED: Final = ErrorCode.TOOL_DENIED
CODE_RUN_FAILED: Final = ErrorCode.CODE_RUN_FAILED


class HarnessError(Exception):
    """The root of every error with a stable code.

    Raise it (or a subclass) from a tool body, a hook or a policy to fail a call with a
    machine-readable code: the result's ``error.info`` becomes
    ``ErrorInfo(<class name>, code)``. ``str(exc)`` is the message.

    Args:
        message: The human-readable message.
        code: A stable, machine-readable code (free-form for user errors).

    Example:
        >>> raise HarnessError("disk full", "ENOSPC")  # doctest: +SKIP
    """

    code: str

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message, code)
        self.code = code

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class ToolNotFoundError(HarnessError):
    """Raised when no visible tool has the requested name (code ``UNKNOWN_TOOL``)."""

    def __init__(self, tool_name: str, reachable_from: str | None = None) -> None:
        msg = f'unknown tool "{tool_name}"'
        if reachable_from is not None:
            msg = f"{msg}: {reachable_from}"
        Exception.__init__(self, tool_name, reachable_from)
        self.code = ErrorCode.UNKNOWN_TOOL
        self.tool_name = tool_name
        self.reachable_from = reachable_from
        self._message = msg

    def __str__(self) -> str:
        return self._message


class ToolArgsError(HarnessError):
    """Raised when a call's arguments fail validation (code ``INVALID_ARGS``).

    ``violations`` holds every violation, in the validator's order.
    """

    def __init__(self, violations: Iterable[str]) -> None:
        self.violations: tuple[str, ...] = tuple(violations)
        Exception.__init__(self, self.violations)
        self.code = ErrorCode.INVALID_ARGS

    def __str__(self) -> str:
        return "invalid arguments: " + "; ".join(self.violations)


class ToolOutputError(HarnessError):
    """Raised when a tool's value or its rendering is invalid (code ``INVALID_TOOL_OUTPUT``)."""

    def __init__(self, tool_name: str, violations: Iterable[str]) -> None:
        self.tool_name = tool_name
        self.violations: tuple[str, ...] = tuple(violations)
        Exception.__init__(self, tool_name, self.violations)
        self.code = ErrorCode.INVALID_TOOL_OUTPUT

    def __str__(self) -> str:
        return f'tool "{self.tool_name}" returned invalid output: ' + "; ".join(self.violations)


class ToolTimeoutError(HarnessError):
    """Raised by the timeout policy when a call's own deadline fired (code ``TOOL_TIMEOUT``)."""

    def __init__(self, timeout: float) -> None:
        """Record the budget that ran out.

        Args:
            timeout: The budget in seconds that ran out: an ``int`` or a ``float``.

        Raises:
            TypeError: ``timeout`` is not an ``int`` or a ``float`` (bools refused), or
                too large for a float, so that ``str()`` of the error cannot fail later.
        """
        if type(timeout) is not int and type(timeout) is not float:
            raise TypeError(
                f"ToolTimeoutError timeout must be an int or a float, got {type(timeout).__name__}"
            )
        try:
            float(timeout)
        except OverflowError:
            raise TypeError("ToolTimeoutError timeout is too large for a float") from None
        self.timeout = timeout
        Exception.__init__(self, timeout)
        self.code = ErrorCode.TOOL_TIMEOUT

    def __str__(self) -> str:
        return f"tool call timed out after {float(self.timeout)!r}s"


_ABORT_MESSAGES: Final = {
    ErrorCode.ABORTED: "tool call aborted",
    ErrorCode.ABORTED_BEFORE_DISPATCH: "tool call aborted before dispatch",
}


class AbortError(HarnessError):
    """A call was aborted: ``ABORTED`` (its body had started) or ``ABORTED_BEFORE_DISPATCH``.

    When ``reason`` is a non-empty ``str`` it is appended to the message after ``": "``, so
    a model learns why its call was cut short; any other reason (``None``, ``""``, an
    object, or text with a lone surrogate, which no result may carry) leaves the message as
    it is. ``.reason`` holds the reason as given.

    Example:
        >>> str(AbortError("ABORTED", "turn timeout after 30 s"))
        'tool call aborted: turn timeout after 30 s'
        >>> str(AbortError("ABORTED_BEFORE_DISPATCH", ValueError("x")))
        'tool call aborted before dispatch'

    Raises:
        ValueError: for any other code.
    """

    def __init__(self, code: str, reason: object = None) -> None:
        try:
            message = _ABORT_MESSAGES[code]  # type: ignore[index]
        except (KeyError, TypeError):
            raise ValueError(
                f"AbortError code must be ABORTED or ABORTED_BEFORE_DISPATCH, got {code!r}"
            ) from None
        Exception.__init__(self, code, reason)
        self.code = ErrorCode(code)
        self.reason = reason
        if isinstance(reason, str) and reason and is_lossless_str(reason):
            message = f"{message}: {reason}"
        self._message = message

    def __str__(self) -> str:
        return self._message


class ToolDeniedError(HarnessError):
    """A policy denied a call (code ``TOOL_DENIED``): a pre-execute ``Deny``, a guard, or an
    unsuccessful approval.

    The pipeline builds it for every denial, so a user interface can tell a policy decision
    from a failure by ``result.error.info.code`` alone. ``str(exc)`` is the reason exactly as
    given (even ``""``).

    Example:
        >>> exc = ToolDeniedError("writes are disabled")
        >>> str(exc), exc.code
        ('writes are disabled', <ErrorCode.TOOL_DENIED: 'TOOL_DENIED'>)
    """

    def __init__(self, reason: str) -> None:
        Exception.__init__(self, reason)
        self.code = ErrorCode.TOOL_DENIED
        self.reason = reason

    def __str__(self) -> str:
        return str(self.reason)


class CodeRunFailureKind(enum.StrEnum):
    """Why a Code Mode program failed: the ``kind`` of a :class:`CodeRunFailedError`."""

    SYNTAX = "syntax"
    EXCEPTION = "exception"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    OUTPUT_LIMIT = "output-limit"
    RESULT = "result"
    INTERNAL = "internal"


class CodeRunFailedError(HarnessError):
    """A Code Mode program failed (code ``CODE_RUN_FAILED``).

    Code runtimes build it with :meth:`for_run`, which records the failure's ``kind``, its
    ``detail`` and the ``logs`` the program printed before it failed.
    ``CodeRunFailedError(message)`` keeps working for a plain message; its ``kind`` and
    ``detail`` are ``None`` and its ``logs`` are empty.

    Example:
        >>> exc = CodeRunFailedError.for_run("exception", "ValueError: bad (line 2)", ["hi"])
        >>> print(exc)
        code run failed (exception): ValueError: bad (line 2)
        Captured output:
        hi
        >>> exc.kind, exc.logs
        (<CodeRunFailureKind.EXCEPTION: 'exception'>, ('hi',))
    """

    kind: CodeRunFailureKind | None
    detail: str | None
    logs: tuple[str, ...]

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        self.code = ErrorCode.CODE_RUN_FAILED
        self.kind = None
        self.detail = None
        self.logs = ()

    @classmethod
    def for_run(cls, kind: str, detail: str, logs: Iterable[str] = ()) -> CodeRunFailedError:
        """Build the error of a failed run.

        Args:
            kind: a :class:`CodeRunFailureKind` value (``"syntax"``, ``"timeout"``, ...).
            detail: what went wrong, in the exact words given for the kind (code-mode §7.5).
            logs: the lines the program printed before it failed.

        Raises:
            ValueError: ``kind`` is not a failure kind.
        """
        try:
            member = CodeRunFailureKind(kind)
        except ValueError:
            raise ValueError(f'unknown code run failure kind "{kind}"') from None
        lines = tuple(logs)
        message = f"code run failed ({member.value}): {detail}"
        if lines:
            message += "\nCaptured output:\n" + "\n".join(lines)
        exc = cls(message)
        exc.kind = member
        exc.detail = detail
        exc.logs = lines
        return exc


class JsonSchemaError(ValueError):
    """Raised when a JSON Schema falls outside the supported subset.

    ``violations`` lists every problem found, each ``<pointer>: <problem>``.
    """

    def __init__(self, violations: Iterable[str]) -> None:
        self.violations: tuple[str, ...] = tuple(violations)
        super().__init__(self.violations)

    def __str__(self) -> str:
        return "unsupported JSON Schema: " + "; ".join(self.violations)


def normalize_message(exc: BaseException) -> str:
    """Return the message of a raised exception, as results carry it.

    ``str(exc)``; the class name when that is empty; ``<unprintable thrown value>`` when
    ``str()`` itself raises.
    """
    try:
        message = str(exc)
    except Exception:
        return "<unprintable thrown value>"
    if type(message) is not str:
        message = str.__str__(message)  # a str subclass (markupsafe.Markup, numpy.str_)
    return message or type(exc).__name__

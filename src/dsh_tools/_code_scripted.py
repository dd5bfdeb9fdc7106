"""``ScriptedCodeRuntime``: a code runtime whose "program" is a Python coroutine function.

For tests of Code Mode's lane (code-mode §8.3): the script runs in the calling trio task, so
sub-calls, their timing and their interleavings are deterministic under trio's ``MockClock``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ._code_values import CodeRunLimits, CodeRunOutcome, Dispatch

__all__ = ["ScriptedCodeRuntime"]


@final
class ScriptedCodeRuntime:
    """A code runtime that ignores the program text and awaits a script instead.

    ``run`` appends the program to :attr:`codes`, then awaits
    ``script(dispatch, tools, limits)`` in the calling task (no thread, no event loop of
    its own). The script plays the program: it calls ``dispatch`` (from tasks of its own to
    overlap calls) and returns a ``CodeRunOutcome`` or raises ``CodeRunFailedError``.

    Args:
        script: ``async (dispatch, tools, limits) -> CodeRunOutcome``.
        language: What :attr:`language` reports.

    Example:
        >>> from dsh_tools.code import CodeRunOutcome
        >>> async def script(dispatch, tools, limits):
        ...     value = await dispatch("ping", {})
        ...     return CodeRunOutcome(logs=[str(value)])
        >>> code_runtime = ScriptedCodeRuntime(script)
        >>> code_runtime.language
        'python'
    """

    __slots__ = ("codes", "language", "script")

    def __init__(
        self,
        script: Callable[[Dispatch, tuple[str, ...], CodeRunLimits], Awaitable[CodeRunOutcome]],
        *,
        language: str = "python",
    ) -> None:
        self.script = script
        #: The language reported to the runtime's code runtime check.
        self.language = language
        #: The programs run so far, in order.
        self.codes: list[str] = []

    async def run(
        self,
        code: str,
        *,
        tools: tuple[str, ...],
        dispatch: Dispatch,
        limits: CodeRunLimits,
    ) -> CodeRunOutcome:
        """Record ``code`` and await the script with the run's ``dispatch``, names and limits."""
        self.codes.append(code)
        return await self.script(dispatch, tools, limits)

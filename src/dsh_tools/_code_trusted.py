"""``TrustedCodeRuntime``: runs a Code Mode program in this process, with no isolation.

The program runs on a private asyncio event loop (``asyncio.run``) in a trio worker thread.
Each tool call the program makes becomes one trio task of the caller's run that awaits
``dispatch``; its outcome goes back to the program through an asyncio future completed with
``loop.call_soon_threadsafe``. The program-side work (compiling, ``tools``, checks, output
capture, failure texts) is ``_code_program``'s, shared with the WebAssembly guest.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import sys
import threading
from typing import TYPE_CHECKING, Any, Final, final

import trio

from . import _code_program as program
from ._code_values import CodeRunLimits, CodeRunOutcome, Dispatch, ToolCallError
from ._decisions import UNSET
from ._errors import CodeRunFailedError
from ._exception_groups import raise_one_cancelled
from ._json import thaw_json

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

__all__ = ["TrustedCodeRuntime"]

#: Handed to a program's future to say "the call was cancelled" (not a value, not an error).
_CANCELLED: Final = object()


@final
class TrustedCodeRuntime:
    """Runs Code Mode programs in this process: for tests and for code you trust.

    **No isolation**: the program can do anything this process can. It runs on a private
    asyncio event loop in a trio worker thread; its tool calls run as trio tasks of the
    caller's run, so they overlap freely. ``print`` is captured when it writes to
    ``sys.stdout``, ``sys.stderr`` or no file (other files are written normally; writing to
    ``sys.stdout`` directly is not captured).

    Limits: ``output_bytes`` (the capturing ``print`` raises at the limit, and the run fails
    ``output-limit`` even if the program catches that) and ``wall_seconds`` (the program's
    main task is cancelled; the run fails ``timeout`` once the program has stopped).
    ``cpu_seconds`` and ``memory_bytes`` are not enforced, and a program that never awaits
    holds its thread until it ends. Cancelling ``run`` cancels the program's main task and
    waits for the program to stop before ``Cancelled`` propagates.

    Example:
        >>> runtime = TrustedCodeRuntime()
        >>> runtime.language
        'python'
    """

    @property
    def language(self) -> str:
        """Always ``"python"``."""
        return "python"

    async def run(
        self,
        code: str,
        *,
        tools: tuple[str, ...],
        dispatch: Dispatch,
        limits: CodeRunLimits,
    ) -> CodeRunOutcome:
        """Run ``code`` with ``tools`` bound, each tool call through ``dispatch``.

        Returns:
            The program's logs and result.

        Raises:
            CodeRunFailedError: the program failed (built with ``for_run``: kind ``syntax``,
                ``exception``, ``timeout``, ``memory``, ``output-limit`` or ``result``).
        """
        run = _Run(code, tools, dispatch, limits, trio.lowlevel.current_trio_token())
        try:
            async with trio.open_nursery() as nursery:
                run.nursery = nursery
                nursery.start_soon(run.stop_on_cancel)
                try:
                    # Never abandoned: a program that cannot be stopped is waited for.
                    end = await trio.to_thread.run_sync(run.in_thread, abandon_on_cancel=False)
                finally:
                    # The program has ended: stop waiting for its pending calls (cancelling
                    # a dispatch await never withdraws the call itself).
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # Only cancellations escape the nursery: the caller's (the nursery absorbs its
            # own). The nursery is a detail of this runtime: raise one plain Cancelled.
            await raise_one_cancelled(group)
        # If the caller was cancelled once the tasks had ended, the program was stopped for
        # that: say so.
        await trio.lowlevel.checkpoint_if_cancelled()
        return run.outcome(end)


class _Run:
    """One run: the trio side (calls, cancellation) and the loop side (the program)."""

    def __init__(
        self,
        code: str,
        tools: tuple[str, ...],
        dispatch: Dispatch,
        limits: CodeRunLimits,
        token: trio.lowlevel.TrioToken,
    ) -> None:
        self.code = code
        self.tools = tools
        self.dispatch = dispatch
        self.limits = limits
        self.token = token
        self.capture = program.OutputCapture(limits.output_bytes)
        self.nursery: trio.Nursery | None = None
        # The trio tasks of the calls start dispatch one after another, in the program's
        # order: each waits until the previous one has entered dispatch.
        self.last_entered: trio.Event | None = None
        # Shared between the two threads, under the lock: the loop and its main task, once
        # they exist, and whether the caller asked to stop.
        self.lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.main_task: asyncio.Task[Any] | None = None
        self.stop_requested = False
        # Loop thread only (read by trio once the thread has returned).
        self.timed_out = False

    # --- trio side -------------------------------------------------------------------------

    async def stop_on_cancel(self) -> None:
        """Park until cancelled, then stop the program (a no-op once it has ended)."""
        try:
            await trio.sleep_forever()
        finally:
            with self.lock:
                self.stop_requested = True
                loop = self.loop
            if loop is not None:
                _call_in_loop(loop, self.cancel_main)

    def start_call(self, future: asyncio.Future[Any], name: str, args: Any) -> None:
        """In the trio thread: start the task that dispatches one call of the program."""
        previous, entered = self.last_entered, trio.Event()
        self.last_entered = entered
        # The thread is still running (the program just submitted), so the nursery is open:
        # the thread's own result comes back through the same FIFO queue, after this.
        assert self.nursery is not None
        self.nursery.start_soon(self.call, future, name, args, previous, entered)

    async def call(
        self,
        future: asyncio.Future[Any],
        name: str,
        args: Any,
        previous: trio.Event | None,
        entered: trio.Event,
    ) -> None:
        loop = self.loop
        assert loop is not None  # the loop submitted this call
        try:
            try:
                if previous is not None and not previous.is_set():
                    await previous.wait()
            finally:
                entered.set()
            value = thaw_json(await self.dispatch(name, args))
        except Exception as exc:  # ToolCallError, or a broken dispatch: the program sees it
            _call_in_loop(loop, _settle, future, exc, None)
        except BaseException:
            _call_in_loop(loop, _settle, future, _CANCELLED, None)
            raise
        else:
            _call_in_loop(loop, _settle, future, None, value)

    def outcome(self, end: program.ProgramEnd) -> CodeRunOutcome:
        """The run's outcome once the program has ended (raises for a failure)."""
        logs = self.capture.logs()
        if self.timed_out:
            detail = program.wall_timeout_detail(self.limits.wall_seconds)
            raise CodeRunFailedError.for_run("timeout", detail, logs)
        if end.kind is not None:
            raise CodeRunFailedError.for_run(end.kind, end.detail, logs)
        return CodeRunOutcome(logs=logs, result=end.result if end.has_result else UNSET)

    # --- loop side (the worker thread) -------------------------------------------------

    def in_thread(self) -> program.ProgramEnd:
        try:
            compiled = program.compile_program(self.code)
        except program.ProgramSyntaxError as exc:
            return program.ProgramEnd(kind="syntax", detail=exc.detail)
        tools = program.make_tools(self.tools, self.submit, ToolCallError)
        namespace = program.program_globals(tools, ToolCallError, print=self.print)
        main = program.make_main(compiled, namespace)
        try:
            return asyncio.run(self.main(main))
        except BaseException as exc:
            # SystemExit or KeyboardInterrupt raised in a task the program created: asyncio
            # lets those out of the loop.
            return program.end_for_exception(exc, self.capture, self.limits.memory_bytes)

    async def main(self, main: Callable[[], Coroutine[Any, Any, Any]]) -> program.ProgramEnd:
        loop = asyncio.get_running_loop()
        # Errors of tasks the program never awaited are the program's business, not the
        # host's log.
        loop.set_exception_handler(_ignore_loop_error)
        with self.lock:
            self.loop = loop
            self.main_task = asyncio.current_task()
            stopped = self.stop_requested
        if stopped:  # the caller was cancelled before the program started: do not start it
            return program.ProgramEnd()
        deadline = loop.time() + self.limits.wall_seconds
        timer = loop.call_at(deadline, self.on_wall_time)
        try:
            return await program.run_program(main, self.capture, self.limits.memory_bytes)
        finally:
            timer.cancel()
            # A program that blocked the loop past the deadline kept the timer from firing:
            # it still ran too long.
            if loop.time() >= deadline and not self.timed_out:
                self.timed_out = not self.capture.limit_hit

    def on_wall_time(self) -> None:
        # The first limit reached decides: output written past its limit before this stays
        # an output-limit failure.
        self.timed_out = not self.capture.limit_hit
        self.cancel_main()

    def cancel_main(self) -> None:
        # Only called once the loop exists, and the loop and its main task are set together.
        assert self.main_task is not None
        self.main_task.cancel()

    async def submit(self, name: str, args: dict[str, Any]) -> Any:
        future = asyncio.get_running_loop().create_future()
        self.token.run_sync_soon(self.start_call, future, name, args)
        return await future

    def print(
        self,
        *values: object,
        sep: str | None = " ",
        end: str | None = "\n",
        file: Any = None,
        flush: bool = False,
    ) -> None:
        if file is None or file is sys.stdout or file is sys.stderr:
            builtins.print(*values, sep=sep, end=end, file=self.capture)
        else:
            builtins.print(*values, sep=sep, end=end, file=file, flush=flush)


def _call_in_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    # A closed loop raises RuntimeError: the program has ended and nobody is waiting.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn, *args)


def _settle(future: asyncio.Future[Any], error: object, value: object) -> None:
    if future.done():  # the program stopped waiting (its task was cancelled)
        return
    if error is None:
        future.set_result(value)
    elif error is _CANCELLED:
        future.cancel()
    else:
        assert isinstance(error, BaseException)
        future.set_exception(error)


def _ignore_loop_error(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Drop the loop's error reports (unretrieved task exceptions of the program)."""

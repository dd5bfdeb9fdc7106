"""One run of a program in the WASI sandbox: the host side (code-mode §8.2.4–§8.2.8).

Each run gets a fresh engine and store, no preopened directory and no environment; the
guest's stdin, stdout and stderr are pipes. The guest's ``_start`` runs in a trio worker
thread (never abandoned), while trio tasks serve the pipes: they answer the guest's tool
calls through ``dispatch`` and its timers with ``trio.sleep``. Whatever ends the run — the
guest's ``done``, a limit, a protocol violation, cancellation — the guest is stopped and its
thread waited for before :func:`run_guest` returns.
"""

from __future__ import annotations

import contextlib
import math
import os
from typing import TYPE_CHECKING, Final

import trio

from .._code_program import (
    RESULT_DETAIL,
    cpu_timeout_detail,
    memory_detail,
    output_limit_detail,
    split_logs,
    wall_timeout_detail,
)
from .._code_values import CodeRunLimits, CodeRunOutcome, Dispatch, ToolCallError
from .._decisions import UNSET
from .._errors import CodeRunFailedError, normalize_message
from .._json import JsonValue, freeze_json
from ._artifact import CompiledModule, new_engine
from ._wire import Call, Done, Log, ProtocolError, Wake, WireState, encode, parse_guest_line

if TYPE_CHECKING:
    import wasmtime

__all__ = ["run_guest"]

#: Fuel for the interpreter's start-up, the guest and asyncio, then fuel per CPU second.
FUEL_START: Final = 5_000_000_000
FUEL_PER_SECOND: Final = 5_000_000_000
#: How much longer than the output limit one message of the guest may be.
LINE_ALLOWANCE: Final = 16_777_216
#: ``ENOTSUP``: what the guest's ``poll_oneoff`` answers, so it can neither sleep nor poll.
_ENOTSUP: Final = 58


class _Run:
    """The state of one run, shared by its tasks."""

    def __init__(
        self,
        limits: CodeRunLimits,
        engine: wasmtime.Engine,
        stdin: trio.lowlevel.FdStream,
        dispatch: Dispatch,
        nursery: trio.Nursery,
        tools: tuple[str, ...],
    ) -> None:
        self.limits = limits
        #: The bound names: the guest only ever calls these, so any other is a forgery.
        self.bound = frozenset(tools)
        self.engine = engine
        self.stdin = stdin
        self.dispatch = dispatch
        self.nursery = nursery
        self.wire = WireState()
        self.write_lock = trio.Lock()
        self.log = bytearray()
        #: The first decision wins: a ``done``, or the host's own reason to stop.
        self.decided: CodeRunOutcome | CodeRunFailedError | None = None
        self.stopped = False

    def decide(self, outcome: CodeRunOutcome | CodeRunFailedError) -> None:
        if self.decided is None:
            self.decided = outcome

    def stop(self) -> None:
        """Stop the guest: trap at its next epoch check; a blocked read returns end-of-file."""
        if not self.stopped:
            self.stopped = True
            self.engine.increment_epoch()
            self.stdin.close()

    def fail(self, kind: str, detail: str) -> None:
        self.decide(CodeRunFailedError.for_run(kind, detail, self.logs()))
        self.stop()

    def logs(self) -> tuple[str, ...]:
        # At most the output limit, cut at a character boundary.
        return split_logs(bytes(self.log[: self.limits.output_bytes]).decode("utf-8", "ignore"))

    async def send(self, message: dict[str, object]) -> None:
        async with self.write_lock:
            # A closed or broken pipe: the guest has ended or is being stopped.
            with contextlib.suppress(trio.ClosedResourceError, trio.BrokenResourceError):
                await self.stdin.send_all(encode(message))

    # -- what the guest sends ------------------------------------------------------------
    async def receive_line(self, line: bytes) -> None:
        try:
            message = parse_guest_line(line)
            self.wire.accept(message)
        except ProtocolError:
            if self.wire.done:
                # Only a done with nothing after it counts: lines after it void it.
                self.decided = None
            self.fail("internal", "the sandbox broke the protocol")
            return
        if isinstance(message, Log):
            self.log += message.text.encode("utf-8")
            if len(self.log) > self.limits.output_bytes:
                self.fail("output-limit", output_limit_detail(self.limits.output_bytes))
        elif isinstance(message, Call):
            if message.name not in self.bound:
                # The guest's bindings refuse unbound names, so this call was forged (a
                # tampered guest): the host never dispatches a name it did not bind.
                self.fail("internal", "the sandbox broke the protocol")
                return
            # started() before dispatch: the call is accepted before the next line is read,
            # so the lane sees the calls in the program's order.
            await self.nursery.start(self._serve_call, message)
        elif isinstance(message, Wake):
            self.nursery.start_soon(self._serve_wake, message)
        else:
            self.done(message)

    def done(self, message: Done) -> None:
        limits = self.limits
        if message.kind is None:
            result: JsonValue = UNSET
            if message.has_result:
                try:
                    result = freeze_json(message.result)
                except TypeError:
                    self.decide(CodeRunFailedError.for_run("result", RESULT_DETAIL, self.logs()))
                    return
            self.decide(CodeRunOutcome(logs=self.logs(), result=result))
            return
        detail = message.detail
        if message.kind == "memory":
            detail = memory_detail(limits.memory_bytes)
        elif message.kind == "output-limit":
            detail = output_limit_detail(limits.output_bytes)
        self.decide(CodeRunFailedError.for_run(message.kind, detail, self.logs()))

    async def _serve_call(
        self, call: Call, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        task_status.started()
        try:
            value = await self.dispatch(call.name, call.args)
        except ToolCallError as exc:
            await self.send({"op": "result", "id": call.id, "ok": False, "message": exc.message})
        except Exception as exc:  # dispatch broke its contract: the run cannot go on
            self.fail("internal", normalize_message(exc))
        else:
            await self.send({"op": "result", "id": call.id, "ok": True, "value": value})

    async def _serve_wake(self, wake: Wake) -> None:
        await trio.sleep(wake.seconds)
        await self.send({"op": "woke", "id": wake.id})

    async def read_stdout(self, stream: trio.lowlevel.FdStream) -> None:
        """Serve the guest's messages until end-of-file; after a stop, read and drop them."""
        limit = self.limits.output_bytes + LINE_ALLOWANCE
        buffer = bytearray()
        while chunk := await stream.receive_some():
            if self.stopped:
                continue  # drained so that a blocked write of the guest returns
            buffer += chunk
            start = 0
            while (end := buffer.find(b"\n", start)) >= 0 and not self.stopped:
                await self.receive_line(bytes(buffer[start:end]))
                start = end + 1
            del buffer[:start]
            if len(buffer) > limit:
                self.fail("output-limit", f"the program sent a message larger than {limit} bytes")

    async def wall_timer(self) -> None:
        await trio.sleep(self.limits.wall_seconds)
        self.fail("timeout", wall_timeout_detail(self.limits.wall_seconds))

    async def watchdog(self) -> None:
        """Turn the cancellation of the run into a stop: the worker thread cannot be
        cancelled, but the guest it runs can."""
        try:
            await trio.sleep_forever()
        finally:
            self.stop()


async def _discard(stream: trio.lowlevel.FdStream) -> None:
    while await stream.receive_some():
        pass


def _start_guest(
    run: _Run, module: wasmtime.Module, argv: list[str], fds: tuple[int, ...]
) -> str | None:
    """Run the guest to its end, in a worker thread: ``None`` when it exited, else the name
    of the trap that stopped it. Closes the store, and with it the guest's pipe ends."""
    import wasmtime

    limits = run.limits
    store = wasmtime.Store(run.engine)
    config = wasmtime.WasiConfig()
    try:
        store.set_limits(memory_size=limits.memory_bytes)
        store.set_fuel(FUEL_START + math.ceil(limits.cpu_seconds * FUEL_PER_SECOND))
        store.set_epoch_deadline(1)
        config.argv = argv  # no environment variables and no preopened directory
        config.stdin_file = f"/dev/fd/{fds[0]}"
        config.stdout_file = f"/dev/fd/{fds[1]}"
        config.stderr_file = f"/dev/fd/{fds[2]}"
        store.set_wasi(config)
        for fd in fds:  # wasmtime opened its own descriptors for these
            os.close(fd)
        fds = ()
        linker = wasmtime.Linker(run.engine)
        linker.define_wasi()
        linker.allow_shadowing = True
        i32 = wasmtime.ValType.i32()
        poll = wasmtime.FuncType([i32, i32, i32, i32], [i32])
        linker.define_func("wasi_snapshot_preview1", "poll_oneoff", poll, lambda *_: _ENOTSUP)
        try:
            start = linker.instantiate(store, module).exports(store)["_start"]
        except wasmtime.WasmtimeError:
            # The imports are all defined, so only the memory limit can refuse the module:
            # its initial memory (10 MiB) does not fit.
            return "MEMORY_LIMIT"
        assert isinstance(start, wasmtime.Func)
        if run.stopped:  # stopped before it started: the epoch was raised too early to count
            return None
        try:
            start(store)
        except wasmtime.ExitTrap:
            return None
        except wasmtime.Trap as trap:
            code = trap.trap_code
            # Traps raised by wasm code carry a code; a code-less one can only come from a
            # host function, and this host's only one (poll_oneoff) cannot fail.
            return code.name if code is not None else "UNKNOWN"
        return None
    finally:
        # The store owns the guest's pipe ends once set_wasi took the configuration; before
        # that the configuration holds them. Closing both ends the host's reads.
        config.close()
        store.close()
        for fd in fds:
            os.close(fd)


def trap_failure(trap: str | None, limits: CodeRunLimits) -> tuple[str, str]:
    """The failure kind and detail of a guest that ended without a ``done``: stopped by the
    trap named ``trap``, or exited (``None``)."""
    if trap == "OUT_OF_FUEL":
        return "timeout", cpu_timeout_detail(limits.cpu_seconds)
    if trap == "STACK_OVERFLOW":
        return "memory", "the program exhausted its stack"
    if trap == "MEMORY_LIMIT":
        return "memory", memory_detail(limits.memory_bytes)
    if trap is not None:
        return "internal", f"the sandbox stopped with a trap: {trap}"
    return "internal", "the sandbox stopped without a result"


async def run_guest(
    compiled: CompiledModule,
    argv: list[str],
    code: str,
    *,
    tools: tuple[str, ...],
    dispatch: Dispatch,
    limits: CodeRunLimits,
) -> CodeRunOutcome:
    """Run ``code`` in a fresh sandbox whose interpreter gets ``argv``.

    Returns or raises only once the guest has stopped and its thread has returned.

    Raises:
        CodeRunFailedError: the program failed, or a limit stopped it.
    """
    engine = new_engine()  # one engine per run: raising its epoch stops this run only
    module = compiled.instantiate_in(engine)
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    stderr_r, stderr_w = os.pipe()
    stdin = trio.lowlevel.FdStream(stdin_w)
    stdout = trio.lowlevel.FdStream(stdout_r)
    stderr = trio.lowlevel.FdStream(stderr_r)
    fds = (stdin_r, stdout_w, stderr_w)
    start = {"op": "start", "code": code, "tools": list(tools), "output_bytes": limits.output_bytes}
    try:
        async with trio.open_nursery() as outer:
            run = _Run(limits, engine, stdin, dispatch, outer, tools)
            outer.start_soon(run.watchdog)
            outer.start_soon(run.wall_timer)
            outer.start_soon(run.send, start)
            # Shielded: once the guest runs, the host drains its pipes and waits for its
            # thread whatever happens; cancellation reaches the guest through the watchdog.
            with trio.CancelScope(shield=True):
                async with trio.open_nursery() as pipes:
                    pipes.start_soon(run.read_stdout, stdout)
                    pipes.start_soon(_discard, stderr)
                    trap = None
                    try:
                        trap = await trio.to_thread.run_sync(
                            _start_guest,
                            run,
                            module,
                            argv,
                            fds,
                            abandon_on_cancel=False,
                            # Its own limiter: a program holds its thread for its whole run,
                            # and must not use up the tokens trio's other callers share.
                            limiter=trio.CapacityLimiter(1),
                        )
                    except Exception as exc:  # the sandbox could not be set up
                        run.fail("internal", normalize_message(exc))
            # The program has ended: its pending tool calls and timers are dropped.
            outer.cancel_scope.cancel()
    finally:
        for stream in (stdin, stdout, stderr):
            stream.close()
    if run.decided is None:
        run.decide(CodeRunFailedError.for_run(*trap_failure(trap, limits), run.logs()))
    if isinstance(run.decided, CodeRunFailedError):
        raise run.decided
    assert run.decided is not None
    return run.decided

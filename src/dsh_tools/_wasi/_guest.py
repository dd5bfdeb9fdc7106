"""The guest: what runs inside the WASI sandbox, on the module's CPython 3.12 (code-mode §8.2.6).

This file is package data, not part of the host library: the host reads its source and
passes it to the sandbox's interpreter as ``python -I -S -c <source>``, followed by a call to
:func:`main` with the source of the program-side modules (the compile step, the ``tools``
object, the argument check, the capturing writer, the failure texts), which the trusted
runtime runs in the host. Importing it in the host runs nothing.

Only the standard library, and nothing heavy at start-up: ``ast`` and ``importlib.util`` are
never imported, and ``asyncio`` only for programs that contain an ``import asyncio``
statement. The guest talks to the host in JSON lines over its stdin and stdout.
"""

# The C halves of json, heapq and collections: the Python modules import re, enum and more,
# which would cost the sandbox's start-up some 60 ms per run.
import _json
import sys
import time
from _collections import deque
from _heapq import heappop, heappush

#: Captured output is sent to the host once this many bytes are waiting.
_LOG_CHUNK = 4096


class _Stop(BaseException):
    """The host closed our input: it is stopping us, so we end without a word."""


class _ScanContext:
    """What json's C scanner reads from its decoder: strict JSON, plain dicts and numbers."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo = None

    @staticmethod
    def parse_constant(name):
        raise ValueError(f"invalid constant {name}")


def _not_json(value):
    raise TypeError(f"{type(value).__name__} is not JSON")


_scan = _json.make_scanner(_ScanContext())
# No cycle check (markers None): what is sent is a lossless copy, which has no cycles.
_encode = _json.make_encoder(
    None, _not_json, _json.encode_basestring, None, ":", ",", False, False, False
)


class _Channel:
    """The guest's end of the wire: one JSON object per line."""

    def __init__(self, reader, writer):
        self._reader = reader
        self._writer = writer
        self.flush_log = lambda: None

    def send(self, message):
        # Captured output goes first, so the host sees it in the program's order.
        self.flush_log()
        self.send_raw(message)

    def send_raw(self, message):
        line = "".join(_encode(message, 0))
        self._writer.write(line.encode("utf-8") + b"\n")
        self._writer.flush()

    def receive(self):
        line = self._reader.readline()
        if not line.endswith(b"\n"):
            raise _Stop
        return _scan(line[:-1].decode("utf-8"), 0)[0]


class _Handle:
    """A scheduled callback (asyncio's ``Handle``/``TimerHandle`` as far as asyncio uses it)."""

    __slots__ = ("_args", "_callback", "_cancelled", "_context", "_when")

    def __init__(self, when, callback, args, context):
        self._when = when
        self._callback = callback
        self._args = args
        self._context = context
        self._cancelled = False

    def cancel(self):
        self._cancelled = True
        self._callback = self._args = None

    def cancelled(self):
        return self._cancelled

    def when(self):
        return self._when

    def _run(self):
        if self._context is None:
            self._callback(*self._args)
        else:
            self._context.run(self._callback, *self._args)


class _Future:
    """A future asyncio's ``Task`` accepts: a binding's pending call, and the plain driver's
    task when the program does not use asyncio."""

    _asyncio_future_blocking = False

    def __init__(self, loop):
        self._loop = loop
        self._state = "PENDING"
        self._result = None
        self._exception = None
        self._callbacks = []
        self._cancel_message = None

    def get_loop(self):
        return self._loop

    def done(self):
        return self._state != "PENDING"

    def cancelled(self):
        return self._state == "CANCELLED"

    def _cancelled_error(self):
        return sys.modules["asyncio"].CancelledError(self._cancel_message or "")

    def result(self):
        if self._state == "CANCELLED":
            raise self._cancelled_error()
        if self._state == "PENDING":
            raise RuntimeError("Result is not ready.")
        if self._exception is not None:
            raise self._exception
        return self._result

    def exception(self):
        if self._state == "CANCELLED":
            raise self._cancelled_error()
        if self._state == "PENDING":
            raise RuntimeError("Exception is not set.")
        return self._exception

    def add_done_callback(self, fn, *, context=None):
        if self.done():
            self._loop.call_soon(fn, self, context=context)
        else:
            self._callbacks.append((fn, context))

    def remove_done_callback(self, fn):
        kept = [(f, c) for f, c in self._callbacks if f != fn]
        removed = len(self._callbacks) - len(kept)
        self._callbacks = kept
        return removed

    def cancel(self, msg=None):
        if self.done():
            return False
        self._state = "CANCELLED"
        self._cancel_message = msg
        self._schedule_callbacks()
        return True

    def set_result(self, value):
        if self.done():
            return
        self._state = "FINISHED"
        self._result = value
        self._schedule_callbacks()

    def set_exception(self, exception):
        if self.done():
            return
        self._state = "FINISHED"
        self._exception = exception
        self._schedule_callbacks()

    def _schedule_callbacks(self):
        callbacks, self._callbacks = self._callbacks, []
        for fn, context in callbacks:
            self._loop.call_soon(fn, self, context=context)

    def __await__(self):
        if not self.done():
            self._asyncio_future_blocking = True
            yield self
        if not self.done():
            raise RuntimeError("await wasn't used with future")
        return self.result()

    __iter__ = __await__


class _Task(_Future):
    """Drives a coroutine that awaits only tool calls, for programs without asyncio."""

    def __init__(self, loop, coro):
        super().__init__(loop)
        self._coro = coro
        loop.call_soon(self._step, None)

    def _step(self, waited):
        if waited is None:
            self._resume(self._coro.send, None)
            return
        try:
            value = waited.result()
        except BaseException as exc:
            self._resume(self._coro.throw, exc)
        else:
            self._resume(self._coro.send, value)

    def _resume(self, method, argument):
        try:
            yielded = method(argument)
        except StopIteration as stop:
            self.set_result(stop.value)
        except BaseException as exc:
            self.set_exception(exc)
        else:
            if isinstance(yielded, _Future) and yielded._asyncio_future_blocking:
                yielded._asyncio_future_blocking = False
                yielded.add_done_callback(self._step)
            else:
                # As asyncio's Task does: the program learns it awaited something odd.
                error = RuntimeError(f"the program awaited {yielded!r}")
                self._loop.call_soon(self._resume, self._coro.throw, error)


class _Loop:
    """The guest's event loop: the part of ``asyncio.AbstractEventLoop`` that asyncio's
    ``Future``, ``Task``, ``gather``, ``sleep``, ``wait_for`` and ``timeout`` use.

    When nothing is ready, it asks the host to wake it at its earliest timer and blocks
    reading one message: the guest cannot sleep or poll by itself.
    """

    def __init__(self, channel, tool_call_error):
        self._channel = channel
        self._tool_call_error = tool_call_error
        self._ready = deque()
        self._timers = []
        self._sequence = 0
        self._next_id = 1
        self._calls = {}
        self._wakes = {}
        self._floor = 0.0
        self._running = False
        self._closed = False

    # -- the asyncio surface --------------------------------------------------------------
    def time(self):
        # Never earlier than a timer the host has already woken us for.
        return max(time.monotonic(), self._floor)

    def call_soon(self, callback, *args, context=None):
        handle = _Handle(None, callback, args, context)
        self._ready.append(handle)
        return handle

    def call_later(self, delay, callback, *args, context=None):
        return self.call_at(self.time() + delay, callback, *args, context=context)

    def call_at(self, when, callback, *args, context=None):
        handle = _Handle(when, callback, args, context)
        self._sequence += 1
        heappush(self._timers, (when, self._sequence, handle))
        return handle

    def create_future(self):
        return _Future(self)

    def create_task(self, coro, *, name=None, context=None):
        asyncio = sys.modules.get("asyncio")
        if asyncio is None:
            return _Task(self, coro)
        return asyncio.Task(coro, loop=self, name=name, context=context)

    def get_debug(self):
        return False

    def is_running(self):
        return self._running

    def is_closed(self):
        return self._closed

    def call_exception_handler(self, context):
        # What asyncio would log (a never-retrieved exception...) is not the program's output.
        pass

    # -- tool calls ------------------------------------------------------------------------
    def submit(self, name, args):
        """Send one tool call to the host; the returned future gets its value."""
        future = _Future(self)
        call_id = self._new_id()
        self._calls[call_id] = (name, future)
        self._channel.send({"op": "call", "id": call_id, "name": name, "args": args})
        return future

    def _new_id(self):
        value = self._next_id
        self._next_id += 1
        return value

    # -- running ---------------------------------------------------------------------------
    def run_until_complete(self, future):
        self._running = True
        try:
            while not future.done():
                self._run_once()
        finally:
            self._running = False
            self._closed = True

    def _run_once(self):
        timers = self._timers
        while timers and timers[0][2]._cancelled:
            heappop(timers)
        now = self.time()
        while timers and timers[0][0] <= now:
            handle = heappop(timers)[2]
            if not handle._cancelled:
                self._ready.append(handle)
        if not self._ready:
            self._wait_for_host()
            return
        for _ in range(len(self._ready)):
            handle = self._ready.popleft()
            if not handle._cancelled:
                handle._run()

    def _wait_for_host(self):
        if self._timers:
            when = self._timers[0][0]
            if not any(pending <= when for pending in self._wakes.values()):
                wake_id = self._new_id()
                self._wakes[wake_id] = when
                seconds = max(0.0, when - self.time())
                self._channel.send({"op": "wake", "id": wake_id, "seconds": seconds})
        elif not self._calls:
            raise RuntimeError("the program is waiting, but no tool call or timer is pending")
        self._receive()

    def _receive(self):
        message = self._channel.receive()
        if message.get("op") == "woke":
            when = self._wakes.pop(message["id"], None)
            if when is not None:
                self._floor = max(self._floor, when)
            return
        name, future = self._calls.pop(message["id"])
        if future.done():
            return  # the program stopped waiting (a timeout cancelled it)
        if message["ok"]:
            future.set_result(message["value"])
        else:
            future.set_exception(self._tool_call_error(name, message["message"]))


def main(program_source):
    """Run one program: read ``start``, run the program, send ``done``."""
    channel = _Channel(sys.stdin.buffer, sys.stdout.buffer)
    try:
        start = channel.receive()
        program = {"__name__": "_code_program"}
        exec(compile(program_source, "<program modules>", "exec"), program)
        try:
            done = _run(channel, start, program)
        except MemoryError:
            done = {"op": "done", "status": "error", "kind": "memory", "detail": ""}
        channel.send(done)
    except _Stop:
        pass


def _capture(program, channel, limit):
    """The program's ``sys.stdout`` and ``sys.stderr``: it keeps at most ``limit`` bytes,
    and sends what it holds to the host whenever 4096 bytes are waiting."""

    class Capture(program["OutputCapture"]):
        def write(self, text):
            try:
                return super().write(text)
            finally:
                if self.pending_bytes >= _LOG_CHUNK:
                    channel.flush_log()

    capture = Capture(limit)

    def flush_log():
        text = capture.drain()
        if text:
            channel.send_raw({"op": "log", "text": text})

    channel.flush_log = flush_log
    return capture


def _run(channel, start, program):
    """The ``done`` message of the program ``start`` carries."""
    capture = _capture(program, channel, start["output_bytes"])
    sys.stdout = sys.stderr = capture
    sys.stdin = program["io"].StringIO()
    try:
        compiled = program["compile_program"](start["code"])
    except program["ProgramSyntaxError"] as exc:
        return {"op": "done", "status": "error", "kind": "syntax", "detail": exc.detail}
    tool_call_error = program["ToolCallError"]
    loop = _Loop(channel, tool_call_error)

    async def submit(name, args):
        return await loop.submit(name, args)

    tools = program["make_tools"](start["tools"], submit, tool_call_error)
    main = program["make_main"](compiled, program["program_globals"](tools, tool_call_error))
    coroutine = program["run_program"](main, capture)
    if compiled.imports_asyncio:
        import asyncio

        asyncio.events._set_running_loop(loop)
        task = asyncio.Task(coroutine, loop=loop)
    else:
        task = _Task(loop, coroutine)
    try:
        loop.run_until_complete(task)
    except _Stop:
        raise
    except BaseException as exc:
        # Waiting with nothing pending (RuntimeError), or what escapes a task of the
        # program the way asyncio lets it escape (SystemExit, KeyboardInterrupt).
        return program["end_for_exception"](exc, capture).done_message()
    return task.result().done_message()

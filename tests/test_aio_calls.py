"""Crossing the asyncio bridge (integrations §3.2, §3.3): batches from asyncio, asyncio
bodies from trio, cancellation both ways, context variables, errors."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from typing import Any, cast

import anyio
import anyio.lowlevel
import pytest
import sniffio
import trio

import dsh_sched
from dsh_sched import CallCommitted, CallStarted, ModelToolCall, RecordingSink, aio
from dsh_tools import (
    ABORTED,
    TOOL_TIMEOUT,
    Abort,
    ExecutionToken,
    JsonValue,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    define_tool,
    tool,
)
from dsh_tools.policies import install_timeout_policy
from tests.aio_helpers import (
    HOSTS,
    Sleeper,
    collect,
    echo_calls,
    echo_runtime,
    run_host,
    slow_calls,
)
from tests.helpers import error_text, exactly, raw_tool, text_output
from tests.test_sched_fixtures import text_of

IN_TRIO = (
    "dsh_sched.aio cannot be used inside a trio run; "
    "await dsh_sched.run_tool_calls() from trio instead"
)
NO_LOOP = "dsh_sched.aio needs a running asyncio event loop"
RUN_ON_ASYNCIO = "run_on_asyncio() must be called from trio code running in a dsh_sched.aio portal"


def code_of(result: ToolResult) -> str:
    """The error code of a failed result."""
    assert result.error is not None, result
    assert result.error.info is not None, result
    return result.error.info.code


def _event_kinds(sink: RecordingSink) -> list[tuple[str, int]]:
    return [(type(e).__name__, e.index) for e in sink.events]


# -- results, equal to the trio path ----------------------------------------------------------


@pytest.mark.parametrize("host", HOSTS)
def test_y001_y019_batch_from_asyncio_equals_the_trio_path(host: str) -> None:
    """Y-001, Y-019: same results, contexts and sink events as ``dsh_sched.run_tool_calls``."""
    calls = echo_calls("a", "b")

    async def via_bridge() -> tuple[dsh_sched.BatchOutcome, RecordingSink]:
        sink = RecordingSink()
        return await aio.run_tool_calls(echo_runtime(), calls, sink=sink), sink

    async def native() -> tuple[dsh_sched.BatchOutcome, RecordingSink]:
        sink = RecordingSink()
        return await dsh_sched.run_tool_calls(echo_runtime(), calls, sink=sink), sink

    bridged, bridged_sink = run_host(via_bridge, host)
    trio_outcome, trio_sink = trio.run(native)
    assert [text_of(c.result) for c in bridged.results] == ["a", "b"]
    assert [c.result for c in bridged.results] == [c.result for c in trio_outcome.results]
    assert [c.call for c in bridged.results] == list(calls)
    assert bridged.additional_contexts == trio_outcome.additional_contexts
    assert (bridged.aborted, bridged.concludes_turn) == (False, False)
    assert _event_kinds(bridged_sink) == _event_kinds(trio_sink)
    assert [e.result for e in bridged_sink.events if isinstance(e, CallCommitted)] == [
        c.result for c in bridged.results
    ]


def test_y001_signature_mirrors_run_tool_calls() -> None:
    """Y-001: the asyncio form takes exactly the trio form's arguments (and later ones)."""
    assert inspect.signature(aio.run_tool_calls) == inspect.signature(dsh_sched.run_tool_calls)
    assert inspect.iscoroutinefunction(aio.run_tool_calls)


def test_y001_every_option_is_passed_through() -> None:
    """Y-001: options reach the batch (``parent``, ``root_call_id``, ``keep_results``,
    ``max_parallel``, ``scope``)."""
    seen: list[tuple[object, object]] = []
    runtime = ToolRuntime()

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        seen.append((ctx.parent, ctx.root_call_id))
        return "x"

    scope = runtime.open_scope()
    scope.register(raw_tool("t", body))

    async def main() -> dsh_sched.BatchOutcome:
        calls = [ModelToolCall(call_id="c", name="t", arguments="{}")]
        return await aio.run_tool_calls(
            runtime, calls, scope=scope, max_parallel=1, root_call_id="root", keep_results=False
        )

    outcome = run_host(main)
    assert outcome.results == ()
    assert seen == [(None, "root")]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"max_parallel": 0}, ValueError, "max_parallel must be a positive integer"),
        ({"runtime": None}, TypeError, "runtime must be a ToolRuntime, got NoneType"),
        ({"calls": 5}, TypeError, "calls must be an iterable of ModelToolCall objects, got int"),
        ({"sink": object()}, TypeError, "sink must provide on_call, on_result and on_context"),
    ],
)
def test_y002_argument_errors_start_no_portal(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    """Y-002: the trio form's argument errors and texts, raised before any portal starts."""
    arguments: dict[str, Any] = {"runtime": echo_runtime(), "calls": echo_calls("a")}
    arguments.update(kwargs)

    async def main() -> None:
        with pytest.raises(error, match=exactly(message)):
            await aio.run_tool_calls(arguments.pop("runtime"), arguments.pop("calls"), **arguments)
        assert not trio.lowlevel.in_trio_run()
        assert len(asyncio.all_tasks()) == 1  # no keeper either

    run_host(main)


def test_y003_concurrent_callers_overlap_in_one_trio_run() -> None:
    """Y-003: two sequential then ten concurrent callers share one trio run; each gets its
    own outcome; the ten batches overlap (every body waits for all ten to be running)."""
    roots: set[object] = set()
    running = 0
    all_running = trio.Event()

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        nonlocal running
        roots.add(trio.lowlevel.current_root_task())
        if args["n"] >= 0:
            running += 1
            if running == 10:
                all_running.set()
            with trio.fail_after(10):  # a batch run alone would never see the other nine
                await all_running.wait()
        await trio.sleep(0.1)
        return ctx.call_id

    runtime = ToolRuntime()
    runtime.register(raw_tool("slow", body, is_concurrency_safe=True))

    def batch(n: int) -> list[ModelToolCall]:
        return [ModelToolCall(call_id=f"b{n}", name="slow", arguments={"n": n})]

    async def main() -> list[dsh_sched.BatchOutcome]:
        await aio.run_tool_calls(runtime, batch(-1))
        await aio.run_tool_calls(runtime, batch(-2))
        return await asyncio.gather(*(aio.run_tool_calls(runtime, batch(n)) for n in range(10)))

    outcomes = run_host(main)
    assert len(roots) == 1
    assert [text_of(o.results[0].result) for o in outcomes] == [f"b{n}" for n in range(10)]


# -- cancellation, asyncio → trio ---------------------------------------------------------


@pytest.mark.parametrize("host", HOSTS)
def test_y004_y019_task_cancel_drains_before_cancelled_error(host: str) -> None:
    """Y-004, Y-019: ``task.cancel()`` while five bodies sleep: every shielded cleanup has
    finished before ``CancelledError`` reaches the awaiting code; five ``ABORTED`` results."""
    sleeper = Sleeper(5)
    sink = RecordingSink()

    async def caller() -> None:
        try:
            await aio.run_tool_calls(sleeper.runtime(), slow_calls(5), sink=sink)
        except asyncio.CancelledError:
            sleeper.steps.append("caller saw CancelledError")
            raise

    async def main() -> BaseException | None:
        task = asyncio.create_task(caller())
        await sleeper.started.wait()
        task.cancel()
        _, exc = await collect(task)
        return exc

    exc = run_host(main, host)
    assert isinstance(exc, asyncio.CancelledError)
    assert sleeper.steps == ["start"] * 5 + ["cleanup done"] * 5 + ["caller saw CancelledError"]
    committed = [e for e in sink.events if isinstance(e, CallCommitted)]
    assert [code_of(e.result) for e in committed] == [ABORTED] * 5


def test_y005_asyncio_timeout_becomes_timeout_error_after_the_cleanups() -> None:
    """Y-005: ``asyncio.timeout(0.05)`` around a batch of slow bodies → ``TimeoutError``,
    raised after the bodies' cleanups."""
    sleeper = Sleeper(3, cleanup=0.02)

    async def main() -> None:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await aio.run_tool_calls(sleeper.runtime(), slow_calls(3))
        sleeper.steps.append("TimeoutError")

    run_host(main)
    assert sleeper.steps == ["start"] * 3 + ["cleanup done"] * 3 + ["TimeoutError"]


def test_y006_more_cancellations_during_the_drain_do_not_shorten_it() -> None:
    """Y-006: three more ``cancel()``s during the drain: it completes; one ``CancelledError``."""
    sleeper = Sleeper(2, cleanup=0)
    sleeper.cleanup_gate = trio.Event()
    seen: list[str] = []

    async def caller() -> str:
        try:
            await aio.run_tool_calls(sleeper.runtime(), slow_calls(2))
        except asyncio.CancelledError:
            seen.append("CancelledError")
        # No cancellation request is left over: this checkpoint passes.
        await asyncio.sleep(0)
        return "survived"

    async def main() -> str:
        task = asyncio.create_task(caller())
        await sleeper.started.wait()
        task.cancel()
        await sleeper.cleanup_started.wait()
        for _ in range(3):
            task.cancel()
            await asyncio.sleep(0)
        assert not task.done()
        seen.append("released")
        assert sleeper.cleanup_gate is not None
        sleeper.cleanup_gate.set()  # a sync trio call from asyncio: allowed across
        return await task

    assert run_host(main) == "survived"
    assert seen == ["released", "CancelledError"]
    assert sleeper.steps.count("cleanup done") == 2


def test_y007_abort_from_asyncio_returns_the_outcome() -> None:
    """Y-007: ``abort.abort()`` from asyncio code → an outcome with ``aborted`` and
    ``ABORTED`` results."""
    sleeper = Sleeper(2, cleanup=0)
    abort = Abort()

    async def main() -> dsh_sched.BatchOutcome:
        task = asyncio.create_task(
            aio.run_tool_calls(sleeper.runtime(), slow_calls(2), abort=abort)
        )
        await sleeper.started.wait()
        abort.abort("user pressed stop")
        return await task

    outcome = run_host(main)
    assert outcome.aborted
    assert [code_of(c.result) for c in outcome.results] == [ABORTED] * 2


def test_y007_timeout_option_reaches_the_batch() -> None:
    """Y-007 with ``timeout=``: the trio form's option works through the bridge (the batch
    ``Abort`` fires, the outcome comes back aborted with the timeout reason)."""
    sleeper = Sleeper(2, cleanup=0)

    async def main() -> dsh_sched.BatchOutcome:
        return await aio.run_tool_calls(sleeper.runtime(), slow_calls(2), timeout=0.05)

    outcome = run_host(main)
    assert outcome.aborted
    assert outcome.abort_reason == "batch timeout after 0.05 s"
    assert [code_of(c.result) for c in outcome.results] == [ABORTED] * 2


def test_y004_cancel_after_the_batch_finished_discards_the_outcome() -> None:
    """Y-004 (I§3.2 item 3): a cancellation arriving after the trio side finished is not
    undone: the outcome is discarded and ``CancelledError`` raised."""
    runtime = echo_runtime()

    async def main() -> BaseException | None:
        loop = asyncio.get_running_loop()
        task = asyncio.create_task(aio.run_tool_calls(runtime, echo_calls("a")))
        # Cancel in the same loop iteration as the trio side's completion is delivered.
        original = loop.create_future

        def cancel_when_delivered() -> asyncio.Future[Any]:
            future = original()
            future.add_done_callback(lambda _: task.cancel())
            return future

        loop.create_future = cancel_when_delivered  # type: ignore[method-assign]
        try:
            _, exc = await collect(task)
        finally:
            loop.create_future = original  # type: ignore[method-assign]
        return exc

    assert isinstance(run_host(main), asyncio.CancelledError)


def test_y004_cancel_arriving_as_the_batch_finishes() -> None:
    """Y-004 (I§3.2 item 3): the caller cancelled in the same step as the trio side
    finishes: ``CancelledError``, and the batch is complete (nothing left running)."""
    runtime = ToolRuntime()
    caller: list[asyncio.Task[Any]] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        caller[0].cancel()  # a sync asyncio call from trio code: allowed across
        return "done"

    runtime.register(raw_tool("t", body))
    sink = RecordingSink()

    async def main() -> BaseException | None:
        calls = [ModelToolCall(call_id="c", name="t", arguments="")]
        caller.append(asyncio.create_task(aio.run_tool_calls(runtime, calls, sink=sink)))
        _, exc = await collect(caller[0])
        return exc

    assert isinstance(run_host(main), asyncio.CancelledError)
    committed = [e for e in sink.events if isinstance(e, CallCommitted)]
    assert [text_of(e.result) for e in committed] == ["done"]


def test_y014_a_sink_failure_reaches_the_caller_as_the_same_object() -> None:
    """Y-014: a sink raising ``RuntimeError("sink broke")`` → that object, not a group."""
    broke = RuntimeError("sink broke")

    class Sink:
        def on_call(self, event: CallStarted) -> None:
            pass

        def on_result(self, event: CallCommitted) -> None:
            raise broke

        def on_context(self, event: object) -> None:
            pass

    async def main() -> BaseException | None:
        _, exc = await collect(aio.run_tool_calls(echo_runtime(), echo_calls("a"), sink=Sink()))
        return exc

    assert run_host(main) is broke


def test_y018_a_sink_feeds_an_asyncio_queue_while_the_batch_runs() -> None:
    """Y-018: a sink doing ``put_nowait`` on an ``asyncio.Queue``: the consumer receives
    events while the batch is still running."""
    sleeper = Sleeper(1, cleanup=0)
    received: list[str] = []

    async def main() -> None:
        queue: asyncio.Queue[object] = asyncio.Queue()

        class QueueSink:
            def on_call(self, event: CallStarted) -> None:
                queue.put_nowait(event)

            def on_result(self, event: CallCommitted) -> None:
                queue.put_nowait(event)

            def on_context(self, event: object) -> None:
                queue.put_nowait(event)

        calls = (*echo_calls("a"), *slow_calls(1))
        batch = asyncio.create_task(aio.run_tool_calls(sleeper.runtime(), calls, sink=QueueSink()))
        while len(received) < 3:  # echo started + committed, slow started
            event = await queue.get()
            received.append(f"{type(event).__name__} {event.call.call_id}")  # type: ignore[attr-defined]
        assert not batch.done()
        sleeper.release.set()
        await batch
        while not queue.empty():
            event = queue.get_nowait()
            received.append(f"{type(event).__name__} {event.call.call_id}")  # type: ignore[attr-defined]

    run_host(main)
    assert received == [
        "CallStarted e0",
        "CallCommitted e0",
        "CallStarted s0",
        "CallCommitted s0",
    ]


# -- where the bridge may be used -----------------------------------------------------------


def test_y009_awaited_inside_trio_run() -> None:
    """Y-009: ``aio.run_tool_calls`` awaited inside ``trio.run``, and ``Portal.run`` and
    ``portal()`` from trio code, raise the trio-run error."""

    async def main() -> None:
        with pytest.raises(RuntimeError, match=exactly(IN_TRIO)):
            await aio.run_tool_calls(echo_runtime(), echo_calls("a"))
        with pytest.raises(RuntimeError, match=exactly(IN_TRIO)):
            async with aio.portal():
                pass  # pragma: no cover

    trio.run(main)


def test_y009_awaited_by_a_tool_body_running_in_a_portal() -> None:
    """Y-009: a tool body (trio code in the portal) awaiting the bridge gets the error."""
    runtime = echo_runtime()
    errors: list[str] = []
    portals: list[aio.Portal] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        for attempt in (
            lambda: aio.run_tool_calls(runtime, echo_calls("a")),
            lambda: portals[0].run(trio.sleep, 0),
        ):
            try:
                await attempt()
            except RuntimeError as exc:
                errors.append(str(exc))
        return "done"

    runtime.register(raw_tool("nested", body))

    async def main() -> str:
        async with aio.portal() as portal:
            portals.append(portal)
            outcome = await aio.run_tool_calls(
                runtime, [ModelToolCall(call_id="n", name="nested", arguments="{}")]
            )
        return text_of(outcome.results[0].result)

    assert run_host(main) == "done"
    assert errors == [IN_TRIO, IN_TRIO]


def test_y010_no_running_loop() -> None:
    """Y-010: a bridge coroutine driven by hand with ``send(None)``, no loop."""
    coro = aio.run_tool_calls(echo_runtime(), echo_calls("a"))
    with pytest.raises(RuntimeError, match=exactly(NO_LOOP)):
        coro.send(None)
    enter = aio.portal().__aenter__()
    with pytest.raises(RuntimeError, match=exactly(NO_LOOP)):
        enter.send(None)
    assert not trio.lowlevel.in_trio_run()


# -- context variables ------------------------------------------------------------------------

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


def test_y013_context_variables_cross_into_trio_and_not_back() -> None:
    """Y-013: hooks and bodies see the asyncio caller's value; a value a hook sets is seen
    downstream exactly as on the trio path, and never flows back to the caller."""
    seen: list[tuple[str, str]] = []
    runtime = ToolRuntime()

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        seen.append((f"body {ctx.call_id}", request_id.get()))
        return "x"

    async def pre(execution: Any, call_next: Any) -> Any:
        seen.append((f"hook {execution.call_id}", request_id.get()))
        request_id.set(f"set in the hook of {execution.call_id}")
        return await call_next()

    runtime.register(raw_tool("t", body))
    runtime.on_pre_execute(pre)
    calls = [ModelToolCall(call_id=c, name="t", arguments="") for c in ("c1", "c2")]

    async def main() -> str:
        request_id.set("req-7")
        await aio.run_tool_calls(runtime, calls)
        return request_id.get()

    async def native() -> str:
        request_id.set("req-7")
        await dsh_sched.run_tool_calls(runtime, calls)
        return request_id.get()

    assert run_host(main) == "req-7"
    assert seen[:2] == [("hook c1", "req-7"), ("body c1", "set in the hook of c1")]
    bridged = list(seen)
    seen.clear()
    assert trio.run(native) == "req-7"
    assert bridged == seen


# -- asyncio bodies (run_on_asyncio, aio_tool) ---------------------------------------------


@aio.aio_tool
async def _fetch(url: str, times: int = 1) -> str:
    """Fetch a URL (an asyncio body)."""
    lock = asyncio.Lock()
    async with lock:
        await asyncio.sleep(0)
    assert sniffio.current_async_library() == "asyncio"
    return url * times


async def _fetch_plain(url: str, times: int = 1) -> str:
    """Fetch a URL (an asyncio body)."""
    return url * times


def test_y015_aio_tool_under_tool_keeps_the_schema_and_runs_on_asyncio() -> None:
    """Y-015: ``@tool @aio_tool`` has the schema ``@tool`` alone would derive; it runs through
    the bridge and its value is the result."""
    fetch = tool(name="fetch")(_fetch)
    plain = tool(name="fetch")(_fetch_plain)
    runtime = ToolRuntime()
    runtime.register(fetch)
    assert runtime.schemas() == list(_schemas_of(plain))

    async def main() -> dsh_sched.BatchOutcome:
        calls = [ModelToolCall(call_id="f", name="fetch", arguments={"url": "ab", "times": 2})]
        return await aio.run_tool_calls(runtime, calls)

    outcome = run_host(main)
    result = outcome.results[0].result
    assert not result.is_error, result
    assert result.value == "abab"


def _schemas_of(definition: Any) -> list[Any]:
    runtime = ToolRuntime()
    runtime.register(definition)
    return list(runtime.schemas())


def _aio_runtime(body: Any, *, timeout: float | None = None) -> ToolRuntime:
    runtime = ToolRuntime()
    runtime.register(
        define_tool(
            name="a",
            description="an asyncio body",
            parameters={"type": "object"},
            output=text_output(),
            execute=aio.aio_tool(body),
            timeout=timeout,
        )
    )
    return runtime


def test_y016_abort_cancels_an_asyncio_body_after_its_cleanup() -> None:
    """Y-016: an ``Abort`` while an asyncio body sleeps: ``CancelledError`` inside it, its
    cleanup runs, the result is ``ABORTED``."""
    steps: list[str] = []
    abort = Abort()

    async def main() -> dsh_sched.BatchOutcome:
        sleeping = asyncio.Event()

        async def body(args: JsonValue, ctx: ToolRunContext) -> str:
            try:
                sleeping.set()
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                await asyncio.sleep(0.01)  # an asyncio cleanup that awaits
                steps.append("cleanup")
                raise
            return "never"  # pragma: no cover

        runtime = _aio_runtime(body)
        calls = [ModelToolCall(call_id="c", name="a", arguments="{}")]
        task = asyncio.create_task(aio.run_tool_calls(runtime, calls, abort=abort))
        await sleeping.wait()
        abort.abort()
        return await task

    outcome = run_host(main)
    assert steps == ["cleanup"]
    assert code_of(outcome.results[0].result) == ABORTED


def test_y016_timeout_policy_deadline_on_an_asyncio_body() -> None:
    """Y-016: the timeout policy's deadline ends an asyncio body: ``TOOL_TIMEOUT``."""

    async def body(args: JsonValue, ctx: ToolRunContext) -> str:
        await asyncio.sleep(30)
        return "never"  # pragma: no cover

    runtime = _aio_runtime(body, timeout=0.05)
    install_timeout_policy(runtime)

    async def main() -> dsh_sched.BatchOutcome:
        calls = [ModelToolCall(call_id="c", name="a", arguments="{}")]
        return await aio.run_tool_calls(runtime, calls)

    result = run_host(main).results[0].result
    assert code_of(result) == TOOL_TIMEOUT


def test_y016_asyncio_body_swallowing_cancellation_is_aborted_by_check_e() -> None:
    """Y-016: a body that catches ``CancelledError`` and returns gets ``ABORTED`` (check E);
    ``run_on_asyncio`` hands its value back once trio was cancelled."""
    abort = Abort()
    returned: list[object] = []

    async def main() -> dsh_sched.BatchOutcome:
        sleeping = asyncio.Event()

        async def body(args: JsonValue, ctx: ToolRunContext) -> str:
            try:
                sleeping.set()
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                returned.append("swallowed")
            return "late value"

        runtime = _aio_runtime(body)
        calls = [ModelToolCall(call_id="c", name="a", arguments="{}")]
        task = asyncio.create_task(aio.run_tool_calls(runtime, calls, abort=abort))
        await sleeping.wait()
        abort.abort()
        return await task

    result = run_host(main).results[0].result
    assert returned == ["swallowed"]
    assert code_of(result) == ABORTED


def test_y016_asyncio_body_raising_during_cancellation_is_its_result() -> None:
    """Y-016 (I§3.3): if the cancelled asyncio task raises instead, that is the outcome."""
    abort = Abort()

    async def main() -> dsh_sched.BatchOutcome:
        sleeping = asyncio.Event()

        async def body(args: JsonValue, ctx: ToolRunContext) -> str:
            try:
                sleeping.set()
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                raise ValueError("cleanup failed") from None
            return "never"  # pragma: no cover

        runtime = _aio_runtime(body)
        calls = [ModelToolCall(call_id="c", name="a", arguments="{}")]
        task = asyncio.create_task(aio.run_tool_calls(runtime, calls, abort=abort))
        await sleeping.wait()
        abort.abort()
        return await task

    result = run_host(main).results[0].result
    # The body's own error is its result: the exception crossed back into trio unchanged.
    assert error_text(result) == "Error: cleanup failed"


def test_y016_asyncio_body_errors_and_context_members() -> None:
    """Y-016: an asyncio body's exception is its error result; ``ToolRunContext``'s sync
    members work from the asyncio side; the trio task's context variables cross over."""

    async def body(args: JsonValue, ctx: ToolRunContext) -> str:
        assert request_id.get() == "from asyncio caller"
        ctx.conclude_turn()
        if args["fail"]:
            raise ValueError("asyncio body failed")
        return ctx.call_id

    runtime = _aio_runtime(body)

    async def main() -> dsh_sched.BatchOutcome:
        request_id.set("from asyncio caller")
        calls = [
            ModelToolCall(call_id="ok", name="a", arguments={"fail": False}),
            ModelToolCall(call_id="bad", name="a", arguments={"fail": True}),
        ]
        return await aio.run_tool_calls(runtime, calls)

    outcome = run_host(main)
    assert text_of(outcome.results[0].result) == "ok"
    assert error_text(outcome.results[1].result) == "Error: asyncio body failed"
    assert outcome.concludes_turn


def test_y016_asyncio_task_cancelled_by_asyncio_code_is_an_error() -> None:
    """I§3.3: the asyncio task cancelled by asyncio code (not its trio caller) gives the
    caller a plain ``RuntimeError``."""
    found: list[str] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> str:
        current = asyncio.current_task()
        assert current is not None
        current.cancel()
        await asyncio.sleep(0)
        return "never"  # pragma: no cover

    wrapped = aio.aio_tool(body)

    async def trio_side() -> None:
        try:
            await wrapped({}, cast("ToolRunContext", None))
        except RuntimeError as exc:
            found.append(str(exc))

    async def main() -> None:
        async with aio.portal() as portal:
            await portal.run(trio_side)

    run_host(main)
    assert found == [
        "run_on_asyncio(): the asyncio task was cancelled by asyncio code, not by its trio caller"
    ]


def test_y017_aio_tool_and_run_on_asyncio_misuse() -> None:
    """Y-017: ``aio_tool`` of a sync function; an ``aio_tool`` body and ``run_on_asyncio``
    under plain ``trio.run``."""
    with pytest.raises(TypeError, match=exactly("aio_tool() requires an async function")):
        aio.aio_tool(lambda a, c: 1)  # type: ignore[type-var]

    async def body(args: JsonValue, ctx: ToolRunContext) -> str:
        return "never"  # pragma: no cover

    runtime = _aio_runtime(body)

    async def main() -> dsh_sched.BatchOutcome:
        with pytest.raises(RuntimeError, match=exactly(RUN_ON_ASYNCIO)):
            await aio.run_on_asyncio(asyncio.sleep, 0)
        calls = [ModelToolCall(call_id="c", name="a", arguments="{}")]
        return await dsh_sched.run_tool_calls(runtime, calls)

    outcome = trio.run(main)
    assert error_text(outcome.results[0].result) == f"Error: {RUN_ON_ASYNCIO}"

    async def from_asyncio() -> None:
        with pytest.raises(RuntimeError, match=exactly(RUN_ON_ASYNCIO)):
            await aio.run_on_asyncio(asyncio.sleep, 0)

    run_host(from_asyncio)


def test_y022_anyio_and_sniffio_on_both_sides() -> None:
    """Y-022: an anyio task group on the asyncio side while a batch runs; sniffio says
    ``"asyncio"`` in an asyncio task and ``"trio"`` in a tool body."""
    libraries: list[str] = []

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        libraries.append(sniffio.current_async_library())
        await trio.sleep(0.01)
        return "x"

    runtime = ToolRuntime()
    runtime.register(raw_tool("t", body, is_concurrency_safe=True))

    async def main() -> None:
        async def batch() -> None:
            await aio.run_tool_calls(runtime, [ModelToolCall(call_id="c", name="t", arguments="")])
            libraries.append(sniffio.current_async_library())

        async with anyio.create_task_group() as group:
            group.start_soon(batch)
            group.start_soon(batch)
            await anyio.lowlevel.checkpoint()
            libraries.append(sniffio.current_async_library())

    run_host(main)
    assert sorted(libraries) == ["asyncio"] * 3 + ["trio"] * 2


def test_parent_must_be_a_token_through_the_bridge() -> None:
    """S§2.1 through the bridge: a wrong ``parent`` is refused with the trio form's text."""

    async def main() -> None:
        with pytest.raises(TypeError, match=exactly("parent must be an ExecutionToken or None")):
            await aio.run_tool_calls(echo_runtime(), echo_calls("a"), parent="x")  # type: ignore[arg-type]

    run_host(main)
    assert ExecutionToken is not None

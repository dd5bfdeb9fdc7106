"""The portal (integrations §3.1): one trio guest run per running asyncio loop, its keeper,
the explicit ``async with portal()`` form, stale and foreign runs."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
import threading
from typing import TYPE_CHECKING, Any

import pytest
import trio

import dsh_sched
from dsh_sched import aio
from tests.aio_helpers import HOSTS, collect, echo_calls, echo_runtime, run_host
from tests.helpers import exactly, raw_tool
from tests.test_sched_fixtures import text_of

if TYPE_CHECKING:
    import outcome

CLOSED = "dsh_sched.aio portal is closed"
STALE = (
    "dsh_sched.aio cannot start: this thread still runs the portal of an asyncio loop that "
    "is no longer running (end loops with asyncio.run(), or use async with "
    "dsh_sched.aio.portal())"
)
FOREIGN = (
    "dsh_sched.aio cannot start: this thread already runs a trio run that dsh_sched.aio "
    "did not start"
)
STOPPED = "dsh_sched.aio portal stopped unexpectedly"


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def _one_batch() -> str:
    outcome = await aio.run_tool_calls(echo_runtime(), echo_calls("hi"))
    return text_of(outcome.results[0].result)


@pytest.mark.parametrize("host", HOSTS)
def test_y008_y019_three_asyncio_runs_then_trio_run_in_one_thread(host: str) -> None:
    """Y-008, Y-019: the keeper ends each loop's trio run at shutdown, so the thread can
    run the bridge again, three times, and then a plain ``trio.run``."""
    for _ in range(3):
        assert run_host(_one_batch, host) == "hi"
        assert not trio.lowlevel.in_trio_run()

    async def native() -> str:
        outcome = await dsh_sched.run_tool_calls(echo_runtime(), echo_calls("trio"))
        return text_of(outcome.results[0].result)

    assert trio.run(native) == "trio"


def test_keeper_cancels_work_still_running_at_shutdown() -> None:
    """I§3.1 item 2: a batch still running in a background task when ``asyncio.run``
    returns is cancelled and drained; ``asyncio.run`` returns after the trio run ended."""
    steps: list[str] = []
    runtime = echo_runtime()

    async def body(args: Any, ctx: Any) -> object:
        steps.append("start")
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(0.01)
                steps.append("drained")

    runtime.register(raw_tool("forever", body))
    results: list[BaseException | None] = []

    async def background() -> None:
        calls = [dsh_sched.ModelToolCall(call_id="f", name="forever", arguments="")]
        _, exc = await collect(aio.run_tool_calls(runtime, calls))
        results.append(exc)

    async def main() -> None:
        started = asyncio.Event()
        runtime.on_pre_execute(lambda execution, call_next: _set_then(started, call_next))
        # Kept alive by the loop: asyncio.run cancels it at shutdown.
        main.task = asyncio.create_task(background())  # type: ignore[attr-defined]
        await started.wait()

    asyncio.run(main())
    assert steps == ["start", "drained"]
    assert len(results) == 1
    assert isinstance(results[0], asyncio.CancelledError)
    assert not trio.lowlevel.in_trio_run()


async def _set_then(event: asyncio.Event, call_next: Any) -> Any:
    event.set()
    return await call_next()


def test_ctrl_c_under_asyncio_run_drains_the_batch() -> None:
    """I§3.1 item 1: SIGINT stays asyncio's: ``asyncio.run`` turns it into a cancellation of
    its main task, which drains the batch (cleanups done, results recorded) before
    ``KeyboardInterrupt`` leaves ``asyncio.run``."""
    steps: list[str] = []
    sink = dsh_sched.RecordingSink()
    runtime = echo_runtime()

    async def body(args: Any, ctx: Any) -> object:
        steps.append("start")
        try:
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await trio.sleep(0.01)
                steps.append("cleanup done")

    started = asyncio.Event()
    runtime.register(raw_tool("forever", body))
    runtime.on_pre_execute(lambda execution, call_next: _set_then(started, call_next))

    async def main() -> None:
        calls = [dsh_sched.ModelToolCall(call_id="f", name="forever", arguments="")]
        batch = asyncio.create_task(aio.run_tool_calls(runtime, calls, sink=sink))
        await started.wait()
        signal.raise_signal(signal.SIGINT)
        await batch

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(main())
    assert steps == ["start", "cleanup done"]
    committed = [e for e in sink.events if isinstance(e, dsh_sched.CallCommitted)]
    assert len(committed) == 1
    assert committed[0].result.is_error
    assert not trio.lowlevel.in_trio_run()


def test_y011_hand_driven_loop_left_open_makes_the_thread_unusable() -> None:
    """Y-011: a hand-driven loop that used the lazy portal and was closed leaves its run in
    the thread; the bridge under ``asyncio.run`` then raises the "no longer running" error.
    (In a subprocess: the thread it leaves behind cannot run trio again.)"""
    result = _python(
        """
        import asyncio
        from dsh_sched import aio, ModelToolCall
        from dsh_tools import ToolRuntime

        async def use():
            await aio.run_tool_calls(ToolRuntime(), [])

        loop = asyncio.new_event_loop()
        loop.run_until_complete(use())
        loop.close()
        try:
            asyncio.run(use())
        except RuntimeError as exc:
            print(exc)
        """
    )
    assert result.stdout.strip() == STALE, result.stderr


def test_y011_hand_driven_loop_with_the_explicit_form_leaves_nothing_behind() -> None:
    """Y-011: the same hand-driven loop with ``async with aio.portal()`` ends its run and
    its keeper inside the block's exit; a later ``trio.run`` works."""
    loop = asyncio.new_event_loop()

    async def main() -> tuple[str, bool, int]:
        async with aio.portal() as portal:
            text = await _one_batch()
        return text, portal.closed, len(asyncio.all_tasks())

    try:
        assert loop.run_until_complete(main()) == ("hi", True, 1)  # only main itself
        assert asyncio.all_tasks(loop) == set()
    finally:
        loop.close()
    assert not trio.lowlevel.in_trio_run()
    trio.run(trio.sleep, 0)


def test_y011_a_trio_run_not_started_by_the_bridge() -> None:
    """I§3.1 item 4: someone else's guest run in the thread → the "did not start" error."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stop = trio.Event()
        ended: asyncio.Future[outcome.Outcome[None]] = loop.create_future()
        trio.lowlevel.start_guest_run(
            stop.wait,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            done_callback=ended.set_result,
            host_uses_signal_set_wakeup_fd=True,
        )
        try:
            with pytest.raises(RuntimeError, match=exactly(FOREIGN)):
                await _one_batch()
            with pytest.raises(RuntimeError, match=exactly(FOREIGN)):
                async with aio.portal():
                    pass  # pragma: no cover
        finally:
            stop.set()
            (await ended).unwrap()

    asyncio.run(main())


def test_y011_stale_run_in_process_and_recovered_like_asyncio_run() -> None:
    """Y-011: a hand-driven loop that stopped with its portal alive makes the bridge refuse
    to start on another loop; cancelling that loop's remaining tasks (what ``asyncio.run``
    does at shutdown) ends the run and frees the thread."""
    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(_one_batch()) == "hi"
        assert trio.lowlevel.in_trio_run()

        async def elsewhere() -> None:
            with pytest.raises(RuntimeError, match=exactly(STALE)):
                await _one_batch()
            with pytest.raises(RuntimeError, match=exactly(STALE)):
                async with aio.portal():
                    pass  # pragma: no cover

        asyncio.run(elsewhere())
        remaining = asyncio.all_tasks(loop)
        assert [t.get_name() for t in remaining] == ["dsh_sched.aio keeper"]
        for task in remaining:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*remaining, return_exceptions=True))
    finally:
        loop.close()
    assert not trio.lowlevel.in_trio_run()
    assert run_host(_one_batch) == "hi"


def test_keeper_cancelled_alone_closes_the_portal_for_its_callers() -> None:
    """I§3.1 item 2: if only the keeper is cancelled, the work in flight is cancelled and
    drained, and a caller whose own task was not cancelled gets the closed error."""
    steps: list[str] = []

    async def forever() -> None:
        try:
            await trio.sleep_forever()
        finally:
            steps.append("trio side cancelled")

    async def main() -> None:
        async with aio.portal() as portal:
            call = asyncio.create_task(portal.run(forever))
            await asyncio.sleep(0)
            (keeper,) = [t for t in asyncio.all_tasks() if t.get_name() == "dsh_sched.aio keeper"]
            keeper.cancel()
            _, exc = await collect(call)
            assert isinstance(exc, RuntimeError)
            assert str(exc) == CLOSED
            await collect(keeper)
            assert keeper.cancelled()
            assert portal.closed

    run_host(main)
    assert steps == ["trio side cancelled"]


def test_y012_explicit_portal_block() -> None:
    """Y-012: ``p.run`` returns the value; the exit waits for a call in flight from another
    task; ``p.run`` after the exit raises the closed error; a lazy start is reused."""
    steps: list[str] = []

    async def slow_trio(x: int) -> int:
        await trio.sleep(0.05)
        steps.append("in-flight call ended")
        return x * 2

    async def main() -> None:
        async with aio.portal() as portal:
            assert "open" in repr(portal)
            await portal.run(trio.sleep, 0)
            assert await portal.run(slow_trio, 1) == 2
            in_flight = asyncio.create_task(portal.run(slow_trio, 21))
            await asyncio.sleep(0)
        steps.append("block exited")
        assert portal.closed
        assert in_flight.result() == 42
        with pytest.raises(RuntimeError, match=exactly(CLOSED)):
            await portal.run(trio.sleep, 0)
        assert "closed" in repr(portal)
        # A new lazy portal starts for later work on the loop.
        assert await _one_batch() == "hi"

    run_host(main)
    assert steps == ["in-flight call ended", "in-flight call ended", "block exited"]


def test_y012_cancel_in_the_same_step_as_the_value_discards_it() -> None:
    """I§3.2 item 3: work that finished in the very step its caller was cancelled is not
    undone; its value is discarded and ``CancelledError`` raised."""
    caller: list[asyncio.Task[Any]] = []

    async def cancel_my_caller() -> int:
        caller[0].cancel()  # no checkpoint follows: the trio task ends in this step
        return 1

    async def main() -> BaseException | None:
        async with aio.portal() as portal:
            caller.append(asyncio.create_task(portal.run(cancel_my_caller)))
            _, exc = await collect(caller[0])
        return exc

    assert isinstance(run_host(main), asyncio.CancelledError)


def test_y012_block_inside_a_lazily_started_portal_leaves_it_running() -> None:
    """Y-012: a ``portal()`` block that found the portal running leaves it running."""

    async def main() -> None:
        assert await _one_batch() == "hi"  # starts the portal lazily
        async with aio.portal() as outer:
            async with aio.portal() as inner:
                assert inner is outer
            assert not inner.closed
        assert not outer.closed
        assert "open" in repr(outer)
        await outer.run(trio.sleep, 0)
        assert not outer.closed

    run_host(main)


def test_y012_portal_misuse() -> None:
    """Y-012: no public constructor; a block entered twice; a portal of another loop."""
    with pytest.raises(TypeError, match="Portal has no public constructor"):
        aio.Portal()
    captured: list[aio.Portal] = []

    async def first() -> None:
        block = aio.portal()
        async with block as portal:
            captured.append(portal)
            with pytest.raises(RuntimeError, match="can be entered only once"):
                await block.__aenter__()

    async def second() -> None:
        with pytest.raises(RuntimeError, match=exactly(CLOSED)):
            await captured[0].run(trio.sleep, 0)
        async with aio.portal() as portal:
            assert portal is not captured[0]

    async def other_loop() -> None:
        with pytest.raises(RuntimeError, match="belongs to another event loop"):
            await portal_of_loop_a.run(trio.sleep, 0)

    run_host(first)
    run_host(second)

    # A portal alive on loop A, used from loop B in another thread.
    loop_a = asyncio.new_event_loop()
    try:

        async def open_portal() -> aio.Portal:
            block = aio.portal()
            portal = await block.__aenter__()
            await portal.run(trio.sleep, 0)
            blocks.append(block)
            return portal

        blocks: list[Any] = []
        portal_of_loop_a = loop_a.run_until_complete(open_portal())
        thread = threading.Thread(target=lambda: asyncio.run(other_loop()))
        thread.start()
        thread.join()
        loop_a.run_until_complete(blocks[0].__aexit__(None, None, None))
    finally:
        loop_a.close()
    assert not trio.lowlevel.in_trio_run()


def test_portal_closing_refuses_new_work_from_other_tasks() -> None:
    """I§3.1 item 3: while the block's exit waits for work in flight, other work on the
    loop is refused with the closed error (the run cannot be replaced until it ended)."""

    async def main() -> None:
        release = trio.Event()
        async with aio.portal() as portal:
            in_flight = asyncio.create_task(portal.run(release.wait))
            await asyncio.sleep(0)

            async def late() -> None:
                await asyncio.sleep(0)
                with pytest.raises(RuntimeError, match=exactly(CLOSED)):
                    await _one_batch()
                with pytest.raises(RuntimeError, match=exactly(CLOSED)):
                    async with aio.portal():
                        pass  # pragma: no cover
                release.set()

            checker = asyncio.create_task(late())
        await checker
        await in_flight

    run_host(main)


def test_portal_exit_drains_even_when_cancelled() -> None:
    """I§3.1 item 3: the block's exit waits for the run to end even if its task is
    cancelled meanwhile, then re-raises the cancellation."""
    steps: list[str] = []

    async def slow() -> None:
        with trio.CancelScope(shield=True):
            await trio.sleep(0.05)
        steps.append("trio work ended")

    async def block() -> None:
        async with aio.portal() as portal:
            asyncio.create_task(portal.run(slow))  # noqa: RUF006 - awaited through the exit
            await asyncio.sleep(0)
            steps.append("exiting")

    async def main() -> None:
        task = asyncio.create_task(block())
        while "exiting" not in steps:
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.sleep(0)
        task.cancel()
        _, exc = await collect(task)
        steps.append(type(exc).__name__)

    run_host(main)
    assert steps == ["exiting", "trio work ended", "CancelledError"]


def test_portal_that_stops_unexpectedly() -> None:
    """I§3.1 item 5: a trio run that ends by itself → the waiting call raises the
    "stopped unexpectedly" error chained from the run's exception; the next call starts a
    new portal."""

    async def crash_the_portal() -> None:
        # Spawning a failing task into the portal's own nursery ends the run with an error.
        async def boom() -> None:
            raise ValueError("portal bug")

        nursery = trio.lowlevel.current_task().parent_nursery
        assert nursery is not None
        nursery.start_soon(boom)
        await trio.sleep_forever()

    async def end_the_portal() -> None:
        nursery = trio.lowlevel.current_task().parent_nursery
        assert nursery is not None
        nursery.cancel_scope.cancel()
        await trio.sleep_forever()

    async def main() -> None:
        async with aio.portal() as portal:
            with pytest.raises(RuntimeError, match=exactly(STOPPED)) as info:
                await portal.run(crash_the_portal)
            cause = info.value.__cause__
            assert isinstance(cause, BaseExceptionGroup)
            assert cause.subgroup(ValueError) is not None
            assert portal.closed
        assert await _one_batch() == "hi"
        async with aio.portal() as second:
            with pytest.raises(RuntimeError, match=exactly(STOPPED)) as info:
                await second.run(end_the_portal)
            assert info.value.__cause__ is None

    run_host(main)
    assert not trio.lowlevel.in_trio_run()


def test_y020_two_threads_with_their_own_loops_and_portals() -> None:
    """Y-020: two threads, each with its own loop and runtime, use the bridge at once."""
    barrier = threading.Barrier(2, timeout=30)
    results: dict[str, object] = {}

    def worker(name: str) -> None:
        async def main() -> tuple[str, object]:
            async with aio.portal() as portal:
                text = await _one_batch()
                # Both portals are alive at the same time.
                await asyncio.get_running_loop().run_in_executor(None, barrier.wait)
                root = await portal.run(_root_task)
                return text, root

        try:
            results[name] = asyncio.run(main())
        except BaseException as exc:  # pragma: no cover - reported by the assertion below
            results[name] = exc

    threads = [threading.Thread(target=worker, args=(n,)) for n in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [results[n][0] for n in ("a", "b")] == ["hi", "hi"], results  # type: ignore[index]
    assert results["a"][1] is not results["b"][1]  # type: ignore[index]


async def _root_task() -> object:
    return trio.lowlevel.current_root_task()


def test_y021_importing_the_bridge_starts_nothing() -> None:
    """Y-021: ``import dsh_sched.aio`` creates no task, no trio run and no loop; importing
    ``dsh_sched`` does not import the bridge (integrations §1)."""
    result = _python(
        """
        import sys
        import dsh_sched, dsh_tools
        assert "dsh_sched.aio" not in sys.modules
        import asyncio, threading, trio
        import dsh_sched.aio
        assert not trio.lowlevel.in_trio_run()
        assert asyncio._get_running_loop() is None
        assert getattr(asyncio.get_event_loop_policy()._local, "_loop", None) is None
        assert threading.active_count() == 1
        print("ok")
        """
    )
    assert result.stdout.strip() == "ok", result.stderr

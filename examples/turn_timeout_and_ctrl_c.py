"""Bound a turn with ``timeout=`` and let Ctrl-C abort it, with a reason for the model."""

import signal
from collections.abc import AsyncIterator

import trio

from dsh_sched import Batch, ModelToolCall, open_batch, run_tool_calls
from dsh_tools import ToolRuntime, tool


@tool(is_concurrency_safe=True)
async def lookup(topic: str) -> str:
    """Look a topic up in the notes (fast)."""
    await trio.sleep(0.05)
    return f"notes on {topic}"


@tool(is_concurrency_safe=True)
async def crawl(url: str) -> str:
    """Crawl a site (slow)."""
    await trio.sleep(60)
    return f"crawled {url}"


CALLS = [  # one assistant message
    ModelToolCall(call_id="c1", name="crawl", arguments='{"url": "https://example.org"}'),
    ModelToolCall(call_id="c2", name="lookup", arguments='{"topic": "trio"}'),
]


async def abort_on_ctrl_c(signals: AsyncIterator[int], batch: Batch) -> None:
    async for _ in signals:
        batch.abort.abort("user pressed Ctrl-C")  # the reason reaches the results' texts
        return


async def main() -> None:
    runtime = ToolRuntime()
    runtime.register(lookup)
    runtime.register(crawl)

    # 1. A turn bounded by a deadline: the batch Abort fires after 0.5 s. The finished
    #    lookup keeps its result; the interrupted crawl is ABORTED and says why.
    outcome = await run_tool_calls(runtime, CALLS, timeout=0.5)
    for committed in outcome.results:
        print(committed.call.name, committed.result.to_json())
    print("abort reason:", outcome.abort_reason)

    # 2. The same turn, aborted by Ctrl-C (or else by its 30 s deadline): open the batch
    #    first so that its Abort exists, then fire it from a signal-watching task.
    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            batch = open_batch(runtime, CALLS, timeout=30)
            nursery.start_soon(abort_on_ctrl_c, signals, batch)
            print("running; press Ctrl-C to abort the turn", flush=True)
            async with batch:
                async for committed in batch:  # live, in model order
                    print(committed.call.name, committed.result.to_json(), flush=True)
            nursery.cancel_scope.cancel()  # stop watching for Ctrl-C
    assert batch.outcome is not None
    print("abort reason:", batch.outcome.abort_reason)


trio.run(main)

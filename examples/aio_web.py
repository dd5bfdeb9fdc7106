"""An asyncio web app (Starlette, served by uvicorn) whose handler runs a batch of tool calls.

``POST /turn`` takes ``{"calls": [{"id": ..., "name": ..., "arguments": {...}}, ...]}``, runs
them with ``dsh_sched.aio.run_tool_calls`` and answers with one result per call. Every call
and result also goes to a JSONL session log. If the client disconnects while the batch
runs, the handler cancels the batch: the tool bodies get trio's ``Cancelled`` and finish
their cleanup, every call still gets its result in the log (``ABORTED`` for started calls,
``ABORTED_BEFORE_DISPATCH`` for the rest), and only then does the handler return.

Run it with ``python examples/aio_web.py`` (needs ``starlette`` and ``uvicorn``), then e.g.
``curl -d '{"calls": [{"id": "a", "name": "lookup", "arguments": {"city": "Oslo"}}]}'
http://127.0.0.1:8000/turn``.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from dsh_sched import BatchOutcome, JsonlSessionLog, ModelToolCall, aio
from dsh_tools import TextContent, ToolRuntime, tool

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = ["build_app", "build_runtime"]


@tool(is_concurrency_safe=True)
async def lookup(city: str, seconds: float = 0.0) -> str:
    """Look up the weather of a city, taking ``seconds`` to do it."""
    try:
        await trio.sleep(seconds)
    finally:
        # Cleanup that must finish even when the request is abandoned.
        with trio.CancelScope(shield=True):
            await trio.sleep(0.01)
    return f"{city}: sunny"


def build_runtime() -> ToolRuntime:
    """The app's tools."""
    runtime = ToolRuntime()
    runtime.register(lookup)
    return runtime


async def _disconnected(request: Request) -> None:
    # The body has been read, so the next ASGI message is the client going away.
    while (await request.receive())["type"] != "http.disconnect":
        pass  # pragma: no cover - nothing else arrives after the body


def build_app(runtime: ToolRuntime, log: JsonlSessionLog, *, on_turn: Any = None) -> Starlette:
    """The web app: ``POST /turn`` runs a batch and logs it to ``log``.

    Args:
        runtime: The tools.
        log: The JSONL session log every batch appends to (the caller closes it).
        on_turn: Called with ``"finished"`` or ``"client gone"`` when a turn ends (tests).
    """

    async def turn(request: Request) -> Response:
        body = await request.json()
        calls = [
            ModelToolCall(call_id=c["id"], name=c["name"], arguments=c.get("arguments", {}))
            for c in body["calls"]
        ]
        batch = asyncio.create_task(aio.run_tool_calls(runtime, calls, sink=log))
        gone = asyncio.create_task(_disconnected(request))
        await asyncio.wait((batch, gone), return_when=asyncio.FIRST_COMPLETED)
        if batch.done():
            gone.cancel()
            outcome: BatchOutcome = batch.result()
            if on_turn is not None:
                on_turn("finished")
            return JSONResponse(
                [
                    {
                        "id": c.call.call_id,
                        "is_error": c.result.is_error,
                        "text": "".join(
                            b.text for b in c.result.content if isinstance(b, TextContent)
                        ),
                    }
                    for c in outcome.results
                ]
            )
        # The client went away mid-batch: cancel it; the await returns once it has drained.
        batch.cancel()
        await asyncio.wait((batch,))
        if on_turn is not None:
            on_turn("client gone")
        return Response(status_code=499)

    return Starlette(routes=[Route("/turn", turn, methods=["POST"])])


if __name__ == "__main__":
    import uvicorn

    path = Path(tempfile.mkdtemp()) / "session.jsonl"
    print(f"session log: {path}")
    with JsonlSessionLog(path) as session_log:
        uvicorn.run(build_app(build_runtime(), session_log), host="127.0.0.1", port=8000)

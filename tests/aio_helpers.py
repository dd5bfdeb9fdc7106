"""Building blocks for the asyncio bridge tests (public API only).

pytest runs in trio mode, so every bridge test is a plain ``def`` test that runs its own
loop with :func:`run_host` (``asyncio.run``, or uvloop's when asked). Bodies coordinate
with the asyncio side through events rather than sleeps wherever an ordering is asserted.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, TypeVar

import pytest
import trio

from dsh_sched import ModelToolCall
from dsh_tools import JsonValue, ToolDefinition, ToolRunContext, ToolRuntime
from tests.helpers import make_echo, raw_tool

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine

__all__ = [
    "HOSTS",
    "Sleeper",
    "echo_calls",
    "echo_runtime",
    "run_host",
    "slow_calls",
]

_T = TypeVar("_T")

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is in the dev extra; other machines skip
    uvloop = None  # type: ignore[assignment]

#: The asyncio hosts every Y-019 test runs under: the stock loop, and uvloop when installed.
HOSTS = [
    pytest.param("asyncio", id="asyncio"),
    pytest.param(
        "uvloop",
        id="uvloop",
        marks=pytest.mark.skipif(uvloop is None, reason="uvloop is not installed"),
    ),
]


def run_host(main: Callable[[], Coroutine[Any, Any, _T]], host: str = "asyncio") -> _T:
    """Run ``main()`` in a fresh event loop of ``host``, the way an application would."""
    if host == "uvloop":
        assert uvloop is not None
        return uvloop.run(main())
    return asyncio.run(main())


def echo_runtime() -> ToolRuntime:
    runtime = ToolRuntime()
    runtime.register(make_echo())
    return runtime


def echo_calls(*texts: str) -> tuple[ModelToolCall, ...]:
    return tuple(
        ModelToolCall(call_id=f"e{i}", name="echo", arguments={"text": text})
        for i, text in enumerate(texts)
    )


def slow_calls(n: int, name: str = "slow") -> tuple[ModelToolCall, ...]:
    return tuple(ModelToolCall(call_id=f"s{i}", name=name, arguments="{}") for i in range(n))


class Sleeper:
    """A parallel tool ``slow`` whose bodies block until cancelled (or ``release``d), then
    run a shielded cleanup of ``cleanup`` seconds.

    ``started`` (an asyncio event) is set once ``expect`` bodies are running; ``steps``
    records ``start``/``cleanup done`` in order, next to the asyncio side's own steps.
    """

    def __init__(self, expect: int, *, cleanup: float = 0.05) -> None:
        self.expect = expect
        self.cleanup = cleanup
        self.steps: list[str] = []
        self.running = 0
        self.started = asyncio.Event()
        self.release = trio.Event()
        self.cleanup_started = asyncio.Event()
        self.cleanup_gate: trio.Event | None = None

    async def body(self, args: JsonValue, ctx: ToolRunContext) -> object:
        self.steps.append("start")
        self.running += 1
        if self.running == self.expect:
            # A sync call on an asyncio primitive: allowed across (integrations §3.4).
            self.started.set()
        try:
            await self.release.wait()
        finally:
            with trio.CancelScope(shield=True):
                self.cleanup_started.set()
                if self.cleanup_gate is not None:
                    await self.cleanup_gate.wait()
                await trio.sleep(self.cleanup)
                self.steps.append("cleanup done")
        return ctx.call_id

    def tool(self) -> ToolDefinition:
        return raw_tool("slow", self.body, is_concurrency_safe=True)

    def runtime(self) -> ToolRuntime:
        runtime = echo_runtime()
        runtime.register(self.tool())
        return runtime


async def collect(awaitable: Awaitable[_T]) -> tuple[_T | None, BaseException | None]:
    """Await and return ``(value, None)`` or ``(None, exception)``, cancellation included."""
    try:
        return await awaitable, None
    except BaseException as exc:
        return None, exc

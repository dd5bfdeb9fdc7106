"""Checking ``open_batch``'s arguments before anything is entered (scheduler.md §2.1)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from dsh_tools import Abort, ExecutionToken, Scope, ToolRuntime
from dsh_tools.lowlevel import is_async_callable

from ._calls import ModelToolCall

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["validate"]

_SINK_METHODS = ("on_call", "on_result", "on_context")


def validate(
    runtime: ToolRuntime,
    calls: Iterable[ModelToolCall],
    scope: object,
    abort: object,
    max_parallel: object,
    sink: object,
    parent: object,
    root_call_id: object,
    keep_results: object,
    timeout: object,
) -> tuple[ModelToolCall, ...]:
    # The order is scheduler.md §2.1's; nothing is started or recorded before it passes.
    if not isinstance(runtime, ToolRuntime):
        raise TypeError(f"runtime must be a ToolRuntime, got {type(runtime).__name__}")
    if isinstance(max_parallel, bool) or not isinstance(max_parallel, int):
        raise TypeError("max_parallel must be a positive integer")
    if max_parallel < 1:
        raise ValueError("max_parallel must be a positive integer")
    try:
        iterator = iter(calls)
    except TypeError:
        raise TypeError(
            f"calls must be an iterable of ModelToolCall objects, got {type(calls).__name__}"
        ) from None
    materialized = tuple(iterator)
    for item in materialized:
        if not isinstance(item, ModelToolCall):
            raise TypeError(f"calls must contain ModelToolCall objects, got {type(item).__name__}")
    # Exact types, as ToolCall checks them: the driver builds each call's ToolCall from these
    # without checking them again.
    if scope is not None:
        if type(scope) is not Scope:
            raise TypeError("scope must be a Scope or None")
        if scope.runtime is not runtime:
            raise ValueError("scope belongs to a different runtime")
    if abort is not None and type(abort) is not Abort:
        raise TypeError("abort must be an Abort or None")
    if sink is not None and not all(callable(getattr(sink, name, None)) for name in _SINK_METHODS):
        raise TypeError("sink must provide on_call, on_result and on_context")
    if sink is not None:
        for name in _SINK_METHODS:
            if is_async_callable(getattr(sink, name)):
                # Called without awaiting: its coroutine would be dropped and every event lost.
                raise TypeError(
                    f"sink.{name} is async; sink methods are called synchronously in the "
                    "driver task: make them plain methods (hand events to a task through a "
                    "trio memory channel's send_nowait if they must await)"
                )
    if parent is not None and type(parent) is not ExecutionToken:
        raise TypeError("parent must be an ExecutionToken or None")
    if root_call_id is not None and type(root_call_id) is not str:
        raise TypeError("root_call_id must be a str or None")
    if not isinstance(keep_results, bool):
        raise TypeError("keep_results must be a bool")
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise TypeError("timeout must be a positive number or None")
        if not math.isfinite(timeout) or timeout <= 0:
            raise ValueError("timeout must be a positive number or None")
    return materialized

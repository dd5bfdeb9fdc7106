"""Sinks and their events (scheduler.md §5): guarantees, RecordingSink, sink=None cost."""

from __future__ import annotations

import attrs
import pytest

import dsh_sched._driver
from dsh_sched import (
    CallCommitted,
    CallStarted,
    ContextAccepted,
    ModelToolCall,
    RecordingSink,
    Sink,
    run_tool_calls,
)
from dsh_tools import ExecutionMode, TextContent, ToolRuntime, UserMessage, error_result
from tests.test_sched_fixtures import calls, gated_tool


def runtime() -> ToolRuntime:
    rt = ToolRuntime()
    rt.register(gated_tool("r", parallel=True, steps=[], contexts=2))
    rt.register(gated_tool("w", parallel=False, steps=[]))
    return rt


async def test_recording_sink_records_every_event_in_order() -> None:
    sink = RecordingSink()
    outcome = await run_tool_calls(runtime(), calls("r:c1", "w:c2"), sink=sink)
    kinds = [(type(e).__name__, e.index) for e in sink.events]
    assert kinds == [
        ("CallStarted", 0),
        ("CallCommitted", 0),
        ("CallStarted", 1),
        ("CallCommitted", 1),
        ("ContextAccepted", 0),
        ("ContextAccepted", 0),
    ]
    started = sink.events[0]
    assert isinstance(started, CallStarted)
    assert started.mode is ExecutionMode.PARALLEL
    assert started.token is not None
    assert not started.synthetic
    committed = sink.events[1]
    assert isinstance(committed, CallCommitted)
    assert committed.result is outcome.results[0].result
    contexts = [e for e in sink.events if isinstance(e, ContextAccepted)]
    assert [e.message for e in contexts] == list(outcome.additional_contexts)
    assert all(e.call is outcome.results[0].call for e in contexts)
    assert len({e.batch for e in sink.events}) == 1


async def test_events_are_frozen_keyword_only_values() -> None:
    call = ModelToolCall(call_id="c", name="r", arguments="")
    event = CallStarted(batch=1, index=0, call=call, mode=None, token=None, synthetic=True)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.index = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        CallStarted(1, 0, call, None, None, True)  # type: ignore[call-arg]
    result = error_result(ValueError("x"))
    assert CallCommitted(batch=1, index=0, call=call, result=result, synthetic=False) == (
        CallCommitted(batch=1, index=0, call=call, result=result, synthetic=False)
    )
    message = UserMessage(content=[TextContent("m")])
    assert ContextAccepted(batch=1, index=0, call=call, message=message).message is message


def test_recording_sink_satisfies_the_protocol() -> None:
    sink: Sink = RecordingSink()
    assert sink is not None
    assert RecordingSink().events == []


async def test_with_sink_none_no_event_objects_are_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """README "cost": with ``sink=None`` the scheduler builds no event objects at all."""

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("an event object was built")

    for name in ("CallStarted", "CallCommitted", "ContextAccepted"):
        monkeypatch.setattr(dsh_sched._driver, name, forbidden)
    outcome = await run_tool_calls(runtime(), calls("r:c1", "w:c2", "r:c3"))
    assert len(outcome.results) == 3
    assert len(outcome.additional_contexts) == 4


async def test_with_keep_results_false_and_no_iteration_no_committed_call_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("a CommittedCall was built")

    monkeypatch.setattr(dsh_sched._driver, "CommittedCall", forbidden)
    outcome = await run_tool_calls(runtime(), calls("r:c1", "r:c2"), keep_results=False)
    assert outcome.results == ()

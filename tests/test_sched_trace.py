"""TraceRecorder and check_trace (scheduler.md §12, §14): S-038 and recorder behaviour."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
import trio.testing

from dsh_sched import (
    BatchOutcome,
    CallCommitted,
    CallStarted,
    CommittedCall,
    ContextAccepted,
    ModelToolCall,
    RecordingSink,
    run_tool_calls,
)
from dsh_sched.testing import TraceEvent, TraceRecorder, check_trace
from dsh_tools import (
    Abort,
    AbortError,
    ExecutionMode,
    TextContent,
    ToolResult,
    ToolRuntime,
    UserMessage,
    error_result,
)
from tests.test_sched_fixtures import Gates, calls, gated_tool

if TYPE_CHECKING:
    from collections.abc import Callable

REPO = Path(__file__).resolve().parents[1]


async def recorded_batch(
    names: tuple[str, ...],
    *,
    max_parallel: int = 10,
    release: Callable[[Gates], None] | None = None,
) -> tuple[list[TraceEvent], Any]:
    runtime = ToolRuntime()
    sink = RecordingSink()
    recorder = TraceRecorder(runtime, sink=sink)
    steps: list[str] = []
    runtime.register(recorder.instrument(gated_tool("r", parallel=True, steps=steps, contexts=1)))
    runtime.register(recorder.instrument(gated_tool("w", parallel=False, steps=steps)))
    outcome = await run_tool_calls(runtime, calls(*names), sink=recorder, max_parallel=max_parallel)
    assert len(sink.events) >= 2 * len(names)  # forwarded to the inner sink
    recorder.close()
    return recorder.events, outcome


async def test_recorder_records_spans_and_forwards_events() -> None:
    events, outcome = await recorded_batch(("r:c1", "w:c2"))
    kinds = [e.kind for e in events]
    assert kinds == [
        "call",
        "pre_start",
        "pre_end",
        "body_start",
        "body_end",
        "post_start",
        "post_end",
        "observed",
        "result",
        "call",
        "pre_start",
        "pre_end",
        "body_start",
        "body_end",
        "post_start",
        "post_end",
        "observed",
        "result",
        "context",
    ]
    token = events[0].token
    assert token is not None
    assert all(e.token is token for e in events[:9])  # hook/body events carry the token
    assert events[0].batch is not None
    assert events[0].index == 0
    assert events[1].batch is None
    assert events[4].detail == "returned"
    assert events[7].detail is outcome.results[0].result
    check_trace(events, max_parallel=10, outcome=outcome)


async def test_recorder_close_removes_its_hooks() -> None:
    runtime = ToolRuntime()
    recorder = TraceRecorder(runtime)
    runtime.register(gated_tool("w", parallel=False, steps=[]))
    recorder.close()
    recorder.close()
    await run_tool_calls(runtime, calls("w:c1"))
    assert recorder.events == []


async def test_instrumented_body_records_raised_and_cancelled_endings() -> None:
    runtime = ToolRuntime()
    recorder = TraceRecorder(runtime)
    gates = Gates()
    runtime.register(recorder.instrument(gated_tool("bad", parallel=True, steps=[], fail="x")))
    runtime.register(recorder.instrument(gated_tool("r", parallel=True, steps=[], gates=gates)))

    abort = Abort()
    async with trio.open_nursery() as nursery:

        async def go() -> None:
            await run_tool_calls(runtime, calls("bad:c1", "r:c2"), sink=recorder, abort=abort)

        nursery.start_soon(go)
        await trio.testing.wait_all_tasks_blocked()
        abort.abort()
    endings = [e.detail for e in recorder.events if e.kind == "body_end"]
    assert sorted(str(d) for d in endings) == ["cancelled", "raised"]


async def test_check_trace_passes_on_real_batches() -> None:
    for names in [("r:c1", "r:c2", "r:c3"), ("w:c1", "r:c2", "w:c3"), ()]:
        events, outcome = await recorded_batch(names, max_parallel=2)
        check_trace(events, max_parallel=2, outcome=outcome)


# -- S-038: hand-made violating traces ----------------------------------------------------


class Tokens:
    """Stand-in tokens for hand-made traces (check_trace compares them by identity)."""

    def __init__(self) -> None:
        self._tokens: dict[int, Any] = {}

    def __call__(self, index: int) -> Any:
        return self._tokens.setdefault(index, object())


CALLS = [ModelToolCall(call_id=f"c{i}", name="t", arguments="") for i in range(4)]
OK = ToolResult(is_error=False, content=(TextContent("ok"),))
SYNTHETIC = error_result(AbortError("ABORTED_BEFORE_DISPATCH"))


class Trace:
    """Builds a trace event by event."""

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []
        self.token = Tokens()

    def add(
        self, kind: Any, index: int | None = None, detail: Any = None, *, token: Any = None
    ) -> None:
        self.events.append(
            TraceEvent(
                kind=kind,
                batch=1 if kind in ("call", "result", "context") else None,
                index=index,
                token=token,
                time=0.0,
                detail=detail,
            )
        )

    def call(
        self,
        i: int,
        mode: ExecutionMode | None = ExecutionMode.PARALLEL,
        *,
        synthetic: bool = False,
    ) -> None:
        token = None if synthetic else self.token(i)
        self.add(
            "call",
            i,
            CallStarted(
                batch=1,
                index=i,
                call=CALLS[i],
                mode=None if synthetic else mode,
                token=token,
                synthetic=synthetic,
            ),
            token=token,
        )

    def body(self, i: int, edge: str) -> None:
        self.add(f"body_{edge}", detail="returned" if edge == "end" else None, token=self.token(i))

    def result(self, i: int, result: ToolResult = OK, *, synthetic: bool = False) -> None:
        if not synthetic:
            self.add("observed", detail=result, token=self.token(i))
        self.add(
            "result",
            i,
            CallCommitted(batch=1, index=i, call=CALLS[i], result=result, synthetic=synthetic),
        )

    def run(self, i: int, mode: ExecutionMode = ExecutionMode.PARALLEL) -> None:
        self.call(i, mode)
        self.body(i, "start")
        self.body(i, "end")
        self.result(i)


def violations(trace: Trace, **kwargs: Any) -> str:
    kwargs.setdefault("max_parallel", 10)
    with pytest.raises(AssertionError) as info:
        check_trace(trace.events, **kwargs)
    return str(info.value)


def test_s038_a_correct_hand_made_trace_passes() -> None:
    t = Trace()
    t.run(0)
    t.run(1, ExecutionMode.EXCLUSIVE)
    check_trace(t.events, max_parallel=1)


def test_s038_overlap_of_an_exclusive_body_violates_i4() -> None:
    t = Trace()
    t.call(0, ExecutionMode.EXCLUSIVE)
    t.body(0, "start")
    t.body(1, "start")  # another body of the batch inside the exclusive span
    t.call(1)
    t.body(1, "end")
    t.body(0, "end")
    t.result(0)
    t.result(1)
    message = violations(t)
    assert "I4: body of call 1 overlaps exclusive call 0" in message
    assert "I4: on_call 1 occurs while exclusive call 0 runs" in message


def test_s038_max_parallel_plus_one_bodies_violates_i5() -> None:
    t = Trace()
    for i in range(3):
        t.call(i)
    for i in range(3):
        t.body(i, "start")
    for i in range(3):
        t.body(i, "end")
    for i in range(3):
        t.result(i)
    assert "I5: 3 bodies ran at once (max_parallel=2)" in violations(t, max_parallel=2)
    check_trace(t.events, max_parallel=3)


def test_s038_results_out_of_order_violate_i2() -> None:
    t = Trace()
    t.call(0)
    t.call(1)
    t.result(1)
    t.result(0)
    assert "I2: on_result events are not in model order: [1, 0]" in violations(t)


def test_s038_a_synthetic_before_a_started_call_violates_i7() -> None:
    t = Trace()
    t.call(0, synthetic=True)
    t.result(0, SYNTHETIC, synthetic=True)
    t.run(1)
    message = violations(t)
    assert "I7: synthetic call 0 precedes started call 1" in message


def test_synthetic_without_abort_violates_i7() -> None:

    t = Trace()
    t.call(0, synthetic=True)
    t.result(0, SYNTHETIC, synthetic=True)
    outcome = BatchOutcome(
        results=(
            CommittedCall(index=0, call=CALLS[0], result=SYNTHETIC, synthetic=True, mode=None),
        ),
        additional_contexts=(),
        concludes_turn=False,
        aborted=False,
    )
    assert "I7: synthetic calls [0] in a batch that was not aborted" in violations(
        t, outcome=outcome
    )


def test_missing_and_duplicate_events_violate_i1() -> None:
    t = Trace()
    t.call(0)
    t.call(0)
    t.result(0)
    t.result(0)
    t.call(2)
    message = violations(t)
    assert "I1: call 0 has 2 on_call events" in message
    assert "I1: call 0 has 2 on_result events" in message
    assert "I1: call 1 has no on_call" in message
    assert "I1: call 2 has no on_result" in message


def test_result_without_call_violates_i1() -> None:
    t = Trace()
    t.result(0)
    assert "I1: call 0 has an on_result without a preceding on_call" in violations(t)


def test_on_failure_the_started_calls_must_be_a_prefix() -> None:
    t = Trace()
    t.call(1)
    assert "I1: the calls with an on_call [1] are not a prefix" in violations(
        t, failure=RuntimeError()
    )
    u = Trace()
    u.call(0)
    check_trace(u.events, max_parallel=1, failure=RuntimeError())


def test_wrong_abort_code_violates_i6() -> None:
    t = Trace()
    t.call(0)
    t.result(0, error_result(AbortError("ABORTED")))  # no body ran
    t.call(1)
    t.body(1, "start")
    t.body(1, "end")
    t.result(1, SYNTHETIC)  # a body ran
    message = violations(t)
    assert "I6: call 0 got ABORTED but its body never started" in message
    assert "I6: call 1 got ABORTED_BEFORE_DISPATCH but its body started" in message


def test_committed_result_not_the_observed_object_violates_i8() -> None:
    t = Trace()
    t.call(0)
    t.add("observed", detail=ToolResult(is_error=False), token=t.token(0))
    t.add("result", 0, CallCommitted(batch=1, index=0, call=CALLS[0], result=OK, synthetic=False))
    assert "I8: committed result of call 0" in violations(t)


def test_synthetic_and_context_after_a_failure_violate_i9() -> None:
    message = UserMessage(content=[TextContent("m")])
    t = Trace()
    t.call(0)
    t.call(1, synthetic=True)
    t.result(1, SYNTHETIC, synthetic=True)
    t.add("context", 0, ContextAccepted(batch=1, index=0, call=CALLS[0], message=message))
    text = violations(t, failure=RuntimeError())
    assert "I9: synthetic result for call 1 while started calls [0] have no result" in text
    assert "I9: on_context while calls [0] have no result" in text


def test_overlapping_pre_execute_and_commit_violate_i10() -> None:
    t = Trace()
    t.call(0)
    t.add("pre_start", token=t.token(0))
    t.call(1)
    t.add("pre_start", token=t.token(1))  # overlaps c0's pre-execute
    t.add("pre_end", token=t.token(1))
    t.add("observed", detail=OK, token=t.token(0))  # c0's commit inside c0's own pre: fine
    t.add("pre_end", token=t.token(0))
    t.add("result", 0, CallCommitted(batch=1, index=0, call=CALLS[0], result=OK, synthetic=False))
    t.add("post_start", token=t.token(1))
    t.add("pre_start", token=t.token(0))
    t.add("pre_end", token=t.token(0))
    t.add("post_end", token=t.token(1))
    t.result(1)
    text = violations(t)
    assert "I10: pre-execute spans of calls 0 and 1 overlap" in text
    assert "I10: pre-execute spans do not start in model order: [0, 1, 0]" in text
    assert "I10: pre-execute of call 0 overlaps the commit of 1" in text


def test_contexts_must_follow_the_last_result_and_match_i11() -> None:
    message = UserMessage(content=[TextContent("m")])
    with_context = ToolResult(is_error=False, additional_contexts=(message,))
    t = Trace()
    t.call(0)
    t.result(0, with_context)
    t.add("context", 0, ContextAccepted(batch=1, index=0, call=CALLS[0], message=message))
    t.call(1)
    t.result(1)
    assert "I11: an on_context precedes the batch's last on_result" in violations(t)
    u = Trace()
    u.call(0)
    u.result(0, with_context)
    assert "I11: on_context events differ" in violations(u)


def test_outcome_must_match_the_results_i12() -> None:

    t = Trace()
    t.call(0)
    t.result(0)
    wrong = BatchOutcome(
        results=(
            CommittedCall(
                index=0,
                call=CALLS[0],
                result=ToolResult(is_error=False),
                synthetic=False,
                mode=None,
            ),
        ),
        additional_contexts=(),
        concludes_turn=True,
        aborted=False,
    )
    text = violations(t, outcome=wrong)
    assert "I12: outcome.concludes_turn is True, not False" in text
    assert "I12: outcome.results differ from the on_result events" in text


def test_events_of_several_batches_are_refused() -> None:
    t = Trace()
    t.call(0)
    t.events.append(TraceEvent(kind="call", batch=2, index=0, token=None, time=0.0, detail=None))
    with pytest.raises(ValueError, match="one batch"):
        check_trace(t.events, max_parallel=1)


def test_every_violation_is_listed_by_id() -> None:
    t = Trace()
    t.call(0, ExecutionMode.EXCLUSIVE)
    t.body(0, "start")
    t.body(1, "start")
    t.body(2, "start")
    t.call(1)
    t.call(2)
    t.result(2)
    t.result(1)
    text = violations(t, max_parallel=2)
    for invariant in ("I1", "I2", "I4", "I5"):
        assert f"\n{invariant}: " in text


# -- the strategies module is optional ----------------------------------------------------


def test_testing_imports_without_hypothesis() -> None:
    script = (
        "import sys\n"
        "sys.modules['hypothesis'] = None\n"
        "import dsh_sched.testing as t\n"
        "assert t.check_trace and t.TraceRecorder and t.TraceEvent and t.render_timeline\n"
        "assert t.run_checked and t.run_scenario and t.build_runtime and t.Scenario\n"
        "try:\n"
        "    t.scenarios\n"
        "except ImportError as exc:\n"
        "    print('ImportError', exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": f"{REPO / 'src'}"},
        check=True,
    )
    assert result.stdout.strip() == (
        "ImportError dsh_sched.testing.scenarios needs hypothesis: pip install hypothesis"
    )


def test_testing_exposes_strategies_lazily_and_refuses_unknown_names() -> None:
    import dsh_sched.testing as testing

    assert callable(testing.scenarios)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        testing.nope  # noqa: B018


def test_more_hand_made_violations_of_i2_i7_i11() -> None:
    message = UserMessage(content=[TextContent("m")])
    t = Trace()
    t.call(0, synthetic=True)
    # A synthetic call with a token and a non-abort result; a started call with a
    # synthetic result.
    t.events[-1] = attrs.evolve(
        t.events[-1],
        detail=CallStarted(
            batch=1,
            index=0,
            call=CALLS[0],
            mode=ExecutionMode.PARALLEL,
            token=object(),  # type: ignore[arg-type]
            synthetic=True,
        ),
    )
    t.result(0, OK, synthetic=True)
    t.call(1)
    t.add(
        "result",
        1,
        CallCommitted(batch=1, index=1, call=CALLS[1], result=SYNTHETIC, synthetic=True),
    )
    outcome = BatchOutcome(
        results=(
            CommittedCall(index=1, call=CALLS[1], result=SYNTHETIC, synthetic=True, mode=None),
            CommittedCall(index=0, call=CALLS[0], result=OK, synthetic=True, mode=None),
        ),
        additional_contexts=(message,),
        concludes_turn=False,
        aborted=True,
    )
    text = violations(t, outcome=outcome)
    assert "I2: outcome results are not in model order: [1, 0]" in text
    assert "I7: synthetic call 0 carries a mode or a token" in text
    assert "I7: synthetic call 0 has a non-synthetic-abort result" in text
    assert "I7: call 1 started but got a synthetic result" in text
    assert "I11: outcome.additional_contexts differ from the committed contexts" in text


def test_a_span_end_without_its_start_is_ignored() -> None:
    t = Trace()
    t.call(0)
    t.body(0, "end")  # recorded without a start (e.g. the recorder was installed late)
    t.result(0)
    check_trace(t.events, max_parallel=1)


async def test_recorder_without_an_inner_sink_records_contexts() -> None:
    runtime = ToolRuntime()
    recorder = TraceRecorder(runtime)
    runtime.register(recorder.instrument(gated_tool("r", parallel=True, steps=[], contexts=1)))
    outcome = await run_tool_calls(runtime, calls("r:c1"), sink=recorder)
    assert [e.kind for e in recorder.events][-1] == "context"
    check_trace(recorder.events, max_parallel=10, outcome=outcome)

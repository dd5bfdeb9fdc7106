"""The JSONL session log and its reader (scheduler.md §11; S-006, S-021, S-025, S-031..S-033,
S-042), including a process killed mid-batch.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dsh_sched._session_log
from dsh_sched import (
    CallCommitted,
    CallStarted,
    ContextAccepted,
    JsonlSessionLog,
    LoggedCall,
    ModelToolCall,
    read_session_log,
    run_tool_calls,
)
from dsh_tools import (
    Abort,
    Accept,
    CallNext,
    ExecutionMode,
    FrozenDict,
    PostDecision,
    TextContent,
    ToolExecution,
    ToolResult,
    ToolRuntime,
    UserMessage,
    error_result,
)
from tests.helpers import deep_equal
from tests.test_sched_fixtures import calls, exactly, gated_tool, starting

if TYPE_CHECKING:
    from collections.abc import Iterator

REPO = Path(__file__).resolve().parents[1]


def lines_of(path: Path) -> list[dict[str, Any]]:
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    return [json.loads(line) for line in raw.decode("utf-8").split("\n")[:-1]]


def ticking_clock(start: int = 1_784_449_176_700) -> Any:
    state = {"now": start}

    def clock() -> int:
        state["now"] += 1
        return state["now"]

    return clock


def make_runtime() -> ToolRuntime:
    runtime = ToolRuntime()
    runtime.register(gated_tool("r", parallel=True, steps=[], contexts=1))
    runtime.register(gated_tool("w", parallel=False, steps=[]))
    return runtime


async def test_s031_line_shape_keys_seq_time_and_citations(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path, clock=ticking_clock()) as log:
        await run_tool_calls(make_runtime(), calls("r:c1", "w:c2"), sink=log)
    lines = lines_of(path)
    assert [line["type"] for line in lines] == [
        "tool/call",
        "tool/result",
        "tool/call",
        "tool/result",
        "context",
    ]
    assert [line["seq"] for line in lines] == [1, 2, 3, 4, 5]
    assert [line["time"] for line in lines] == [1_784_449_176_701 + i for i in range(5)]
    for line in lines:
        expected = ["type", "seq", "time", "data"]
        if line["type"] != "tool/call":
            expected.append("source_seqs")
        assert list(line) == expected
    assert lines[1]["source_seqs"] == [1]
    assert lines[3]["source_seqs"] == [3]
    assert lines[4]["source_seqs"] == [2]  # the context cites c1's tool/result
    assert lines[0]["data"] == {
        "batch": lines[0]["data"]["batch"],
        "index": 0,
        "call_id": "c1",
        "name": "r",
        "arguments": "",
        "mode": "parallel",
    }
    assert lines[2]["data"]["mode"] == "exclusive"
    assert lines[4]["data"]["message"]["role"] == "user"
    assert list(lines[4]["data"]) == ["batch", "index", "call_id", "message"]
    assert b'"value"' not in path.read_bytes()  # never a value


async def test_s031_lines_are_compact_utf8_with_one_newline(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path) as log:
        await run_tool_calls(
            make_runtime(), [ModelToolCall(call_id="ç", name="w", arguments='{"t": "é"}')], sink=log
        )
    raw = path.read_bytes()
    assert raw.count(b"\n") == 2
    assert b"\r" not in raw
    assert '"call_id":"ç"'.encode() in raw  # ensure_ascii=False, no spaces
    assert '"arguments":"{\\"t\\": \\"é\\"}"'.encode() in raw
    times = [line["time"] for line in lines_of(path)]
    assert all(type(t) is int and t > 1_600_000_000_000 for t in times)


async def test_s025_s006_arguments_are_written_raw_and_pairs_read_back_in_model_order(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log.jsonl"
    raw_arguments = ['{"a":  1}', "{bad", ""]
    batch = [
        ModelToolCall(call_id=f"c{i}", name="r", arguments=a) for i, a in enumerate(raw_arguments)
    ]
    with JsonlSessionLog(path) as log:
        outcome = await run_tool_calls(make_runtime(), batch, sink=log, max_parallel=3)
    logged = read_session_log(path)
    assert [e.call_id for e in logged] == ["c0", "c1", "c2"]
    assert [e.arguments for e in logged] == raw_arguments  # exactly as received
    assert [e.index for e in logged] == [0, 1, 2]
    assert all(e.mode is ExecutionMode.PARALLEL and not e.synthetic for e in logged)
    for entry, committed in zip(logged, outcome.results, strict=True):
        # The durable form never carries the value (runtime.md §2.5).
        assert entry.result == attrs.evolve(committed.result, value=None)
        assert entry.contexts == committed.result.additional_contexts
        assert entry.result_seq is not None
        assert entry.result_seq > entry.call_seq


async def test_s042_mapping_arguments_are_written_as_an_object(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    call = ModelToolCall(call_id="c1", name="w", arguments={"k": [1, {"x": None}]})
    with JsonlSessionLog(path) as log:
        await run_tool_calls(make_runtime(), [call], sink=log)
    assert lines_of(path)[0]["data"]["arguments"] == {"k": [1, {"x": None}]}
    (entry,) = read_session_log(path)
    assert isinstance(entry.arguments, FrozenDict)
    assert entry.arguments == {"k": (1, {"x": None})}


async def test_s021_result_line_keeps_the_models_call_id_after_content_replacement(
    tmp_path: Path,
) -> None:
    runtime = make_runtime()

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        return Accept(content=[TextContent("replaced")])

    runtime.on_post_execute(post)
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path) as log:
        await run_tool_calls(make_runtime(), [], sink=log)
        await run_tool_calls(runtime, calls("w:model-id-7"), sink=log)
    line = lines_of(path)[1]
    assert line["data"]["call_id"] == "model-id-7"
    assert line["data"]["result"]["content"] == [{"type": "text", "text": "replaced"}]


async def test_s014_synthetic_pairs_are_logged_and_read_back_as_errors(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    abort = Abort()
    abort.abort()
    with JsonlSessionLog(path) as log:
        await run_tool_calls(make_runtime(), calls("r:c1", "w:c2"), abort=abort, sink=log)
    lines = lines_of(path)
    assert lines[0]["data"]["synthetic"] is True
    assert "mode" not in lines[0]["data"]
    assert lines[1]["data"]["synthetic"] is True
    logged = read_session_log(path)
    assert [(e.call_id, e.synthetic, e.mode) for e in logged] == [
        ("c1", True, None),
        ("c2", True, None),
    ]
    for entry in logged:
        assert entry.result is not None
        assert entry.result.is_error
        assert entry.result.error is not None
        assert entry.result.error.info is not None
        assert entry.result.error.info.code == "ABORTED_BEFORE_DISPATCH"


async def test_s033_failed_batch_reads_back_with_result_none(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"

    class FailingLog:
        def __init__(self, log: JsonlSessionLog) -> None:
            self.log = log

        def on_call(self, event: CallStarted) -> None:
            self.log.on_call(event)

        def on_result(self, event: CallCommitted) -> None:
            if event.index == 1:
                raise RuntimeError("sink failed")
            self.log.on_result(event)

        def on_context(self, event: ContextAccepted) -> None:
            self.log.on_context(event)

    runtime = ToolRuntime()
    runtime.register(gated_tool("w", parallel=False, steps=[]))
    with JsonlSessionLog(path) as log, pytest.raises(RuntimeError, match="sink failed"):
        await run_tool_calls(runtime, calls("w:c1", "w:c2", "w:c3"), sink=FailingLog(log))
    logged = read_session_log(path)
    assert [(e.call_id, e.result is None) for e in logged] == [("c1", False), ("c2", True)]
    assert logged[1].result_seq is None


def write_lines(path: Path, *objs: Any, tail: bytes = b"") -> None:
    data = b"".join(json.dumps(o).encode() + b"\n" for o in objs) + tail
    path.write_bytes(data)


CALL: dict[str, Any] = {
    "type": "tool/call",
    "seq": 1,
    "time": 0,
    "data": {
        "batch": 1,
        "index": 0,
        "call_id": "c1",
        "name": "t",
        "arguments": "",
        "mode": "exclusive",
    },
}
RESULT_JSON = error_result(ValueError("x")).to_json()


def result_line(seq: int, cites: Any) -> dict[str, Any]:
    return {
        "type": "tool/result",
        "seq": seq,
        "time": 0,
        "data": {"batch": 1, "index": 0, "call_id": "c1", "name": "t", "result": RESULT_JSON},
        "source_seqs": cites,
    }


def test_s033_result_citing_an_unknown_call_raises_with_the_line_number(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    write_lines(path, CALL, result_line(2, [1]), result_line(3, [1]))
    with pytest.raises(
        ValueError, match=exactly("line 3: tool/result cites unknown or answered tool/call 1")
    ):
        read_session_log(path)
    write_lines(path, CALL, result_line(5, [3]))
    with pytest.raises(
        ValueError, match=exactly("line 2: tool/result cites unknown or answered tool/call 3")
    ):
        read_session_log(path)


def test_s033_torn_last_line_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    write_lines(path, CALL, result_line(2, [1]), tail=b'{"type":"tool/call","seq":3,"ti')
    logged = read_session_log(path)
    assert len(logged) == 1
    assert logged[0].result is not None


def test_s033_a_last_line_without_its_newline_is_ignored_even_if_it_parses(
    tmp_path: Path,
) -> None:
    """S-033 (decision "torn last line"): the newline commits a line. A complete JSON object
    with no newline after it is a write that failed just before its end: the writer reported
    that failure and removes the line when it reopens the file, so the reader ignores it
    too, and both agree on what the log holds."""
    path = tmp_path / "log.jsonl"
    write_lines(path, CALL, tail=json.dumps(result_line(2, [1])).encode())
    (entry,) = read_session_log(path)
    assert (entry.result, entry.result_seq) == (None, None)
    with JsonlSessionLog(path):
        pass
    assert path.read_bytes().count(b"\n") == 1
    assert read_session_log(path) == [entry]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([b"[1]"], "line 1: not a JSON object"),
        ([b"{bad"], "line 1: not valid JSON"),
        ([b'{"seq": "1", "type": "x"}'], 'line 1: "seq" must be an integer'),
        ([b'{"seq": true, "type": "x"}'], 'line 1: "seq" must be an integer'),
        ([b'{"seq": 2, "type": "x"}', b'{"seq": 2, "type": "x"}'], "line 2: seq 2 is not greater"),
        ([b'{"seq": 1, "type": 3}'], 'line 1: "type" must be a string'),
        ([b'{"seq": 1, "type": "tool/call", "data": []}'], 'line 1: tool/call "data" must be'),
        (
            [b'{"seq": 1, "type": "tool/call", "data": {"arguments": 1}}'],
            'line 1: tool/call "arguments" must be a string or an object',
        ),
        (
            [b'{"seq": 1, "type": "tool/call", "data": {"arguments": "", "index": 0}}'],
            'line 1: tool/call "batch" must be an integer',
        ),
        (
            [b'{"seq": 1, "type": "tool/call", "data": {"arguments": "", "mode": "fast"}}'],
            'line 1: tool/call "mode" must be "parallel" or "exclusive"',
        ),
        (
            [b'{"seq": 1, "type": "tool/call", "data": {"arguments": "", "synthetic": 1}}'],
            'line 1: tool/call "synthetic" must be a boolean',
        ),
        (
            [b'{"seq": 1, "type": "tool/result", "data": {}, "source_seqs": [1, 2]}'],
            "line 1: tool/result must cite exactly one tool/call",
        ),
        (
            [b'{"seq": 1, "type": "context", "data": {}, "source_seqs": [9]}'],
            "line 1: context cites unknown tool/result 9",
        ),
        ([b"\n"], "line 1: not valid JSON"),
    ],
)
def test_s033_malformed_lines_raise_with_their_line_number(
    tmp_path: Path, lines: list[bytes], message: str
) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b"".join(line.rstrip(b"\n") + b"\n" for line in lines))
    with pytest.raises(ValueError, match=starting(message)):
        read_session_log(path)


def test_bad_result_json_is_reported_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    bad = result_line(2, [1])
    bad["data"]["result"] = {"is_error": "yes"}
    write_lines(path, CALL, bad)
    with pytest.raises(ValueError, match=starting("line 2: invalid tool result JSON")):
        read_session_log(path)
    bad["data"]["result"] = 5
    write_lines(path, CALL, bad)
    with pytest.raises(
        ValueError, match=starting('line 2: tool/result "result" must be an object')
    ):
        read_session_log(path)


def test_bad_context_message_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    context = {"type": "context", "seq": 3, "time": 0, "data": {"message": 1}, "source_seqs": [2]}
    write_lines(path, CALL, result_line(2, [1]), context)
    with pytest.raises(ValueError, match=starting('line 3: context "message" must be an object')):
        read_session_log(path)
    context["data"] = {"message": {"role": "user", "content": "nope"}}
    write_lines(path, CALL, result_line(2, [1]), context)
    with pytest.raises(ValueError, match=starting("line 3: invalid context message")):
        read_session_log(path)


def test_unknown_line_types_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    write_lines(path, {"type": "note", "seq": 1, "data": 5}, {**CALL, "seq": 2})
    (entry,) = read_session_log(path)
    assert entry == LoggedCall(
        call_seq=2,
        batch=1,
        index=0,
        call_id="c1",
        name="t",
        arguments="",
        mode=ExecutionMode.EXCLUSIVE,
        synthetic=False,
        result=None,
        result_seq=None,
        contexts=(),
    )


async def test_s032_reopening_removes_a_torn_line_and_continues_numbering(
    tmp_path: Path,
) -> None:
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path) as log:
        await run_tool_calls(make_runtime(), calls("w:c1"), sink=log)
    with path.open("ab") as f:
        f.write(b'{"type":"tool/call","seq":3,"ti')  # a torn write
    with JsonlSessionLog(path) as log:
        await run_tool_calls(make_runtime(), calls("w:c2"), sink=log)
    lines = lines_of(path)
    assert [line["seq"] for line in lines] == [1, 2, 3, 4]
    assert [line["data"]["call_id"] for line in lines] == ["c1", "c1", "c2", "c2"]
    assert lines[3]["source_seqs"] == [3]
    assert [e.call_id for e in read_session_log(path)] == ["c1", "c2"]


def test_s032_reopening_continues_after_the_highest_seq(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    write_lines(path, {"type": "note", "seq": 41}, tail=b"")
    with path.open("ab") as f:
        f.write(b"garbage line\n")
    log = JsonlSessionLog(path)
    call = ModelToolCall(call_id="c", name="t", arguments="")
    log.on_call(CallStarted(batch=1, index=0, call=call, mode=None, token=None, synthetic=True))
    log.close()
    assert json.loads(path.read_bytes().split(b"\n")[-2])["seq"] == 42


def test_closed_log_refuses_events_and_close_is_idempotent(tmp_path: Path) -> None:
    log = JsonlSessionLog(tmp_path / "log.jsonl")
    states = [log.closed]
    log.close()
    log.close()
    states.append(log.closed)
    assert states == [False, True]
    call = ModelToolCall(call_id="c", name="t", arguments="")
    with pytest.raises(RuntimeError, match=exactly("session log is closed")):
        log.on_call(CallStarted(batch=1, index=0, call=call, mode=None, token=None, synthetic=True))


def test_result_without_a_logged_call_is_refused(tmp_path: Path) -> None:
    call = ModelToolCall(call_id="c", name="t", arguments="")
    with JsonlSessionLog(tmp_path / "log.jsonl") as log:
        with pytest.raises(ValueError, match="no tool/call was logged"):
            log.on_result(
                CallCommitted(
                    batch=1, index=0, call=call, result=error_result(ValueError()), synthetic=False
                )
            )
        message = UserMessage(content=[TextContent("m")])
        with pytest.raises(ValueError, match="no tool/result with contexts"):
            log.on_context(ContextAccepted(batch=1, index=0, call=call, message=message))


def test_unpaired_surrogate_is_escaped_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    call = ModelToolCall(call_id="c\ud800", name="t", arguments="\udfff")
    with JsonlSessionLog(path) as log:
        log.on_call(CallStarted(batch=1, index=0, call=call, mode=None, token=None, synthetic=True))
    raw = path.read_bytes()
    raw.decode("utf-8")  # valid UTF-8
    (entry,) = read_session_log(path)
    assert entry.call_id == "c\ud800"
    assert entry.arguments == "\udfff"


def test_fsync_option_syncs_every_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd))
    call = ModelToolCall(call_id="c", name="t", arguments="")
    with JsonlSessionLog(tmp_path / "log.jsonl", fsync=True) as log:
        log.on_call(CallStarted(batch=1, index=0, call=call, mode=None, token=None, synthetic=True))
        log.on_result(
            CallCommitted(
                batch=1, index=0, call=call, result=error_result(ValueError()), synthetic=True
            )
        )
    assert len(synced) == 2


# -- a process killed mid-batch -----------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import sys, trio
    from dsh_sched import JsonlSessionLog, ModelToolCall, run_tool_calls
    from dsh_tools import Output, TextContent, ToolDefinition, ToolRuntime, UserMessage

    async def body(args, ctx):
        ctx.defer_context(UserMessage(content=[TextContent(ctx.call_id)]))
        if ctx.call_id == "c20":
            await trio.sleep_forever()  # the head of the line never commits
        await trio.sleep(0)
        return ctx.call_id

    async def main(path):
        runtime = ToolRuntime()
        runtime.register(ToolDefinition(
            name="t", description="t", parameters={}, execute=body, is_concurrency_safe=True,
            output=Output(schema={}, render=lambda a, v: [TextContent(str(v))]),
        ))
        calls = [ModelToolCall(call_id=f"c{i}", name="t", arguments="") for i in range(40)]
        with JsonlSessionLog(path) as log:
            await run_tool_calls(runtime, calls, sink=log, max_parallel=4)

    trio.run(main, sys.argv[1])
    """
)


def test_kill_mid_batch_leaves_a_readable_log(tmp_path: Path) -> None:
    path = tmp_path / "killed.jsonl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(path)], env=env)
    try:
        # Handshake on file content (a real wait: the child is a separate process). The
        # pool keeps rolling past the stuck head c20, so all 40 calls start, and c0..c19
        # are committed.
        deadline = time.monotonic() + 60
        while True:
            text = path.read_bytes().decode("utf-8", "replace") if path.exists() else ""
            if text.count('"tool/result"') >= 20 and text.count('"tool/call"') >= 40:
                break
            assert child.poll() is None, "the child exited early"
            assert time.monotonic() < deadline, "the child never reached the stall"
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
    finally:
        child.kill()
        child.wait()
    raw = path.read_bytes()
    complete = raw[: raw.rfind(b"\n") + 1]
    for line in complete.split(b"\n")[:-1]:
        json.loads(line)  # every complete line parses
    logged = read_session_log(path)
    assert [e.call_id for e in logged] == [f"c{i}" for i in range(40)]
    answered = [e for e in logged if e.result is not None]
    assert [e.call_id for e in answered] == [f"c{i}" for i in range(20)]
    assert all(e.result_seq is not None for e in answered)
    assert all(e.contexts == () for e in logged)  # contexts come only after the last result


def test_nan_constant_and_non_string_fields_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"seq": NaN, "type": "x"}\n')
    with pytest.raises(ValueError, match=exactly("line 1: not valid JSON")):
        read_session_log(path)
    bad = {**CALL, "data": {**CALL["data"], "call_id": 7}}
    write_lines(path, bad)
    with pytest.raises(ValueError, match=exactly('line 1: tool/call "call_id" must be a string')):
        read_session_log(path)


async def test_several_contexts_cite_the_same_result(tmp_path: Path) -> None:
    runtime = ToolRuntime()
    runtime.register(gated_tool("two", parallel=True, steps=[], contexts=2))
    path = tmp_path / "log.jsonl"
    with JsonlSessionLog(path) as log:
        await run_tool_calls(runtime, calls("two:c1"), sink=log)
    lines = lines_of(path)
    assert [(line["type"], line.get("source_seqs")) for line in lines] == [
        ("tool/call", None),
        ("tool/result", [1]),
        ("context", [2]),
        ("context", [2]),
    ]
    (entry,) = read_session_log(path)
    assert [m.content for m in entry.contexts] == [
        (TextContent("c1:0"),),
        (TextContent("c1:1"),),
    ]


def test_reopening_skips_lines_without_a_seq(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"type": "note", "seq": 5}\n{"type": "note"}\n')
    call = ModelToolCall(call_id="c", name="t", arguments="")
    with JsonlSessionLog(path) as log:
        log.on_call(
            CallStarted(batch=1, index=0, call=call, mode=None, token=None, synthetic=False)
        )
    last = lines_of(path)[-1]
    assert last["seq"] == 6
    assert "mode" not in last["data"]
    assert "synthetic" not in last["data"]


def test_a_failed_opening_closes_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(file: object) -> int:
        raise MemoryError("scan failed")

    monkeypatch.setattr(dsh_sched._session_log, "_reopen", broken)
    with pytest.raises(MemoryError, match="scan failed"):
        JsonlSessionLog(tmp_path / "log.jsonl")
    # An unclosed file would surface as a ResourceWarning (an error in this suite).
    gc.collect()


def _reopened_the_old_way(data: bytes) -> tuple[bytes, int]:
    """What reopening did before it read from the end: the whole file at once."""
    data = data[: data.rfind(b"\n") + 1]
    for raw in reversed(data.split(b"\n")):
        try:
            obj = dsh_sched._session_log._parse_line(raw)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and type(obj.get("seq")) is int:
            return data, obj["seq"]
    return data, 0


_LOG_LINES = st.one_of(
    st.integers(-3, 10**6).map(lambda n: json.dumps({"type": "context", "seq": n}).encode()),
    st.sampled_from([b"", b"{", b"[1]", b'{"seq": "7"}', b'{"seq": 1.5}', b"\xff\xfe", b"null"]),
    st.binary(max_size=12).filter(lambda b: b"\n" not in b),
)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(_LOG_LINES, max_size=12),
    torn=st.binary(max_size=20).filter(lambda b: b"\n" not in b),
    chunk=st.integers(1, 40),
)
def test_reopening_reads_from_the_end_what_reading_everything_found(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[bytes],
    torn: bytes,
    chunk: int,
) -> None:
    """A reopened log is read backwards in chunks; with chunks as small as one byte it
    truncates the same torn line and finds the same highest ``seq`` as reading it whole."""
    path = tmp_path_factory.mktemp("log") / "log.jsonl"
    data = b"".join(line + b"\n" for line in lines) + torn
    path.write_bytes(data)
    expected_data, expected_seq = _reopened_the_old_way(data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dsh_sched._session_log, "_TAIL_CHUNK", chunk)
        log = JsonlSessionLog(path)
    try:
        assert path.read_bytes() == expected_data
        assert log._seq == expected_seq
    finally:
        log.close()


# -- a full disk, one writer per file, long lines, deep values (issue 11) -------------------


def _child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)])}


FULL_DISK_CHILD = textwrap.dedent(
    """
    import errno, json, os, resource, signal, sys
    from dsh_sched import CallCommitted, CallStarted, JsonlSessionLog, ModelToolCall
    from dsh_sched import read_session_log
    from dsh_tools import error_result

    # A real full disk, made with the file size limit: a write past it writes what fits
    # and returns a short count; the next write fails with EFBIG (the signal is ignored).
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    path = sys.argv[1]
    report = {}

    def call(i):
        return ModelToolCall(call_id=f"c{i}", name="t", arguments="x" * 300)

    def on_call(log, i):
        log.on_call(CallStarted(batch=1, index=i, call=call(i), mode=None, token=None,
                                synthetic=True))

    def attempt(name, fn):
        try:
            fn()
        except OSError as exc:
            report[name] = [exc.errno, str(exc)]
        else:
            report[name] = "written"
        report[name + " size"] = os.path.getsize(path)

    real_ftruncate = os.ftruncate
    broken = [0]

    def ftruncate(fd, length):
        if broken[0]:
            broken[0] -= 1
            raise OSError(errno.EIO, "injected")
        real_ftruncate(fd, length)

    os.ftruncate = ftruncate
    log = JsonlSessionLog(path)
    on_call(log, 0)
    report["size"] = os.path.getsize(path)
    resource.setrlimit(resource.RLIMIT_FSIZE, (report["size"] + 100, hard))
    attempt("partial", lambda: on_call(log, 1))   # 100 bytes of the line fit
    attempt("full", lambda: on_call(log, 2))      # nothing fits
    broken[0] = 2                                 # the partial line cannot be removed...
    attempt("stuck", lambda: on_call(log, 3))
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # space again
    result = CallCommitted(batch=1, index=0, call=call(0), result=error_result(ValueError("e")),
                           synthetic=True)
    attempt("still stuck", lambda: log.on_result(result))  # ...nor before the next line
    attempt("recovered", lambda: log.on_result(result))
    on_call(log, 4)
    log.close()
    report["lines"] = [json.loads(line)["seq"] for line in open(path, "rb")]
    report["read"] = [[e.call_id, e.call_seq, e.result_seq] for e in read_session_log(path)]
    print(json.dumps(report))
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_s031_a_full_disk_never_leaves_a_broken_line_in_the_log(tmp_path: Path) -> None:
    """S-031/S-033 (issue 11, item 5): a write that fails part way (the disk is full) raises,
    and the part that reached the file is removed at once: nothing of it is flushed into the
    middle of the file later, the numbering has no gap or repeat, and the log reads back.
    If even removing it fails, no further line is written (each attempt raises a clear
    error) until it can be removed. Runs in a child process, which fills its "disk" with the
    operating system's file size limit."""
    path = tmp_path / "log.jsonl"
    child = subprocess.run(
        [sys.executable, "-c", FULL_DISK_CHILD, str(path)],
        env=_child_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout)
    size = report["size"]
    assert report["partial"][0] == report["full"][0] == report["stuck"][0] == errno.EFBIG
    assert report["partial size"] == report["full size"] == size
    assert report["stuck size"] == size + 100  # the removal failed: 100 bytes remain...
    assert report["still stuck"] == [
        errno.EIO,
        f"[Errno {errno.EIO}] session log {path}: a failed write left part of a line that "
        "cannot be removed (injected); nothing more is written until it can",
    ]
    assert report["still stuck size"] == size + 100  # ...and nothing is written after them
    assert report["recovered"] == "written"
    assert report["lines"] == [1, 2, 3]
    assert report["read"] == [["c0", 1, 2], ["c4", 3, None]]


def test_s031_an_interrupted_write_leaves_nothing_behind(tmp_path: Path) -> None:
    """S-031 (issue 11, item 5): a write that stops part way for any reason (here a
    ``KeyboardInterrupt`` between two partial writes) removes what it wrote; the next line
    follows the last whole one."""
    path = tmp_path / "log.jsonl"
    call = ModelToolCall(call_id="c", name="t", arguments="x" * 50)

    def started(index: int) -> CallStarted:
        return CallStarted(batch=1, index=index, call=call, mode=None, token=None, synthetic=True)

    real_write = dsh_sched._session_log._write_all

    def interrupted(file: Any, line: bytes) -> None:
        file.write(line[:20])
        raise KeyboardInterrupt

    with JsonlSessionLog(path) as log:
        log.on_call(started(0))
        size = path.stat().st_size
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(dsh_sched._session_log, "_write_all", interrupted)
            with pytest.raises(KeyboardInterrupt):
                log.on_call(started(1))
        assert path.stat().st_size == size
        assert dsh_sched._session_log._write_all is real_write
        log.on_call(started(2))
    assert [line["seq"] for line in lines_of(path)] == [1, 2]
    assert [(e.index, e.call_seq) for e in read_session_log(path)] == [(0, 1), (2, 2)]


def test_a_write_that_takes_no_bytes_is_an_error(tmp_path: Path) -> None:
    """An unbuffered write that reports 0 bytes written would loop forever; it is an
    ``OSError`` instead."""

    class Stalled:
        def write(self, data: object) -> int:
            return 0

    with pytest.raises(OSError, match="took no bytes"):
        dsh_sched._session_log._write_all(Stalled(), b"line\n")  # type: ignore[arg-type]


def test_s031_a_write_that_takes_part_of_a_line_is_continued() -> None:
    """S-031: an unbuffered write may take only part of a line (a pipe, a signal); the rest
    follows, in order, until the whole line is written."""

    class Trickle:
        def __init__(self) -> None:
            self.chunks: list[bytes] = []

        def write(self, data: bytes | memoryview) -> int:
            self.chunks.append(bytes(data[:3]))
            return len(self.chunks[-1])

    trickle = Trickle()
    dsh_sched._session_log._write_all(trickle, b"0123456789\n")  # type: ignore[arg-type]
    assert trickle.chunks == [b"012", b"345", b"678", b"9\n"]


# One writer per file.


def test_a_second_writer_on_an_open_log_is_refused(tmp_path: Path) -> None:
    """Decision "One writer per log file": a second ``JsonlSessionLog`` on a file that one
    in this process has open is refused at construction, naming the file and the fix; once
    the first is closed, the file can be opened again."""
    path = tmp_path / "log.jsonl"
    first = JsonlSessionLog(path)
    with pytest.raises(RuntimeError) as info:
        JsonlSessionLog(path)
    assert str(info.value) == (
        f"session log {path} is already open for writing by another JsonlSessionLog (in this "
        "process or another one); close that one first, or log to another file"
    )
    gc.collect()  # the refused one closed its file (an unclosed one would warn: an error)
    first.close()
    with JsonlSessionLog(path) as again:
        assert not again.closed


HOLDER_CHILD = textwrap.dedent(
    """
    import sys
    from dsh_sched import JsonlSessionLog

    with JsonlSessionLog(sys.argv[1]):
        print("open", flush=True)
        sys.stdin.readline()  # hold the log until the parent says so
    print("closed", flush=True)
    """
)


def test_a_log_another_process_has_open_is_refused(tmp_path: Path) -> None:
    """Decision "One writer per log file": the lock holds across processes; when the other
    process closes the log (or dies), it can be opened."""
    path = tmp_path / "log.jsonl"
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER_CHILD, str(path)],
        env=_child_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdin is not None
        assert child.stdout.readline() == "open\n"
        with pytest.raises(RuntimeError, match=f"session log {re.escape(str(path))} is already"):
            JsonlSessionLog(path)
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "closed\n"
        assert child.wait(timeout=60) == 0
    finally:
        child.kill()
        child.wait()
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                stream.close()
    with JsonlSessionLog(path) as log:
        assert not log.closed


def test_a_lock_failure_that_is_not_contention_propagates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only "someone else holds it" becomes the one-writer error; any other failure to
    lock (say, a file system without locks) is raised as it is, and the file is closed."""
    import fcntl

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, "no locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(OSError, match="no locks available"):
        JsonlSessionLog(tmp_path / "log.jsonl")
    gc.collect()


# Reopening reads each byte once.


@contextlib.contextmanager
def _bytes_scanned_budget(budget: int) -> Iterator[list[int]]:
    """Count the bytes that bytes methods (``split``, ``rfind``, ``decode``, ...) are called
    on, a measure of the work done with the file's contents that does not depend on the
    machine's speed; stop that work once it exceeds ``budget``."""
    scanned = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call" and type(getattr(arg, "__self__", None)) in (bytes, bytearray):
            scanned[0] += len(arg.__self__)
            if scanned[0] > budget:
                raise MemoryError(f"more than {budget} bytes scanned")

    sys.setprofile(profile)
    try:
        yield scanned
    finally:
        sys.setprofile(None)


_LONG = 4 << 20


@pytest.mark.parametrize("torn", [False, True], ids=["complete", "torn"])
def test_s032_reopening_after_a_long_last_line_scans_it_once(tmp_path: Path, torn: bool) -> None:
    """S-032 (issue 11, item 5): reopening a log whose last line is 4 MiB long, complete or
    torn, looks at each of its bytes about once. It used to glue each chunk read backwards
    onto everything after it and split the whole again: quadratic in the line's length
    (about 10 s for 32 MiB). The budget stops that work early instead of timing it."""
    path = tmp_path / "log.jsonl"
    first = {**CALL, "data": {**CALL["data"], "arguments": "a"}}
    long_line = {**CALL, "seq": 2, "data": {**CALL["data"], "arguments": "x" * _LONG}}
    line = json.dumps(long_line, separators=(",", ":")).encode()
    if torn:
        write_lines(path, first, tail=line[:-1])
    else:
        write_lines(path, first, long_line)
        path.write_bytes(json.dumps(first).encode() + b"\n" + line + b"\n")
    with _bytes_scanned_budget(2 * _LONG + (1 << 20)) as scanned:
        log = JsonlSessionLog(path)
    log.close()
    assert scanned[0] >= _LONG  # the budget saw the scan
    assert log._seq == (1 if torn else 2)
    assert path.read_bytes().count(b"\n") == (1 if torn else 2)
    assert path.read_bytes().endswith(b"\n")


def test_s032_reopening_finds_the_seq_of_a_line_in_another_shape(tmp_path: Path) -> None:
    """S-032: a last line that is not in the writer's compact shape (hand-written, with
    spaces, keys in another order, or nested deeper than ``json`` parses) is parsed whole."""
    path = tmp_path / "log.jsonl"
    deep = "[" * 5000 + "]" * 5000
    path.write_bytes(
        b'{"seq": 8, "type": "note"}\n{"type": "note", "seq": 9, "x": %b}\n' % deep.encode()
    )
    with JsonlSessionLog(path) as log:
        assert log._seq == 9
    path.write_bytes(b'{"seq": 8, "type": "note"}\n{"type":"note","seq":9.5}\n')
    with JsonlSessionLog(path) as log:
        assert log._seq == 8


# Deep values (decision "Depth").


def _deep_mapping(depth: int) -> dict[str, Any]:
    value: Any = "leaf"
    for i in range(depth):
        value = {"k": [value, i]}
    return value  # type: ignore[no-any-return]


def test_s031_values_5000_deep_are_written_and_read_back(tmp_path: Path) -> None:
    """S-031/S-033 (decision "Depth"): arguments, a result's ``meta`` and a context's
    ``source`` nested 5000 deep (the JSON boundary accepts them) are written as JSON lines
    and read back equal; ``json`` alone recurses and gives up near 1000 levels."""
    path = tmp_path / "log.jsonl"
    deep = _deep_mapping(5000)
    call = ModelToolCall(call_id="c", name="t", arguments=deep)
    message = UserMessage(content=[TextContent("m")], source=deep)
    result = ToolResult(is_error=False, meta=deep, additional_contexts=[message])
    with JsonlSessionLog(path) as log:
        log.on_call(
            CallStarted(batch=1, index=0, call=call, mode=None, token=None, synthetic=False)
        )
        log.on_result(CallCommitted(batch=1, index=0, call=call, result=result, synthetic=False))
        log.on_context(ContextAccepted(batch=1, index=0, call=call, message=message))
    with JsonlSessionLog(path) as log:  # reopening reads the deep last line's seq
        assert log._seq == 3
    (entry,) = read_session_log(path)
    assert type(entry.arguments) is FrozenDict
    assert deep_equal(entry.arguments, deep)
    assert entry.result is not None
    assert deep_equal(entry.result.meta, deep)
    assert len(entry.contexts) == 1
    assert deep_equal(entry.contexts[0].source, deep)


def test_s031_a_partial_line_that_cannot_be_removed_blocks_writing_until_it_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S-031 (issue 11, item 5), in process: a write fails with ``ENOSPC`` after part of the
    line reached the file, and removing that part fails too. The next event writes nothing
    and raises an error naming the file; once removal works, writing resumes after the
    last whole line."""
    path = tmp_path / "log.jsonl"
    call = ModelToolCall(call_id="c", name="t", arguments="")

    def started(index: int) -> CallStarted:
        return CallStarted(batch=1, index=index, call=call, mode=None, token=None, synthetic=True)

    def disk_full(file: Any, line: bytes) -> None:
        file.write(line[:10])
        raise OSError(errno.ENOSPC, "No space left on device")

    real_ftruncate = os.ftruncate
    failures = [2]

    def ftruncate(fd: int, length: int) -> None:
        if failures[0]:
            failures[0] -= 1
            raise OSError(errno.EIO, "Input/output error")
        real_ftruncate(fd, length)

    with JsonlSessionLog(path) as log:
        log.on_call(started(0))
        size = path.stat().st_size
        monkeypatch.setattr(os, "ftruncate", ftruncate)
        with monkeypatch.context() as patch:
            patch.setattr(dsh_sched._session_log, "_write_all", disk_full)
            with pytest.raises(OSError, match="No space left"):
                log.on_call(started(1))
        assert path.stat().st_size == size + 10
        with pytest.raises(OSError, match="cannot be removed") as info:
            log.on_call(started(2))
        assert info.value.errno == errno.EIO
        assert str(info.value) == (
            f"[Errno {errno.EIO}] session log {path}: a failed write left part of a line that "
            "cannot be removed (Input/output error); nothing more is written until it can"
        )
        assert path.stat().st_size == size + 10
        log.on_call(started(3))
    assert [(e.index, e.call_seq) for e in read_session_log(path)] == [(0, 1), (3, 2)]

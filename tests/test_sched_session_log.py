"""The JSONL session log and its reader (scheduler.md §11; S-006, S-021, S-025, S-031..S-033,
S-042), including a process killed mid-batch.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

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
from tests.test_sched_fixtures import calls, exactly, gated_tool, starting

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


def test_complete_last_line_without_newline_is_read(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    write_lines(path, CALL, tail=json.dumps(result_line(2, [1])).encode())
    assert read_session_log(path)[0].result_seq == 2


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

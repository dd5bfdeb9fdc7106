"""Code Mode's events (code-mode §6): records, registration, the contained log waterfall,
``inspect`` rows and ``PipelineInvariants``."""

from __future__ import annotations

import contextlib
import json
import logging
from typing import TYPE_CHECKING, Any

import pytest

from dsh_tools import (
    CodeDispatch,
    CodeDispatchStart,
    ImageContent,
    TextContent,
    ToolRuntime,
    thaw_json,
)
from dsh_tools.cli import inspect_report
from dsh_tools.code import CodeRunLimits, CodeRunOutcome, Dispatch, ToolCallError
from dsh_tools.testing import PipelineInvariants
from tests.code_helpers import Trace, code_runtime, gather, run_program, tool

if TYPE_CHECKING:
    from collections.abc import Callable

METHODS = ("on_code_dispatch_start", "on_code_dispatch", "on_code_dispatch_log")


async def _two_calls(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
    values = await gather(dispatch, [("safe", {"a": 1}), ("boom", {})])
    return CodeRunOutcome(
        result=[v if not isinstance(v, ToolCallError) else str(v) for v in values]
    )


def _runtime(trace: Trace | None = None) -> ToolRuntime:
    runtime, _ = code_runtime(_two_calls)
    body = (trace or Trace()).body
    runtime.register(tool("safe", body(0)))
    runtime.register(tool("boom", body(0, fail="bad")))
    if trace is not None:
        trace.install(runtime)
    return runtime


@pytest.mark.parametrize("method", METHODS)
def test_l088_registration_checks(method: str) -> None:
    """L-088: not callable → ``<method>() requires a callable``; the two observers also
    refuse ``async def``; on the runtime and on scopes; the scope owns its entries."""
    runtime = ToolRuntime()
    scope = runtime.open_scope()

    async def coroutine_function(event: Any, call_next: Any = None) -> Any:
        return None

    for owner in (runtime, scope):
        register: Callable[[Any], Any] = getattr(owner, method)
        with pytest.raises(TypeError, match=rf"^{method}\(\) requires a callable$"):
            register(42)
        if method == "on_code_dispatch_log":
            register(coroutine_function)()
        else:
            with pytest.raises(TypeError, match=rf"^{method}\(\) requires a synchronous callable$"):
                register(coroutine_function)
    scope.close()
    with pytest.raises(RuntimeError, match=r"^scope is closed$"):
        getattr(scope, method)(lambda event: None)


@pytest.mark.parametrize("failure", ["raise", "awaitable"])
async def test_l088_a_failing_observer_is_logged_and_changes_nothing(
    failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    """L-088: an observer that raises, or returns an awaitable (closed), is logged at
    WARNING with the event's name and changes nothing."""
    trace = Trace()
    runtime = _runtime(trace)

    async def later() -> None:
        return None

    def bad(event: Any) -> Any:
        if failure == "raise":
            raise ValueError("observer bug")
        return later()

    runtime.on_code_dispatch_start(bad)
    runtime.on_code_dispatch(bad)
    with caplog.at_level(logging.WARNING, logger="dsh_tools"):
        result = await run_program(runtime)
    assert thaw_json(result.value) == {"logs": [], "result": [{"a": 1}, "bad"]}
    assert len(trace.settles) == 2
    message = (
        "observer bug"
        if failure == "raise"
        else "observer returned an awaitable; observers must be synchronous"
    )
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert sorted(warnings) == [
        f"tools/code-dispatch observer failed: {message}",
        f"tools/code-dispatch observer failed: {message}",
        f"tools/code-dispatch-start observer failed: {message}",
        f"tools/code-dispatch-start observer failed: {message}",
    ]


async def test_l089_the_log_waterfall_rewrites_only_the_event() -> None:
    """L-089: first registered is outermost; redacted blocks change only the event's
    ``content``, not the sub-result nor the program's value; a scoped hook sees only its
    scope's sub-calls."""
    trace = Trace()
    runtime = _runtime(trace)
    order: list[str] = []

    async def outer(event: CodeDispatch, call_next: Any) -> Any:
        order.append("outer in")
        content = await call_next()
        order.append("outer out")
        return [*content, TextContent("(checked)")]

    async def inner(event: CodeDispatch, call_next: Any) -> Any:
        order.append(f"inner {event.sub_call_id}")
        assert event.content == event.result.content
        return [TextContent("[redacted]")]

    runtime.on_code_dispatch_log(outer)
    other = runtime.open_scope(name="other")
    other.on_code_dispatch_log(inner)
    runtime.on_code_dispatch_log(inner)
    result = await run_program(runtime)
    assert thaw_json(result.value) == {"logs": [], "result": [{"a": 1}, "bad"]}
    assert order == [
        "outer in",
        "inner c1:code:1",
        "outer out",
        "outer in",
        "inner c1:code:2",
        "outer out",
    ]
    settle = trace.settles[0]
    assert settle.content == (TextContent("[redacted]"), TextContent("(checked)"))
    assert settle.result.content == (TextContent('{"a": 1}'),)


@pytest.mark.parametrize(
    ("hook", "warning"),
    [
        ("raise", "tools/code-dispatch-log hook failed: log bug"),
        ("str", "tools/code-dispatch-log hook returned str; expected a sequence of content blocks"),
        ("list", "tools/code-dispatch-log hook returned list; expected a sequence of content "
                 "blocks"),
        ("coroutine", "tools/code-dispatch-log hook returned coroutine; expected a sequence of "
                      "content blocks"),
        ("sync", "tools/code-dispatch-log hook failed: object list can't be used in 'await' "
                 "expression"),
    ],
)  # fmt: skip
async def test_l032_l089_a_failing_log_hook_logs_the_original_content(
    hook: str, warning: str, caplog: pytest.LogCaptureFixture
) -> None:
    """L-032, L-089: a log hook that raises, or a chain whose value is not a list/tuple of
    content blocks, is logged at WARNING and the event carries the original content."""
    trace = Trace()
    runtime = _runtime(trace)

    async def later() -> list[Any]:
        return []

    async def log_hook(event: CodeDispatch, call_next: Any) -> Any:
        if hook == "raise":
            raise RuntimeError("log bug")
        if hook == "str":
            return "text"
        if hook == "list":
            return ["not a block"]
        return later()

    def sync_hook(event: CodeDispatch, call_next: Any) -> Any:
        return [TextContent("sync")]

    runtime.on_code_dispatch_log(sync_hook if hook == "sync" else log_hook)
    with caplog.at_level(logging.WARNING, logger="dsh_tools"):
        await run_program(runtime)
    assert [s.content for s in trace.settles] == [s.result.content for s in trace.settles]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [warning, warning]


async def test_l091_to_json_of_the_records() -> None:
    """L-091: exactly §6.1's keys, ``json.dumps`` works directly, no execution or result."""
    trace = Trace()
    await run_program(_runtime(trace), call_id="c9")
    start, settle = trace.starts[0], trace.settles[1]
    assert start.to_json() == {
        "root_call_id": "c9",
        "parent_call_id": "c9",
        "sub_call_id": "c9:code:1",
        "name": "safe",
        "arguments": {"a": 1},
    }
    assert settle.to_json() == {
        "root_call_id": "c9",
        "parent_call_id": "c9",
        "sub_call_id": "c9:code:2",
        "name": "boom",
        "arguments": {},
        "is_error": True,
        "content": [{"type": "text", "text": "Error: bad"}],
    }
    assert json.loads(json.dumps(settle.to_json())) == settle.to_json()
    image = ImageContent(data="aGk=", mime_type="image/png")
    forged = CodeDispatch(
        root_call_id="r",
        parent_call_id="p",
        sub_call_id="p:code:1",
        name="n",
        arguments={"t": (1, 2)},
        execution=settle.execution,
        is_error=False,
        content=(image,),
        result=settle.result,
    )
    assert json.dumps(forged.to_json()) == (
        '{"root_call_id": "r", "parent_call_id": "p", "sub_call_id": "p:code:1", "name": "n", '
        '"arguments": {"t": [1, 2]}, "is_error": false, '
        '"content": [{"type": "image", "data": "aGk=", "mime_type": "image/png"}]}'
    )
    assert isinstance(start, CodeDispatchStart)
    assert "execution" not in repr(start)


def test_l090_inspect_lists_the_three_events() -> None:
    """L-090: eight events in §6.4's order, with the new rows' modes, summaries, hook
    signatures and ``registered with:`` lines; the caution line last."""
    lines = inspect_report("events").splitlines()
    at = lines.index("- tools/code-dispatch [emit] — A Code Mode sub-call settled.")
    assert lines[at : at + 9] == [
        "- tools/code-dispatch [emit] — A Code Mode sub-call settled.",
        "    (event: CodeDispatch) -> None",
        "    registered with: ToolRuntime.on_code_dispatch, Scope.on_code_dispatch",
        "- tools/code-dispatch-log [waterfall] — Rewrite the content logged for a settled "
        "sub-call.",
        "    async (event: CodeDispatch, call_next: CallNext[tuple[ContentBlock, ...]]) -> "
        "Sequence[ContentBlock]",
        "    registered with: ToolRuntime.on_code_dispatch_log, Scope.on_code_dispatch_log",
        "- tools/code-dispatch-start [emit] — A Code Mode sub-call started.",
        "    (event: CodeDispatchStart) -> None",
        "    registered with: ToolRuntime.on_code_dispatch_start, Scope.on_code_dispatch_start",
    ]
    headers = [line.split(" [")[0][2:] for line in lines if line.startswith("- ")]
    # Eight events sorted by name (test_cli pins the whole list).
    assert len(headers) == 8
    assert headers == sorted(headers)
    assert lines[-1].startswith("waterfall listeners receive a trailing call_next()")


async def test_l065_pipeline_invariants_on_real_traffic_and_forged_records() -> None:
    """L-065: real traffic records no violation (a refused dispatch leaves no record);
    forged sequences give §6.5's messages."""
    invariants = PipelineInvariants()
    runtime, _ = code_runtime(_refusing)
    invariants.install(runtime)
    runtime.register(tool("safe", Trace().body(0)))
    trace = Trace()
    trace.install(runtime)
    await run_program(runtime)
    assert invariants.violations == []
    start, settle = trace.starts[0], trace.settles[0]
    assert len(trace.starts) == 1

    forged = PipelineInvariants()
    forged.record_code_dispatch(settle)
    forged.record_code_dispatch(start)  # the parent is unknown to this object
    forged.record_code_dispatch(start)
    forged.record_code_dispatch(settle)
    forged.record_code_dispatch(settle)
    forged.record_code_dispatch(_evolve(start, sub_call_id="other"))
    forged.record_code_dispatch(_evolve(settle, sub_call_id="other", root_call_id="elsewhere"))
    forged.record_code_dispatch(_evolve(start, root_call_id=""))
    forged.record_code_dispatch("junk")
    assert forged.violations == [
        "code dispatch c1:code:1 settled without a start",
        "code dispatch c1:code:1 outside its parent's dispatch stage",
        "code dispatch c1:code:1 started twice",
        "code dispatch c1:code:1 settled twice",
        "code dispatch c1:code:1 settled twice",
        "code dispatch other outside its parent's dispatch stage",
        'code dispatch other changed root from "c1" to "elsewhere"',
        "code dispatch with an empty id",
        "code dispatch received str; expected CodeDispatchStart or CodeDispatch",
    ]
    # The real parent's stages are recorded by the installed object, and are over now.
    invariants.record_code_dispatch(_evolve(start, sub_call_id="late"))
    assert invariants.violations == ["code dispatch late outside its parent's dispatch stage"]


async def _refusing(dispatch: Dispatch, tools: tuple[str, ...], limits: CodeRunLimits) -> Any:
    await dispatch("safe", {})
    for name, args in (("nope", {}), ("safe", {"s": {1}})):
        with contextlib.suppress(ToolCallError):
            await dispatch(name, args)
    return CodeRunOutcome()


def _evolve(event: Any, **changes: object) -> Any:
    import attrs

    return attrs.evolve(event, **changes)


async def test_l065_a_start_with_no_parent_is_outside_any_dispatch_stage() -> None:
    """A forged start whose execution has no parent is outside a dispatch stage too."""
    invariants = PipelineInvariants()
    trace = Trace()
    runtime = _runtime(trace)
    await run_program(runtime)
    start = trace.starts[0]
    from dsh_tools import ToolCall
    from dsh_tools.lowlevel import create

    orphan = create(runtime, ToolCall(call_id="o", name="safe"))
    invariants.record_code_dispatch(_evolve(start, execution=orphan, sub_call_id="o:code:1"))
    assert invariants.violations == ["code dispatch o:code:1 outside its parent's dispatch stage"]


async def test_l089_a_delegating_log_hook_keeps_the_content() -> None:
    """L-089: the chain's default is the sub-call's own content."""
    trace = Trace()
    runtime = _runtime(trace)
    seen: list[str] = []

    async def delegate(event: CodeDispatch, call_next: Any) -> Any:
        seen.append(event.sub_call_id)
        return await call_next()

    scope = runtime.open_scope()
    scope.on_code_dispatch_log(delegate)
    await run_program(runtime, scope=scope)
    assert sorted(seen) == ["c1:code:1", "c1:code:2"]
    assert [s.content for s in trace.settles] == [s.result.content for s in trace.settles]

"""MCP servers as tool sources (integrations §4): conformance group X.

Every test talks to a real MCP server written with the ``mcp`` SDK (``tests/data/``):
over stdio (a subprocess per test), over streamable HTTP on 127.0.0.1 (one server process
for the module, a new session per test), or in-process. These cross processes, so they
wait on events with bounds rather than on virtual time, and assert orderings, not times.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import pickle
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
import trio
from mcp import Client, MCPError

from dsh_sched import ModelToolCall, run_tool_calls
from dsh_tools import (
    Abort,
    ApprovalOutcome,
    ApprovalRequest,
    CallNext,
    Deny,
    ExecutionMode,
    ImageContent,
    PostDecision,
    PreDecision,
    Scope,
    TextContent,
    ToolCall,
    ToolExecution,
    ToolResult,
    ToolRuntime,
    thaw_json,
    tool,
)
from dsh_tools.mcp import (
    MCP_CONNECTION_LOST,
    MCP_PROTOCOL_ERROR,
    MCP_TOOL_ERROR,
    McpConnectionError,
    McpProtocolError,
    McpToolError,
    McpToolSource,
    open_mcp_source,
)
from dsh_tools.policies import install_timeout_policy
from tests.mcp_helpers import (
    DEMO,
    DEMO_TOOLS,
    LOWLEVEL,
    Events,
    HttpDemo,
    http_demo,
    process_gone,
    server_pid,
    stdio,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpDemo]:
    """One demo server over streamable HTTP for the module; each test opens its own session."""
    yield from http_demo(tmp_path_factory.mktemp("mcp-http"))


@pytest.fixture
def events(http: HttpDemo) -> Events:
    """The HTTP server's events, from this test on."""
    http.events.mark()
    return http.events


class Changes:
    """A change observer that counts notifications."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def call(name: str, arguments: object = None, scope: Scope | None = None, **kw: Any) -> ToolCall:
    return ToolCall(
        call_id=f"c-{name}", name=name, arguments={} if arguments is None else arguments,
        scope=scope, **kw,
    )  # fmt: skip


async def wait_until(predicate: Any) -> None:
    """Wait (bounded) until ``predicate()`` holds; another process makes it true."""
    with trio.fail_after(20):
        while not predicate():
            await trio.sleep(0.01)


@tool(name="add")
async def local_add(a: int) -> int:
    """A local add that the MCP one must not replace."""
    return a


def code_of(result: ToolResult) -> str | None:
    assert result.error is not None
    assert result.error.info is not None
    return result.error.info.code


# -- options and imports --------------------------------------------------------------------


def test_x001_import_needs_mcp_and_dsh_tools_does_not_import_it() -> None:
    """X-001: without mcp, importing dsh_tools.mcp says what to install; importing
    dsh_tools (and its other modules) never imports mcp."""
    probe = (
        "import sys, json\n"
        "import dsh_tools, dsh_tools.lowlevel, dsh_tools.policies, dsh_tools.cli\n"
        "plain = 'mcp' in sys.modules or 'dsh_tools.mcp' in sys.modules\n"
        "sys.modules['mcp'] = None\n"
        "try:\n"
        "    import dsh_tools.mcp\n"
        "except ImportError as exc:\n"
        "    print(json.dumps([plain, str(exc)]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(out.stdout) == [
        False,
        "dsh_tools.mcp requires the mcp package (mcp>=2,<3): pip install 'dsh-trio[mcp]'",
    ]


async def test_x004_option_errors_start_nothing(tmp_path: Path) -> None:
    """X-004: the option checks of I§4.1 raise at the call, in order, and start no process."""
    runtime = ToolRuntime()
    marker = tmp_path / "started"
    server = stdio(DEMO)
    server.args = ["-c", f"open({str(marker)!r}, 'w')"]
    closed = runtime.open_scope()
    closed.close()
    other = ToolRuntime().open_scope()
    cases: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({"runtime": object()}, TypeError, "runtime must be a ToolRuntime, got object"),
        ({"server": 5}, TypeError,
         "server must be a URL str, an mcp.StdioServerParameters or an mcp.Client, got int"),
        ({"server": "ftp://x"}, ValueError, "server URL must start with http:// or https://"),
        ({"scope": "s"}, TypeError, "scope must be a Scope or None"),
        ({"scope": other}, ValueError, "scope belongs to a different runtime"),
        ({"scope": closed}, RuntimeError, "scope is closed"),
        ({"prefix": 1}, TypeError, "prefix must be a str"),
        ({"prefix": "a.b"}, ValueError, 'prefix may contain only A-Z, a-z, 0-9, "_" and "-"'),
        ({"trusted": 1}, TypeError, "trusted must be a bool"),
        ({"approval": "yes"}, TypeError, "approval must be True, False or None"),
        ({"timeout": True}, TypeError, "timeout must be a positive finite number"),
        ({"timeout": 0}, ValueError, "timeout must be a positive finite number"),
        ({"timeout": float("nan")}, ValueError, "timeout must be a positive finite number"),
        ({"name": 3}, TypeError, "name must be a str or None"),
        # Order: the runtime is checked before the server, the server before the scope.
        ({"runtime": None, "server": 5}, TypeError, "runtime must be a ToolRuntime, got NoneType"),
        ({"server": 5, "prefix": 1}, TypeError,
         "server must be a URL str, an mcp.StdioServerParameters or an mcp.Client, got int"),
    ]  # fmt: skip
    for options, error, text in cases:
        kwargs: dict[str, Any] = {"runtime": runtime, "server": server, **options}
        with pytest.raises(error) as info:
            open_mcp_source(**kwargs)
        assert str(info.value) == text
    await trio.sleep(0.2)  # a started process would have written the marker by now
    assert not marker.exists()
    assert runtime.schemas() == []


def test_x026_errors_have_codes_and_survive_pickle_and_copy() -> None:
    """X-026: the three errors carry their codes through pickle, copy and deepcopy."""
    errors = [
        McpToolError("bad", (TextContent("bad"), ImageContent("AA", "image/png"))),
        McpProtocolError(-32603, "internal"),
        McpConnectionError('MCP server "demo" connection lost'),
    ]
    codes = [MCP_TOOL_ERROR, MCP_PROTOCOL_ERROR, MCP_CONNECTION_LOST]
    assert codes == ["MCP_TOOL_ERROR", "MCP_PROTOCOL_ERROR", "MCP_CONNECTION_LOST"]
    assert str(errors[1]) == "MCP error -32603: internal"
    for error, code in zip(errors, codes, strict=True):
        assert error.code == code
        for clone in (pickle.loads(pickle.dumps(error)), copy.copy(error), copy.deepcopy(error)):
            assert type(clone) is type(error)
            assert str(clone) == str(error)
            assert clone.code == code
    assert pickle.loads(pickle.dumps(errors[0])).content == errors[0].content  # type: ignore[attr-defined]
    assert copy.deepcopy(errors[1]).mcp_code == -32603  # type: ignore[attr-defined]
    assert McpToolError("no content").content == ()


# -- opening and registering ----------------------------------------------------------------


async def test_x002_x015_open_over_stdio_and_abort_a_call(tmp_path: Path) -> None:
    """X-002: tools land in the scope in listing order; schemas are the server's verbatim.
    X-015: an Abort 0.2 s into ``slow(5)`` gives ABORTED soon; the server saw the
    cancellation; the session still works."""
    runtime = ToolRuntime()
    scope = runtime.open_scope()
    events = Events(tmp_path / "events.txt")
    async with open_mcp_source(runtime, stdio(DEMO, events.path), scope=scope) as source:
        assert list(source.tools) == DEMO_TOOLS
        assert [s.name for s in runtime.schemas(scope)] == DEMO_TOOLS
        assert runtime.schemas() == []
        listing = await source.client.list_tools(cache_mode="refresh")
        server_schemas = {t.name: t.input_schema for t in listing.tools}
        for schema in runtime.schemas(scope):
            assert schema.parameters == server_schemas[schema.name]
        assert runtime.schemas(scope)[0].parameters["properties"]["a"]["title"] == "A"
        assert source.label == "demo"
        assert source.protocol_version == "2026-07-28"
        assert source.connected
        assert not source.closed
        assert dict(source.skipped) == {}
        assert repr(source) == "<McpToolSource 'demo' connected, 10 tools>"
        #
        abort = Abort()
        async with trio.open_nursery() as nursery:

            async def fire() -> None:
                await events.wait_for("call slow")
                await trio.sleep(0.2)
                abort.abort()

            nursery.start_soon(fire)
            start = trio.current_time()
            result = await runtime.execute(call("slow", {"seconds": 5}, scope, abort=abort))
            took = trio.current_time() - start
        assert result.content == (TextContent("Error: tool call aborted"),)
        assert code_of(result) == "ABORTED"
        assert took < 4  # long before the server would have answered
        await events.wait_for("cancelled slow")
        assert "done slow" not in events.lines()
        again = await runtime.execute(call("add", {"a": 2, "b": 2}, scope))
        assert again.content == (TextContent("4"),)


async def test_x003_x018_streamable_http_and_an_in_process_client(http: HttpDemo) -> None:
    """X-003: the same registrations over HTTP, and through a caller's own mcp.Client whose
    message handler still hears everything. X-018 in ``mode="legacy"``: ``extra`` arrives."""
    runtime = ToolRuntime()
    async with open_mcp_source(runtime, http.url) as source:
        assert list(source.tools) == DEMO_TOOLS
        result = await runtime.execute(call("add", {"a": 2, "b": 3}))
        assert result.content == (TextContent("5"),)

    from tests.data.mcp_demo_server import build_server

    seen: list[str] = []

    async def record(message: object) -> None:
        seen.append(str(getattr(message, "method", type(message).__name__)))

    runtime = ToolRuntime()
    client = Client(build_server(), mode="legacy", message_handler=record)
    async with open_mcp_source(runtime, client, name="inproc") as source:
        assert source.client is client
        assert list(source.tools) == DEMO_TOOLS
        assert source.label == "inproc"
        await runtime.execute(call("mutate", {"action": "add_extra"}))
        await wait_until(lambda: "extra" in source.tools)
        assert "notifications/tools/list_changed" in seen
        assert (await runtime.execute(call("extra"))).content == (TextContent("extra!"),)
        await runtime.execute(call("signal", {"times": 0}))
        await wait_until(
            lambda: "notifications/prompts/list_changed" in seen
        )  # every message reaches it


async def test_x005_prefix_and_provider_safe_names() -> None:
    """X-005: ``prefix`` + the safe name is registered; the server receives its own name."""
    from tests.data.mcp_lowlevel_server import server

    runtime = ToolRuntime()
    async with open_mcp_source(runtime, Client(server), prefix="srv__") as source:
        tool = source.tools["srv__get_weather"]
        assert tool.mcp_name == "get.weather"
        result = await runtime.execute(call("srv__get_weather", {"city": "Oslo"}))
        assert result.content == (TextContent("called get.weather"),)


async def test_x006_x010_x012_x021_lowlevel_server(caplog: pytest.LogCaptureFixture) -> None:
    """X-006, X-010, X-012, X-021: skips and their reasons; every block kind; a JSON-RPC error;
    a listing over three pages."""
    runtime = ToolRuntime()
    runtime.register(local_add)
    caplog.set_level(logging.WARNING, logger="dsh_tools.mcp")
    async with open_mcp_source(runtime, stdio(LOWLEVEL)) as source:
        # the tools of all three pages are there (those not skipped).
        assert list(source.tools) == [
            "get_weather", "a_b", "rich", "only_structured", "internal", "silent_error",
            "image_error",
        ]  # fmt: skip
        assert source.tools["a_b"].mcp_name == "a.b"
        # each skip with its reason, logged once at WARNING.
        reasons = {
            "add": 'tool "add" is already registered (for a per-scope variant, register '
            "through that scope instead)",
            "a_b": 'registered name "a_b" is already used by MCP tool "a.b"',
            "run_code": 'tool name "run_code" is reserved for the Code Mode presentation '
            "transport and cannot be registered or shadowed",
            "x" * 70: f'registered name "{"x" * 70}" must have 1 to 64 characters',
            "negzero": "inputSchema is not lossless JSON",
        }
        assert dict(source.skipped) == reasons
        logged = [r.getMessage() for r in caplog.records if r.name == "dsh_tools.mcp"]
        assert logged == [
            f'MCP server "lowlevel": tool "{n}" skipped: {why}' for n, why in reasons.items()
        ]
        assert all(r.levelno == logging.WARNING for r in caplog.records)
        # every kind of block the server can send.
        rich = await runtime.execute(call("rich"))
        assert rich.content == (
            TextContent("[audio omitted: audio/wav]"),
            TextContent("[resource link: file:///a.txt]"),
            TextContent("embedded text"),
            TextContent("[resource omitted: file:///c.bin]"),
        )
        structured = await runtime.execute(call("only_structured"))
        assert thaw_json(structured.value) == {
            "content": [],
            "structured_content": {"b": [1, 2], "é": "ü"},
        }
        assert structured.content == (
            TextContent(json.dumps({"b": [1, 2], "é": "ü"}, ensure_ascii=False, indent=2)),
        )
        # a JSON-RPC error answer.
        internal = await runtime.execute(call("internal"))
        assert internal.content == (TextContent("Error: MCP error -32603: internal"),)
        assert internal.error is not None
        assert internal.error.info is not None
        assert internal.error.info.name == "McpProtocolError"
        assert code_of(internal) == MCP_PROTOCOL_ERROR
        # I§4.4 step 5: errors without text, and with a non-text block.
        silent = await runtime.execute(call("silent_error"))
        assert silent.content == (
            TextContent('Error: MCP tool "silent_error" reported an error without text'),
        )
        image = await runtime.execute(call("image_error"))
        assert image.content == (TextContent("Error: bad image\n[image content]"),)
        # A refresh with the same listing reports no skip again.
        caplog.clear()
        await source.refresh()
        assert dict(source.skipped) == reasons
        assert [r for r in caplog.records if r.name == "dsh_tools.mcp"] == []


# -- calls ----------------------------------------------------------------------------------


async def test_x007_x009_x010_x011_x027_calls_over_http(http: HttpDemo, events: Events) -> None:
    """X-007, X-009, X-010, X-011, X-027: arguments checked before sending, the results of
    add, img and point, a tool error with post-execute, and what a trusted tool records."""
    runtime = ToolRuntime()
    scope = runtime.open_scope()
    posts: list[str] = []

    async def post(
        execution: ToolExecution, result: ToolResult, call_next: CallNext[PostDecision]
    ) -> PostDecision:
        posts.append(execution.name)
        return await call_next()

    runtime.on_post_execute(post)
    async with open_mcp_source(runtime, http.url, scope=scope, trusted=True) as source:
        #
        add = source.tools["add"]
        assert add.mcp_name == "add"
        assert add.validated
        assert not add.destructive
        assert add.annotations == {"readOnlyHint": True, "idempotentHint": True}
        assert add.definition is runtime.get("add", scope)
        # a validated tool fails INVALID_ARGS without a round trip.
        bad = await runtime.execute(call("add", {"a": "x"}, scope))
        assert bad.content == (
            TextContent('Error: invalid arguments: missing required property "b"; '
                        '"a" must be an integer'),
        )  # fmt: skip
        assert code_of(bad) == "INVALID_ARGS"
        # model text that is not JSON reaches the body as text.
        outcome = await run_tool_calls(
            runtime, [ModelToolCall(call_id="t", name="add", arguments="{bad")], scope=scope
        )
        assert outcome.results[0].result.content == (
            TextContent('Error: invalid arguments: "arguments" must be an object'),
        )
        assert "call add" not in events.lines()
        #
        result = await runtime.execute(call("add", {"a": 1, "b": 2}, scope))
        assert result.content == (TextContent("3"),)
        assert thaw_json(result.value) == {
            "content": [{"type": "text", "text": "3"}],
            "structured_content": {"result": 3},
        }
        image = await runtime.execute(call("img", {}, scope))
        assert image.content == (ImageContent("iVBORw0KGgo=", "image/png"),)
        assert thaw_json(image.value) == {
            "content": [{"type": "image", "data": "iVBORw0KGgo=", "mime_type": "image/png"}],
            "structured_content": None,
        }
        point = await runtime.execute(call("point", {"x": 1, "y": 2}, scope))
        assert point.value is not None
        assert thaw_json(point.value)["structured_content"] == {"x": 1, "y": 2}
        #
        posts.clear()
        boom = await runtime.execute(call("boom", {}, scope))
        assert boom.is_error
        assert boom.content == (TextContent("Error: Error executing tool boom"),)
        assert boom.error is not None
        assert boom.error.info is not None
        assert (boom.error.info.name, boom.error.info.code) == ("McpToolError", MCP_TOOL_ERROR)
        assert posts == ["boom"]
        assert events.lines() == ["list", "call add", "call boom"]


async def test_x008_schemas_outside_the_subset_are_checked_by_the_server(http: HttpDemo) -> None:
    """X-008: ``weird`` (anyOf) is unvalidated: the server's own check answers."""
    runtime = ToolRuntime()
    async with open_mcp_source(runtime, http.url) as source:
        assert not source.tools["weird"].validated
        result = await runtime.execute(call("weird", {"value": -1}))
        assert code_of(result) == MCP_TOOL_ERROR
        assert "greater than or equal to 0" in result.content[0].text  # type: ignore[union-attr]
        fine = await runtime.execute(call("weird", {"value": 4}))
        assert fine.content == (TextContent("weird 4"),)


async def test_x013_x025_classification(http: HttpDemo, events: Events) -> None:
    """X-013, X-025: untrusted tools run one at a time; trusted read-only ones overlap at the
    server; a trusted destructive tool still runs alone; 50 parallel adds are all right."""
    slow = [
        ModelToolCall(call_id=f"s{i}", name="slow", arguments={"seconds": 0.3}) for i in range(5)
    ]
    for trusted in (False, True):
        runtime = ToolRuntime()
        async with open_mcp_source(runtime, http.url, trusted=trusted, approval=False):
            events.mark()
            outcome = await run_tool_calls(runtime, slow, max_parallel=5)
            assert [r.result.content for r in outcome.results] == [(TextContent("slept 0.3"),)] * 5
            lines = [ln for ln in events.lines() if ln.endswith("slow")]
            mode = ExecutionMode.PARALLEL if trusted else ExecutionMode.EXCLUSIVE
            assert {r.mode for r in outcome.results} == {mode}
            if trusted:  # all five started at the server before the first finished
                assert lines[:5] == ["call slow"] * 5
            else:
                assert lines == ["call slow", "done slow"] * 5
            note = runtime.execution_mode(call("write_note", {"text": "x"}))
            assert note is ExecutionMode.EXCLUSIVE
    runtime = ToolRuntime()
    async with open_mcp_source(runtime, http.url, trusted=True):
        adds = [
            ModelToolCall(call_id=f"a{i}", name="add", arguments={"a": i, "b": 1})
            for i in range(50)
        ]
        outcome = await run_tool_calls(runtime, adds, max_parallel=50)
        assert [r.result.content for r in outcome.results] == [
            (TextContent(str(i + 1)),) for i in range(50)
        ]
        assert {r.mode for r in outcome.results} == {ExecutionMode.PARALLEL}


class Service:
    """An approval service that records what it is asked and allows it."""

    def __init__(self) -> None:
        self.reasons: list[str | None] = []

    async def request(self, request: ApprovalRequest) -> ApprovalOutcome:
        self.reasons.append(request.reason)
        return ApprovalOutcome.ALLOWED_ONCE


async def test_x014_approval_of_destructive_tools(http: HttpDemo) -> None:
    """X-014: who is asked before ``write_note``, by ``approval=`` and the runtime's service."""
    asked = 'MCP tool "write_note" of server "demo" may change its environment'
    note = {"text": "hi"}

    async def run(
        approval: bool | None, service: Service | None, name: str = "write_note", **kw: Any
    ) -> ToolResult:
        runtime = ToolRuntime(approval=service)
        scope = runtime.open_scope()

        async def deny(execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision:
            return Deny("not today")

        if kw.get("deny") == "earlier":
            runtime.on_pre_execute(deny)
        trusted = bool(kw.get("trusted"))
        async with open_mcp_source(
            runtime, http.url, scope=scope, approval=approval, trusted=trusted
        ):
            if kw.get("deny") == "later":  # inner to the source's hook: its Deny comes back
                runtime.on_pre_execute(deny)
            arguments = note if name == "write_note" else {"a": 1, "b": 2}
            return await runtime.execute(call(name, arguments, scope))

    assert (await run(None, None)).content == (TextContent("noted: hi"),)
    service = Service()
    assert (await run(None, service)).content == (TextContent("noted: hi"),)
    assert service.reasons == [asked]
    denied = await run(True, None)
    assert denied.content == (TextContent(f"Error: {asked}"),)
    assert denied.is_error
    service = Service()
    assert not (await run(False, service)).is_error
    assert service.reasons == []
    assert not (await run(None, service, name="add", trusted=True)).is_error
    assert service.reasons == []
    for where in ("earlier", "later"):
        kept = await run(True, service, deny=where)
        assert kept.content == (TextContent("Error: not today"),)
        assert service.reasons == []


async def test_x016_timeout_policy(http: HttpDemo) -> None:
    """X-016: the source's ``timeout`` is enforced by the timeout policy; the session lives on."""
    runtime = ToolRuntime()
    install_timeout_policy(runtime)
    async with open_mcp_source(runtime, http.url, timeout=0.2) as source:
        assert source.tools["slow"].definition.timeout == 0.2
        result = await runtime.execute(call("slow", {"seconds": 5}))
        assert result.content == (TextContent("Error: tool call timed out after 0.2s"),)
        assert code_of(result) == "TOOL_TIMEOUT"
        again = await runtime.execute(call("add", {"a": 1, "b": 1}))
        assert again.content == (TextContent("2"),)


# -- crashes, list changes, closing ---------------------------------------------------------


async def test_x017_a_crash_mid_call_fails_every_call_of_the_session(tmp_path: Path) -> None:
    """X-017: ``crash`` while another batch runs ``slow(2)``: both MCP_CONNECTION_LOST; later
    calls fail the same way without a request; leaving the block raises nothing."""
    runtime = ToolRuntime()
    events = Events(tmp_path / "events.txt")
    lost = 'Error: MCP server "demo" connection lost'
    outcomes: list[ToolResult] = []
    async with open_mcp_source(runtime, stdio(DEMO, events.path), trusted=True) as source:
        async with trio.open_nursery() as nursery:

            async def slow_batch() -> None:
                slow = ModelToolCall(call_id="s", name="slow", arguments={"seconds": 2})
                outcome = await run_tool_calls(runtime, [slow])
                outcomes.append(outcome.results[0].result)

            nursery.start_soon(slow_batch)
            await events.wait_for("call slow")
            crash = ModelToolCall(call_id="c", name="crash", arguments={})
            crashed = (await run_tool_calls(runtime, [crash])).results[0].result
        assert crashed.content == (TextContent(lost),)
        assert code_of(crashed) == MCP_CONNECTION_LOST
        assert outcomes[0].content == (TextContent(lost),)
        assert not source.connected
        events.mark()
        later = await runtime.execute(call("add", {"a": 1, "b": 2}))
        assert later.content == (TextContent(lost),)
        assert list(source.tools) == DEMO_TOOLS  # still registered: the model learns why
        with pytest.raises(MCPError):
            await source.refresh()
    assert source.closed
    assert events.lines() == []


async def test_x018_x019_list_changes_follow_the_server(tmp_path: Path) -> None:
    """X-018: an added tool is registered after the signal, with one notification.
    X-019: a removed tool's running call finishes; later calls are UNKNOWN_TOOL; a changed
    tool is registered again; the others keep their definitions."""
    runtime = ToolRuntime()
    changes = Changes()
    runtime.on_change(changes)
    events = Events(tmp_path / "events.txt")
    async with open_mcp_source(runtime, stdio(DEMO, events.path)) as source:
        before = {name: tool.definition for name, tool in source.tools.items()}
        changes.count = 0
        await runtime.execute(call("mutate", {"action": "add_extra"}))
        await wait_until(lambda: "extra" in source.tools)
        await source.refresh()  # after any refresh still running: nothing more arrives
        assert changes.count == 1
        assert (await runtime.execute(call("extra"))).content == (TextContent("extra!"),)
        #
        changes.count = 0
        slow_results: list[ToolResult] = []
        async with trio.open_nursery() as nursery:

            async def slow() -> None:
                slow_results.append(await runtime.execute(call("slow", {"seconds": 1})))

            nursery.start_soon(slow)
            await events.wait_for("call slow")
            await runtime.execute(call("mutate", {"action": "remove_slow"}))
            await wait_until(lambda: "slow" not in source.tools)
            assert slow_results == []
        assert slow_results[0].content == (TextContent("slept 1.0"),)
        gone = await runtime.execute(call("slow", {"seconds": 0}))
        assert code_of(gone) == "UNKNOWN_TOOL"
        assert changes.count == 1
        await runtime.execute(call("mutate", {"action": "describe_add"}))
        await wait_until(lambda: list(source.tools)[-1] == "add")
        await source.refresh()
        assert changes.count == 3  # the removal, then add disposed and registered again
        assert runtime.get("add") is not before["add"]
        assert runtime.get("add").description == "Add two integers, described anew."  # type: ignore[union-attr]
        for name in ("write_note", "boom", "img", "point", "mutate", "weird"):
            assert runtime.get(name) is before[name]


async def test_x020_signals_during_a_refresh_cause_at_most_one_more(tmp_path: Path) -> None:
    """X-020: a refresh with no change notifies nothing; five signals during one refresh
    cause at most two listings in all."""
    runtime = ToolRuntime()
    changes = Changes()
    events = Events(tmp_path / "events.txt")
    server = stdio(DEMO, events.path, DEMO_LIST_DELAY="0.3")
    async with open_mcp_source(runtime, server) as source:
        runtime.on_change(changes)
        await source.refresh()
        assert changes.count == 0
        events.mark()
        await runtime.execute(call("signal", {"times": 1}))
        await events.wait_for("list")  # a background refresh is listing (for 0.3 s)
        await runtime.execute(call("signal", {"times": 4}))  # four more during that listing
        await trio.sleep(1.0)  # time for three more 0.3 s listings, were they (wrongly) run
        assert 1 <= events.lines().count("list") <= 2
        assert changes.count == 0


async def test_x022_a_failing_background_refresh_is_logged(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """X-022: a background refresh whose listing fails logs a WARNING and changes nothing;
    ``refresh()`` raises what listing raised."""
    from tests.data.mcp_demo_server import build_server

    monkeypatch.setenv("DEMO_LIST_FAIL_AFTER", "1")
    caplog.set_level(logging.WARNING, logger="dsh_tools.mcp")
    runtime = ToolRuntime()
    async with open_mcp_source(runtime, Client(build_server(), mode="legacy")) as source:
        before = dict(source.tools)
        await runtime.execute(call("mutate", {"action": "add_extra"}))
        message = 'MCP server "demo": tools/list failed: listing is broken'
        await wait_until(lambda: message in [r.getMessage() for r in caplog.records])
        assert dict(source.tools) == before
        with pytest.raises(MCPError, match="listing is broken"):
            await source.refresh()


async def test_x023_leaving_the_block_disposes_lifo_and_ends_the_server(tmp_path: Path) -> None:
    """X-023: leaving the block disposes the tools and the hook LIFO, one notification per
    tool; the subprocess exits; kept definitions fail with "source is closed"."""
    runtime = ToolRuntime()
    scope = runtime.open_scope()
    events = Events(tmp_path / "events.txt")
    seen: list[list[str]] = []
    runtime.on_change(lambda: seen.append([s.name for s in runtime.schemas(scope)]))
    async with open_mcp_source(runtime, stdio(DEMO, events.path), scope=scope) as source:
        kept = source.tools["add"].definition
        seen.clear()
    assert [len(names) for names in seen] == list(range(len(DEMO_TOOLS) - 1, -1, -1))
    assert seen[0] == DEMO_TOOLS[:-1]  # the last registered went first
    assert source.closed
    assert not source.connected
    assert dict(source.tools) == {}
    pid = server_pid(events)
    await wait_until(lambda: process_gone(pid))
    with pytest.raises(McpConnectionError, match=r'^MCP server "demo" source is closed$'):
        await kept.execute({"a": 1, "b": 2}, None)  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match=r"^MCP source is closed$"):
        await source.refresh()
    # The approval hook went too: a local destructive-looking call is not asked about.
    assert runtime.schemas(scope) == []


async def test_x023_an_exception_leaves_the_block_unchanged(http: HttpDemo) -> None:
    """X-023: a ValueError raised in the block propagates unchanged; everything is disposed."""
    runtime = ToolRuntime()
    changes = Changes()
    runtime.on_change(changes)
    error = ValueError("x")
    source: Any = open_mcp_source(runtime, http.url)
    with pytest.raises(ValueError, match=r"^x$") as info:
        await _raise_inside(source, changes, error)
    assert info.value is error
    assert changes.count == len(DEMO_TOOLS)
    assert source.closed
    assert runtime.schemas() == []


async def _raise_inside(source: Any, changes: Changes, error: Exception) -> None:
    async with source:
        changes.count = 0
        raise error


async def test_x024_a_server_that_cannot_start(tmp_path: Path) -> None:
    """X-024: a missing command, or a server that exits at start: the SDK's exception
    propagates; nothing registered, nobody notified."""
    runtime = ToolRuntime()
    changes = Changes()
    runtime.on_change(changes)
    missing = stdio(DEMO)
    missing.command = str(tmp_path / "no-such-command")
    source: Any = open_mcp_source(runtime, missing)
    with pytest.raises(FileNotFoundError, match="no-such-command"):
        async with source:
            pytest.fail("entered")  # pragma: no cover
    assert source.closed
    assert not source.connected
    with pytest.raises(BaseExceptionGroup) as info:
        async with open_mcp_source(runtime, stdio(DEMO, DEMO_EXIT_AT_START="1")):
            pytest.fail("entered")  # pragma: no cover
    assert info.group_contains(MCPError, match=r"^Connection closed$")
    assert changes.count == 0
    assert runtime.schemas() == []


# -- edges of the source's life -------------------------------------------------------------


def demo_client(**kw: Any) -> Client:
    from tests.data.mcp_demo_server import build_server

    return Client(build_server(), **kw)


async def test_the_source_is_made_by_open_mcp_source_and_entered_once() -> None:
    runtime = ToolRuntime()
    with pytest.raises(TypeError, match="no public constructor"):
        McpToolSource()
    source = open_mcp_source(runtime, demo_client())
    with pytest.raises(RuntimeError, match=r"^MCP source is not open$"):
        await source.refresh()  # type: ignore[attr-defined]
    async with source as entered:
        with pytest.raises(RuntimeError, match="entered only once"):
            async with source:
                pytest.fail("entered twice")  # pragma: no cover
        assert entered.connected


async def test_the_label_falls_back_to_mcp() -> None:
    from mcp.server.lowlevel import Server

    from tests.data import mcp_lowlevel_server as lowlevel

    anonymous: Server[Any] = Server(
        "", on_list_tools=lowlevel._list_tools, on_call_tool=lowlevel._call_tool
    )
    async with open_mcp_source(ToolRuntime(), Client(anonymous)) as source:
        assert source.label == "mcp"
        assert "get_weather" in source.tools


async def test_a_listing_that_fails_at_open_leaves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEMO_LIST_FAIL_AFTER", "0")
    runtime = ToolRuntime()
    changes = Changes()
    runtime.on_change(changes)
    source = open_mcp_source(runtime, demo_client())
    with pytest.raises(MCPError, match="listing is broken"):
        async with source:
            pytest.fail("entered")  # pragma: no cover
    assert source.closed  # type: ignore[attr-defined]
    assert changes.count == 0
    assert runtime.get("add") is None


async def test_more_than_100_pages_are_cut(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.data.mcp_lowlevel_server import server

    monkeypatch.setenv("LOWLEVEL_ENDLESS", "1")
    runtime = ToolRuntime()
    async with open_mcp_source(runtime, Client(server)) as source:
        assert list(source.tools) == [f"t{i}" for i in range(100)]
    assert [r.getMessage() for r in caplog.records if r.name == "dsh_tools.mcp"] == [
        'MCP server "lowlevel": tools/list has more than 100 pages; the rest is ignored'
    ]


class TeardownFails(Client):
    """A client whose exit fails after closing (as a broken transport might)."""

    async def __aexit__(self, *exc: Any) -> None:
        await super().__aexit__(*exc)
        raise RuntimeError("teardown broke")


async def test_a_failure_while_closing_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tests.data.mcp_demo_server import build_server

    async with open_mcp_source(ToolRuntime(), TeardownFails(build_server())) as source:
        pass
    assert source.closed
    assert [r.getMessage() for r in caplog.records if r.name == "dsh_tools.mcp"] == [
        'MCP server "demo": closing failed: teardown broke'
    ]


class ListenEnds(Client):
    """A client whose change stream fails to open, or ends at once (``fail``)."""

    fail = False

    def listen(self, **kw: Any) -> Any:
        @contextlib.asynccontextmanager
        async def stream() -> AsyncIterator[Any]:
            if self.fail:
                raise RuntimeError("no stream")

            async def nothing() -> AsyncIterator[Any]:
                return
                yield  # pragma: no cover - makes this an async generator

            yield nothing()

        return stream()


@pytest.mark.parametrize("fail", [False, True])
async def test_a_change_stream_that_ends_while_connected_is_reported(
    fail: bool, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.data.mcp_demo_server import build_server

    client = ListenEnds(build_server())
    client.fail = fail
    async with open_mcp_source(ToolRuntime(), client) as source:
        message = (
            'MCP server "demo": the tool change stream ended; call refresh() to update the tools'
        )
        await wait_until(lambda: message in [r.getMessage() for r in caplog.records])
        assert source.connected


class GatedListing(Client):
    """A client whose listings, once ``gate`` is set up, wait for it after the server answered."""

    gate: trio.Event | None = None
    waiting: trio.Event

    async def list_tools(self, **kw: Any) -> Any:
        result = await super().list_tools(**kw)
        if self.gate is not None:
            self.waiting.set()
            await self.gate.wait()
        return result


async def test_a_refresh_that_ends_after_closing_changes_nothing() -> None:
    from tests.data.mcp_demo_server import build_server

    runtime = ToolRuntime()
    client = GatedListing(build_server())
    errors: list[str] = []
    async with trio.open_nursery() as outside:
        async with open_mcp_source(runtime, client) as source:
            client.gate = trio.Event()
            client.waiting = trio.Event()

            async def refresh() -> None:
                with pytest.raises(RuntimeError) as info:
                    await source.refresh()
                errors.append(str(info.value))

            outside.start_soon(refresh)
            await client.waiting.wait()  # the listing is back, held before it is applied
        client.gate.set()
    assert errors == ["MCP source is closed"]
    assert runtime.schemas() == []


async def test_x023_a_call_in_flight_when_the_block_ends_fails_as_closed(
    http: HttpDemo, events: Events
) -> None:
    """X-023 (I§4.6): a call still in flight when the source closes fails with
    ``source is closed``."""
    runtime = ToolRuntime()
    results: list[ToolResult] = []
    async with trio.open_nursery() as outside, open_mcp_source(runtime, http.url):

        async def slow() -> None:
            results.append(await runtime.execute(call("slow", {"seconds": 5})))

        outside.start_soon(slow)
        await events.wait_for("call slow")
    assert results[0].content == (TextContent('Error: MCP server "demo" source is closed'),)
    assert code_of(results[0]) == MCP_CONNECTION_LOST

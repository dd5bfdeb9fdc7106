"""The asyncio bridge under real asyncio frameworks (issue 16 scope 3): a pydantic-ai agent
whose tool executor is dsh-trio, driven by pydantic-ai's own ``FunctionModel`` /
``TestModel``; and a Starlette app served by uvicorn on 127.0.0.1 whose handler survives a
client disconnect mid-batch."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import trio
import uvicorn
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from dsh_sched import (
    CallCommitted,
    CallStarted,
    JsonlSessionLog,
    RecordingSink,
    read_session_log,
)
from dsh_tools import ABORTED, ExecutionMode, ToolRuntime, define_tool
from dsh_tools.policies import install_timeout_policy
from tests.helpers import text_output
from tests.test_sched_fixtures import text_of

if TYPE_CHECKING:
    from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


pydantic_example = _example("aio_pydantic_ai")
web_example = _example("aio_web")


# -- pydantic-ai ------------------------------------------------------------------------------


def _agent_runtime(steps: list[str]) -> ToolRuntime:
    """``read`` is parallel-safe, ``write`` exclusive; both log start/end; ``slow`` has a
    0.05 s timeout; a guard denies ``write`` of ``"secret"``."""
    runtime = ToolRuntime()

    def body(name: str, seconds: float) -> Any:
        async def run(args: Any, ctx: Any) -> str:
            steps.append(f"{ctx.call_id} start")
            await trio.sleep(seconds)
            steps.append(f"{ctx.call_id} end")
            return f"{name} {args.get('x', '')}".strip()

        return run

    for name, parallel, seconds, timeout in (
        ("read", True, 0.02, None),
        ("write", False, 0.01, None),
        ("slow", True, 5.0, 0.05),
    ):
        runtime.register(
            define_tool(
                name=name,
                description=f"the {name} tool",
                parameters={"type": "object", "properties": {"x": {"type": "string"}}},
                output=text_output(),
                execute=body(name, seconds),
                is_concurrency_safe=parallel,
                timeout=timeout,
            )
        )
    install_timeout_policy(runtime)
    runtime.guard(
        lambda execution: "secrets stay put" if execution.arguments.get("x") == "secret" else None
    )
    return runtime


def _scripted(
    calls: list[tuple[str, dict[str, Any]]],
) -> tuple[FunctionModel, list[list[ToolReturnPart]]]:
    returned: list[list[ToolReturnPart]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            assert sorted(t.name for t in info.function_tools) == ["read", "slow", "write"]
            return ModelResponse(
                parts=[
                    ToolCallPart(tool_name=name, args=args, tool_call_id=f"c{i}")
                    for i, (name, args) in enumerate(calls)
                ]
            )
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        returned.append([p for p in last.parts if isinstance(p, ToolReturnPart)])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(model), returned


def test_pydantic_ai_agent_runs_its_tool_calls_as_one_dsh_batch() -> None:
    """A model response's calls reach dsh-trio as one batch: the reads overlap, the write is
    a barrier, results are in model order, the guard and the timeout policy apply, and the
    model receives each call's result text."""
    steps: list[str] = []
    runtime = _agent_runtime(steps)
    sink = RecordingSink()
    model, returned = _scripted(
        [
            ("read", {"x": "a"}),
            ("read", {"x": "b"}),
            ("write", {"x": "c"}),
            ("read", {"x": "d"}),
            ("write", {"x": "secret"}),
            ("slow", {}),
        ]
    )
    agent = Agent(model, toolsets=[pydantic_example.DshToolset(runtime, sink=sink)])

    async def main() -> str:
        result = await agent.run("go")
        return str(result.output)

    assert asyncio.run(main()) == "done"
    started = [e for e in sink.events if isinstance(e, CallStarted)]
    assert len({e.batch for e in sink.events}) == 1  # one dsh batch for the whole response
    assert [e.call.call_id for e in started] == [f"c{i}" for i in range(6)]
    assert [e.mode for e in started[:3]] == [
        ExecutionMode.PARALLEL,
        ExecutionMode.PARALLEL,
        ExecutionMode.EXCLUSIVE,
    ]
    # c0 and c1 overlap; the write c2 starts after both ended; c3 starts after c2 ended.
    assert sorted(steps[:2]) == ["c0 start", "c1 start"]
    assert steps.index("c2 start") > max(steps.index("c0 end"), steps.index("c1 end"))
    assert steps.index("c3 start") > steps.index("c2 end")
    committed = [e for e in sink.events if isinstance(e, CallCommitted)]
    assert [e.index for e in committed] == list(range(6))
    (parts,) = returned
    answers = {p.tool_call_id: p.content for p in parts}
    assert answers == {
        "c0": "read a",
        "c1": "read b",
        "c2": "write c",
        "c3": "read d",
        "c4": "Error: secrets stay put",
        "c5": "Error: tool call timed out after 0.05s",
    }


def test_pydantic_ai_test_model_calls_every_tool_through_dsh() -> None:
    """pydantic-ai's ``TestModel`` (calls every tool with generated arguments) runs through
    the toolset: every call is answered by dsh-trio's pipeline."""
    steps: list[str] = []
    runtime = _agent_runtime(steps)
    sink = RecordingSink()
    agent = Agent(
        TestModel(call_tools=["read", "write"]),
        toolsets=[pydantic_example.DshToolset(runtime, sink=sink)],
    )

    async def main() -> Any:
        return (await agent.run("go")).output

    output = asyncio.run(main())
    committed = [e for e in sink.events if isinstance(e, CallCommitted)]
    assert sorted(e.call.name for e in committed) == ["read", "write"]
    assert all(not e.result.is_error for e in committed)
    assert "read" in json.dumps(output)


def test_pydantic_ai_example_script_runs() -> None:
    """``python examples/aio_pydantic_ai.py`` prints the agent's answer."""
    completed = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "aio_pydantic_ai.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "Oslo: sunny / Lima: sunny / saved pack"


def test_pydantic_ai_run_cancelled_mid_batch_drains_it() -> None:
    """Cancelling the agent run while the batch runs cancels the batch; its bodies drain
    and every call gets its result in the sink before ``CancelledError`` arrives."""
    steps: list[str] = []
    runtime = _agent_runtime(steps)
    runtime.on_pre_execute(_announce)
    sink = RecordingSink()
    model, _ = _scripted([("slow", {}), ("slow", {}), ("read", {"x": "z"})])
    agent = Agent(model, toolsets=[pydantic_example.DshToolset(runtime, sink=sink)])

    async def main() -> list[str]:
        _announced.clear()
        run = asyncio.create_task(agent.run("go"))
        while len(_announced) < 3:
            await asyncio.sleep(0.001)
        run.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await run
        return [
            e.result.error.info.code
            for e in sink.events
            if isinstance(e, CallCommitted) and e.result.error and e.result.error.info
        ]

    codes = asyncio.run(main())
    # All three had started (the pre-execute hook saw them); none had finished.
    assert codes == [ABORTED] * 3


_announced: list[str] = []


async def _announce(execution: Any, call_next: Any) -> Any:
    _announced.append(execution.call_id)
    return await call_next()


# -- Starlette + uvicorn ----------------------------------------------------------------------


def _call(call_id: str, **arguments: object) -> dict[str, object]:
    return {"id": call_id, "name": "lookup", "arguments": arguments}


def test_web_app_answers_and_survives_a_client_disconnect_mid_batch(tmp_path: Path) -> None:
    """A handler runs a batch per request; a client that disconnects mid-batch leaves the
    server running, the batch drained and every call's result in the session log."""
    log_path = tmp_path / "session.jsonl"
    turns: list[str] = []
    session_log = JsonlSessionLog(log_path)
    app = web_example.build_app(web_example.build_runtime(), session_log, on_turn=turns.append)

    async def main() -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(app, lifespan="off", log_level="warning", limit_max_requests=5)
        server = uvicorn.Server(config)
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        try:
            async with asyncio.timeout(30):
                while not server.started:
                    await asyncio.sleep(0.01)
                url = f"http://127.0.0.1:{port}/turn"
                async with httpx.AsyncClient() as client:
                    quick = {
                        "calls": [{"id": "q1", "name": "lookup", "arguments": {"city": "Oslo"}}]
                    }
                    response = await client.post(url, json=quick)
                assert response.json() == [{"id": "q1", "is_error": False, "text": "Oslo: sunny"}]

                # A raw client that goes away while two slow calls run.
                body = json.dumps(
                    {
                        "calls": [
                            {
                                "id": "s1",
                                "name": "lookup",
                                "arguments": {"city": "A", "seconds": 30},
                            },
                            {
                                "id": "s2",
                                "name": "lookup",
                                "arguments": {"city": "B", "seconds": 30},
                            },
                        ]
                    }
                ).encode()
                _reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(
                    b"POST /turn HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
                while len(read_session_log(log_path)) < 3:  # q1, s1, s2 logged as calls
                    await asyncio.sleep(0.01)
                writer.close()
                await writer.wait_closed()
                while len(turns) < 2:
                    await asyncio.sleep(0.01)
                # The handler returned only after the batch had drained: both results are
                # already in the log.
                assert [c.result is not None for c in read_session_log(log_path)] == [True] * 3

                # The server still serves.
                async with httpx.AsyncClient() as client:
                    response = await client.post(url, json=quick)
                assert response.status_code == 200
        finally:
            server.should_exit = True
            await serving

    with session_log:
        asyncio.run(main())
    assert turns == ["finished", "client gone", "finished"]
    logged = {c.call_id: c for c in read_session_log(log_path)}
    for call_id in ("s1", "s2"):
        result = logged[call_id].result
        assert result is not None
        assert result.error is not None
        assert result.error.info is not None
        assert result.error.info.code == ABORTED
    assert text_of(logged["q1"].result) == "Oslo: sunny"  # type: ignore[arg-type]
    assert not trio.lowlevel.in_trio_run()

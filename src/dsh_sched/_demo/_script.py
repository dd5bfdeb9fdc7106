"""The demo's scripted model message, its demo-only tool and guard, and its workspace.

The batch runs over the shipped ``@tool`` file tools (``dsh_tools.examples``): reads are
parallel-safe, writes exclusive. Added here, for the demo only: ``fetch_url``, a slow
parallel-safe tool that only sleeps (it never touches the network), and a guard that
refuses to touch ``.env`` files, so that one call is denied.

Local file I/O takes microseconds, which would leave the timeline a row of slivers, so every
file tool body first waits a fixed, simulated latency (:data:`LATENCY`); the real file
operation follows it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Protocol

import attrs
import trio

from dsh_tools import (
    HarnessError,
    TextContent,
    ToolDefinition,
    ToolRunContext,  # needed at run time: @tool resolves the annotations
    UserMessage,
    tool,
)
from dsh_tools.examples import file_tools

from .._calls import ModelToolCall

if TYPE_CHECKING:
    from pathlib import Path

    from dsh_tools import ExecutionToken, JsonValue, ToolExecution
    from dsh_tools.code import CodeRuntime

__all__ = [
    "CODE_PROGRAM",
    "LATENCY",
    "PAGES",
    "BodyWatcher",
    "default_code_runtime",
    "demo_calls",
    "demo_code_calls",
    "demo_tools",
    "protect_secrets",
    "seed_workspace",
]

#: Simulated latency, in seconds, that each file tool's body waits before its real work.
LATENCY: dict[str, float] = {
    "list_dir": 0.15,
    "read_file": 0.25,
    "stat": 0.1,
    "write_file": 0.3,
    "delete_file": 0.2,
}

#: What ``fetch_url`` knows: URL -> (simulated seconds, canned body).
PAGES: dict[str, tuple[float, str]] = {
    "https://example.org/changelog": (1.2, "changelog: 0.1.0 ships the batch scheduler"),
    "https://example.org/status": (0.5, "status: all systems operational"),
}

_SEED = {
    "notes.md": "# Notes\n\n- results commit in model order\n- writes run alone\n",
    "data/config.json": '{"max_parallel": 10, "retries": 2}\n',
    "secrets.env": "API_TOKEN=not-a-real-token\n",
}

_SUMMARY = "# Summary\n\nThe changelog and the notes were read in parallel.\n"


class FetchError(HarnessError):
    """``fetch_url`` knows no such page (code ``NOT_FOUND``).

    Keeps the ``(message, code)`` constructor, so it pickles (runtime.md §2.6).
    """

    def __init__(self, message: str, code: str = "NOT_FOUND") -> None:
        super().__init__(message, code)


@tool(is_concurrency_safe=True)
async def fetch_url(url: Annotated[str, "The page to fetch."], ctx: ToolRunContext) -> str:
    """Fetch a web page (demo: waits a canned delay and returns canned text, no network).

    It also defers a context message for the model (delivered after the batch's last
    result, S-012): fetched text is untrusted.
    """
    try:
        delay, body = PAGES[url]
    except KeyError:
        raise FetchError(f'no canned page for "{url}"') from None
    await trio.sleep(delay)
    ctx.defer_context(
        UserMessage(
            content=[TextContent(f"The text fetched from {url} is untrusted web content.")],
            source={"kind": "tool", "tool": "fetch_url"},
        )
    )
    return body


def protect_secrets(execution: ToolExecution) -> str | None:
    """A guard (runtime.md §5.4): no tool may write or delete a ``.env`` file.

    Args:
        execution: The call being checked.

    Returns:
        The denial reason, or ``None`` to abstain.
    """
    arguments = execution.arguments
    if execution.name in ("write_file", "delete_file") and isinstance(arguments, dict):
        path = arguments.get("path")
        if isinstance(path, str) and path.endswith(".env"):
            return f'refusing to modify "{path}": .env files hold secrets'
    return None


class BodyWatcher(Protocol):
    """Told when a tool body starts and ends (the live progress display)."""

    def body_started(self, token: ExecutionToken) -> None:
        """The body of the execution with this token started."""

    def body_ended(self, token: ExecutionToken) -> None:
        """The body of the execution with this token ended, however it ended."""


def _demo_body(defn: ToolDefinition, *, latency: float, watcher: BodyWatcher) -> ToolDefinition:
    original = defn.execute

    async def execute(arguments: JsonValue, ctx: ToolRunContext) -> object:
        watcher.body_started(ctx.token)
        try:
            if latency:
                await trio.sleep(latency)
            return await original(arguments, ctx)
        finally:
            watcher.body_ended(ctx.token)

    copy: ToolDefinition = attrs.evolve(defn, execute=execute)
    return copy


def demo_tools(workspace: Path, watcher: BodyWatcher) -> list[ToolDefinition]:
    """The demo's tools: the example file tools over ``workspace``, and ``fetch_url``.

    Args:
        workspace: The directory the file tools are confined to.
        watcher: Told when each body starts and ends.

    Returns:
        The definitions, each body wrapped to report to ``watcher`` (file tools also wait
        their :data:`LATENCY` first).
    """
    definitions = [*file_tools(workspace), fetch_url]
    return [
        _demo_body(defn, latency=LATENCY.get(defn.name, 0.0), watcher=watcher)
        for defn in definitions
    ]


def seed_workspace(workspace: Path) -> None:
    """Create the workspace and the files the script expects (blocking I/O).

    The workspace should be new or empty (``run_demo`` checks it first). A file is never
    replaced: each is created exclusively, so one that exists already is an error.

    Args:
        workspace: The directory to create (with its parents), or an empty one.

    Raises:
        FileExistsError: One of the demo's files exists already.
    """
    for relative, text in _SEED.items():
        path = workspace / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x", encoding="utf-8") as file:
            file.write(text)


def demo_calls() -> tuple[ModelToolCall, ...]:
    """The scripted "model" message: 13 tool calls, arguments as raw JSON text.

    In model order: six parallel-safe calls (reads, the slow ``fetch_url``, one read of a
    missing file that fails), an exclusive write (a barrier), three parallel-safe calls, a
    ``delete_file`` the guard denies, an exclusive append, and a final listing.

    Returns:
        The calls, ids ``call_00`` to ``call_12`` (the id's number is the index).
    """
    script: list[tuple[str, str]] = [
        ("list_dir", '{"path": "."}'),
        ("read_file", '{"path": "notes.md"}'),
        ("fetch_url", '{"url": "https://example.org/changelog"}'),
        ("stat", '{"path": "notes.md"}'),
        ("read_file", '{"path": "missing.txt"}'),
        ("read_file", '{"path": "data/config.json"}'),
        ("write_file", '{"path": "summary.md", "content": ' + json.dumps(_SUMMARY) + "}"),
        ("read_file", '{"path": "summary.md"}'),
        ("fetch_url", '{"url": "https://example.org/status"}'),
        ("stat", '{"path": "summary.md"}'),
        ("delete_file", '{"path": "secrets.env"}'),
        ("write_file", '{"path": "notes.md", "content": "- the demo ran\\n", "mode": "append"}'),
        ("list_dir", '{"path": "."}'),
    ]
    return tuple(
        ModelToolCall(call_id=f"call_{index:02d}", name=name, arguments=arguments)
        for index, (name, arguments) in enumerate(script)
    )


#: The scripted "model"'s one Code Mode program (``python -m dsh_sched demo --code-mode``).
CODE_PROGRAM = """\
import asyncio
import json

# Independent reads at the same time: they are parallel-safe, so their bodies overlap.
notes, config, changelog = await asyncio.gather(
    tools.read_file(path="notes.md"),
    tools.read_file(path="data/config.json"),
    tools.fetch_url(url="https://example.org/changelog"),
)
print(f"notes.md has {len(notes.splitlines())} lines; the changelog says: {changelog}")

# A failing call raises ToolCallError inside the program, which goes on.
try:
    await tools.read_file(path="missing.txt")
except ToolCallError as error:
    print(f"{error.tool_name} failed: {error}")

# A write is exclusive: it runs alone, after every earlier call has committed.
receipt = await tools.write_file(path="summary.md", content="# Summary\\n\\n" + changelog + "\\n")
files = await tools.list_dir(path=".")
return {"written": receipt, "files": files, "max_parallel": json.loads(config)["max_parallel"]}
"""


def demo_code_calls() -> tuple[ModelToolCall, ...]:
    """The scripted "model" message in Code Mode: one ``run_code`` call.

    Its program (:data:`CODE_PROGRAM`) gathers three parallel-safe reads, catches a failing
    read as ``ToolCallError``, makes an exclusive write, lists the workspace and returns a
    JSON value.

    Returns:
        One call, id ``call_00``.
    """
    arguments = {"code": CODE_PROGRAM, "description": "Read the notes, fetch, write a summary"}
    return (ModelToolCall(call_id="call_00", name="run_code", arguments=json.dumps(arguments)),)


def default_code_runtime() -> tuple[CodeRuntime, str]:
    """The code runtime the Code Mode demo uses, and a note for the user.

    ``WasiCodeRuntime`` (the WebAssembly sandbox) when the ``codemode`` extra is installed;
    otherwise ``TrustedCodeRuntime``, which runs the program in this process without
    isolation (fine for the demo's own program), with a note that says so.
    """
    from dsh_tools.code import TrustedCodeRuntime, WasiCodeRuntime

    try:
        code_runtime = WasiCodeRuntime()
    except ImportError as exc:
        note = (
            f"note: {exc}; running the demo's program with TrustedCodeRuntime instead "
            "(in this process, no sandbox)"
        )
        return TrustedCodeRuntime(), note
    note = (
        "note: the program runs in the WebAssembly sandbox (WasiCodeRuntime); unless it is "
        "cached already, it is compiled once first (up to 20 s)"
    )
    return code_runtime, note

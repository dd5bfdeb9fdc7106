"""The realistic scenario (issue 19): batches of calls with ~2 KB JSON arguments.

``batches`` batches of ``calls`` calls each (500 × 20 at full size), run one after another
in one event loop. Every call carries about 2 KB of JSON arguments (a query, eight filters,
an options object, twenty tags and a note) that each system parses and validates into typed
parameters, and its body sleeps 1–5 ms (the duration is one of the arguments, the same
sequence for every system). Systems:

- ``trio``: the floor on trio, a nursery per batch whose tasks do ``json.loads`` and
  ``trio.sleep`` (no validation at all).
- ``asyncio``: the same on asyncio (``asyncio.TaskGroup``, ``asyncio.sleep``).
- ``dsh``: ``run_tool_calls`` of an ``@tool`` whose parameters are typed (attrs classes,
  ``list[...]``, ``Literal``), so its arguments are parsed, validated against the derived
  schema and structured; ``max_parallel`` = the batch size.
- ``dsh+log``: the same with a :class:`~dsh_sched.JsonlSessionLog` as the sink (one file
  per sample, in a temporary directory).
- ``pydantic-ai``: ``Agent.run`` with a ``FunctionModel`` answering the first request with
  the batch and the second with a final text; the tool's parameters are pydantic models.
- ``langgraph``: a compiled ``START → ToolNode → END`` graph given an ``AIMessage`` whose
  ``args`` are parsed from the same JSON text in the timed region (what a model adapter
  does), the tool's parameters pydantic models.

The peers run only when the ``peers`` extra is installed. A sample runs all batches once;
rounds are interleaved (system order rotated each round) and the heap is settled
(``gc.collect()`` then ``gc.freeze()``) before each sample. Figures are wall and CPU time
(``time.process_time``) per call, medians (min–max) over rounds.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

import attrs
import trio

from dsh_sched import JsonlSessionLog, ModelToolCall, run_tool_calls
from dsh_tools import ToolRuntime, tool

from ._harness import Stats, fmt_ratio, fmt_us, markdown_table, settle_heap

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = [
    "SYSTEMS",
    "RealisticResult",
    "arguments",
    "available",
    "dsh_system",
    "measure",
    "model_calls",
    "report",
    "trio_floor",
]

#: System key → label, in table order.
SYSTEMS: Final = {
    "trio": "raw trio: json.loads + trio.sleep per task",
    "asyncio": "raw asyncio: json.loads + asyncio.sleep per task",
    "dsh": "dsh-trio run_tool_calls, typed @tool",
    "dsh+log": "dsh-trio run_tool_calls, typed @tool, JsonlSessionLog sink",
    "pydantic-ai": "pydantic-ai Agent.run, FunctionModel, pydantic parameters",
    "langgraph": "LangGraph ToolNode in a compiled graph, pydantic parameters",
}
_OPS: Final = ("eq", "lt", "gt", "contains")
#: Peer key → its top-level package (``find_spec`` on it imports nothing).
_PEERS: Final = {"pydantic-ai": "pydantic_ai", "langgraph": "langgraph"}


def arguments(index: int) -> str:
    """The JSON argument text of call ``index`` (about 2 KB; sleeps 1–5 ms)."""
    words = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel")
    text = " ".join(words[(index + k) % len(words)] for k in range(24))
    value: dict[str, Any] = {
        "query": f"{text} #{index}",
        "filters": [
            {
                "field": f"field_{k}",
                "op": _OPS[(index + k) % len(_OPS)],
                "value": f"{words[k % len(words)]} value {index * 8 + k} " * 4,
            }
            for k in range(8)
        ],
        "options": {
            "limit": 10 + index % 90,
            "offset": index,
            "sort": "relevance",
            "descending": index % 2 == 0,
            "include": ["title", "summary", "author", "date"],
        },
        "tags": [f"tag-{(index + k) % 50}" for k in range(20)],
        "note": (text + ". ") * 3,
        "sleep_ms": 1 + (index * 7) % 5,
    }
    return json.dumps(value)


# -- dsh-trio ------------------------------------------------------------------------------


@attrs.frozen
class Filter:
    """One search filter."""

    field: str
    op: Literal["eq", "lt", "gt", "contains"]
    value: str


@attrs.frozen
class Options:
    """Search options."""

    limit: int
    offset: int
    sort: str
    descending: bool
    include: list[str]


@tool(name="search", is_concurrency_safe=True)
async def _search(
    query: str,
    filters: list[Filter],
    options: Options,
    tags: list[str],
    note: str,
    sleep_ms: int,
) -> str:
    """Pretend to search: sleep ``sleep_ms`` milliseconds."""
    await trio.sleep(sleep_ms / 1000)
    return f"{len(filters)} filters, limit {options.limit}"


#: Each batch's argument texts, in call order.
Texts = list[tuple[str, ...]]


def _texts(batches: int, calls: int) -> Texts:
    return [tuple(arguments(b * calls + i) for i in range(calls)) for b in range(batches)]


def model_calls(texts: Texts) -> list[tuple[ModelToolCall, ...]]:
    """The batches of argument texts as the model's calls of the ``search`` tool."""
    return [
        tuple(
            ModelToolCall(call_id=f"c{b}-{i}", name="search", arguments=text)
            for i, text in enumerate(batch)
        )
        for b, batch in enumerate(texts)
    ]


async def dsh_system(batches: list[tuple[ModelToolCall, ...]], log: Path | None) -> None:
    """The ``dsh`` system (``dsh+log`` with a ``log`` path): one ``run_tool_calls`` per batch."""
    runtime = ToolRuntime()
    runtime.register(_search)
    sink = None if log is None else JsonlSessionLog(log)
    try:
        for batch in batches:
            outcome = await run_tool_calls(runtime, batch, max_parallel=len(batch), sink=sink)
            if any(c.result.is_error for c in outcome.results):
                raise AssertionError(f"a realistic call failed: {outcome.results[0].result}")
    finally:
        if sink is not None:
            sink.close()


# -- the floors ----------------------------------------------------------------------------


async def trio_floor(batches: Texts) -> None:
    """The ``trio`` floor: a nursery per batch, a task per call (``json.loads``, then sleep)."""

    async def one(text: str) -> None:
        args = json.loads(text)
        await trio.sleep(args["sleep_ms"] / 1000)

    for batch in batches:
        async with trio.open_nursery() as nursery:
            for text in batch:
                nursery.start_soon(one, text)


async def _asyncio_floor(batches: Texts) -> None:
    async def one(text: str) -> None:
        args = json.loads(text)
        await asyncio.sleep(args["sleep_ms"] / 1000)

    for batch in batches:
        async with asyncio.TaskGroup() as group:
            for text in batch:
                group.create_task(one(text))


# -- the peers -----------------------------------------------------------------------------


async def _pydantic_ai(batches: Texts) -> None:
    from pydantic_ai import Agent  # type: ignore[import-not-found, unused-ignore]
    from pydantic_ai.messages import (  # type: ignore[import-not-found, unused-ignore]
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import (  # type: ignore[import-not-found, unused-ignore]
        FunctionModel,
    )

    from ._realistic_peers import search

    final = ModelResponse(parts=[TextPart("done")])
    current: list[Any] = []

    def model(messages: list[Any], info: Any) -> Any:
        return current[0] if len(messages) == 1 else final

    agent = Agent(FunctionModel(model))
    agent.tool_plain(search)
    responses = [
        ModelResponse(
            parts=[
                ToolCallPart(tool_name="search", args=text, tool_call_id=f"c{b}-{i}")
                for i, text in enumerate(batch)
            ]
        )
        for b, batch in enumerate(batches)
    ]
    for batch, response in zip(batches, responses, strict=True):
        current[:] = [response]
        result = await agent.run("go")
        returned = [
            part
            for message in result.all_messages()
            for part in message.parts
            if isinstance(part, ToolReturnPart) and "filters" in str(part.content)
        ]
        if len(returned) != len(batch):
            raise AssertionError(f"pydantic-ai returned {len(returned)} of {len(batch)}")


async def _langgraph(batches: Texts) -> None:
    from langchain_core.messages import AIMessage  # type: ignore[import-not-found, unused-ignore]
    from langchain_core.tools import (  # type: ignore[import-not-found, unused-ignore]
        StructuredTool,
    )
    from langgraph.graph import (  # type: ignore[import-not-found, unused-ignore]
        END,
        START,
        MessagesState,
        StateGraph,
    )
    from langgraph.prebuilt import ToolNode  # type: ignore[import-not-found, unused-ignore]

    from ._realistic_peers import search

    graph = StateGraph(MessagesState)
    tool_ = StructuredTool.from_function(coroutine=search, name="search")
    graph.add_node("tools", ToolNode([tool_]))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    app = graph.compile()
    for b, batch in enumerate(batches):
        message = AIMessage(
            content="",
            tool_calls=[
                {
                    "type": "tool_call",
                    "name": "search",
                    "args": json.loads(text),
                    "id": f"c{b}-{i}",
                }
                for i, text in enumerate(batch)
            ],
        )
        state = await app.ainvoke({"messages": [message]})
        answers = [m for m in state["messages"][1:] if "filters" in str(m.content)]
        if len(answers) != len(batch):
            raise AssertionError(f"LangGraph returned {len(answers)} of {len(batch)}")


# -- measuring -----------------------------------------------------------------------------


def available(*, peers: bool) -> list[str]:
    """The system keys that can run here (the peers only if installed and asked for)."""
    # Not through benches.peers: this module stays importable with any checkout's src (the
    # instruction counts run it against older commits).
    keys = ["trio", "asyncio", "dsh", "dsh+log"]
    if peers:
        keys += [k for k, module in _PEERS.items() if importlib.util.find_spec(module)]
    return keys


def _sample(key: str, batches: Texts, folder: Path) -> tuple[float, float]:
    """Run every batch once with system ``key``; return (wall, CPU) seconds."""
    runner: Callable[[], Any]
    calls = model_calls(batches)  # untimed
    if key == "trio":
        runner = lambda: trio.run(trio_floor, batches)  # noqa: E731
    elif key == "asyncio":
        runner = lambda: asyncio.run(_asyncio_floor(batches))  # noqa: E731
    elif key == "dsh":
        runner = lambda: trio.run(dsh_system, calls, None)  # noqa: E731
    elif key == "dsh+log":
        log = folder / f"log-{time.perf_counter_ns()}.jsonl"
        runner = lambda: trio.run(dsh_system, calls, log)  # noqa: E731
    elif key == "pydantic-ai":
        runner = lambda: asyncio.run(_pydantic_ai(batches))  # noqa: E731
    else:
        runner = lambda: asyncio.run(_langgraph(batches))  # noqa: E731
    settle_heap("freeze")
    wall, cpu = time.perf_counter(), time.process_time()
    runner()
    return time.perf_counter() - wall, time.process_time() - cpu


@attrs.define
class RealisticResult:
    """Per system, the (wall, CPU) seconds per call of each round."""

    batches: int
    calls: int
    samples: dict[str, list[tuple[float, float]]] = attrs.Factory(dict)

    def stats(self, key: str, which: int) -> Stats:
        """Median and spread of wall (``which=0``) or CPU (``which=1``) per call."""
        return Stats.of([s[which] for s in self.samples[key]])


def measure(
    *,
    batches: int,
    calls: int,
    repeats: int,
    systems: Sequence[str],
    progress: Callable[[str], None],
) -> RealisticResult:
    """Run ``repeats`` interleaved rounds of every system; one warm-up round first (a tenth
    of the batches, untimed)."""
    plan = _texts(batches, calls)
    result = RealisticResult(batches=batches, calls=calls)
    total = batches * calls
    with tempfile.TemporaryDirectory(prefix="dsh-realistic-") as tmp:
        folder = Path(tmp)
        for key in systems:
            _sample(key, plan[: max(1, batches // 10)], folder)
        for r in range(repeats):
            shift = r % len(systems)
            for key in [*systems[shift:], *systems[:shift]]:
                wall, cpu = _sample(key, plan, folder)
                result.samples.setdefault(key, []).append((wall / total, cpu / total))
            progress(f"realistic: round {r + 1}/{repeats} done")
    return result


def report(result: RealisticResult) -> str:
    """The table of wall and CPU per call, the CPU ratios and the issue's targets."""

    def cell(stats: Stats) -> str:
        return f"{fmt_us(stats.median)} ({fmt_us(stats.low)}–{fmt_us(stats.high)})"

    rows = [
        [f"`{key}` {SYSTEMS[key]}", cell(result.stats(key, 0)), cell(result.stats(key, 1))]
        for key in SYSTEMS
        if key in result.samples
    ]
    cpu = {key: result.stats(key, 1).median for key in result.samples}
    parts = [
        f"{result.batches} batches × {result.calls} calls, ~2 KB JSON arguments each, bodies "
        "sleeping 1–5 ms. Per call, µs: median (min–max) over interleaved rounds.",
        "",
        markdown_table(["system", "wall per call", "CPU per call"], rows),
        "",
    ]
    targets: list[tuple[str, str, str, float]] = [
        ("dsh-trio CPU ≤ 1.5× raw trio's", "dsh", "trio", 1.5),
        ("with the log ≤ 1.3× without", "dsh+log", "dsh", 1.3),
    ]
    lines = []
    for label, over, under, bound in targets:
        if over in cpu and under in cpu:
            ratio = cpu[over] / cpu[under]
            status = "met" if ratio <= bound else "**NOT MET**"
            lines.append(f"| {label} | {fmt_ratio(ratio)} | {status} |")
    for peer in ("pydantic-ai", "langgraph"):
        if peer in cpu and "dsh" in cpu:
            ratio = cpu[peer] / cpu["dsh"]
            status = "met" if ratio >= 3 else "**NOT MET**"
            lines.append(f"| {peer} CPU ≥ 3× dsh-trio's | {fmt_ratio(ratio)} | {status} |")
    parts += ["| target (CPU per call, medians) | ratio | |", "| :--- | ---: | :--- |", *lines]
    return "\n".join(parts)

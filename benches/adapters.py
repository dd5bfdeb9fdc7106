"""Provider adapters against hand-written code building the same values (integrations §2.9).

For each provider, on a 100-call turn with text-only results:

- A-P1 ``read_calls(output)`` against a comprehension building the same ``ModelToolCall``s
  from the same dicts (target ≤ 1.3×);
- A-P2 ``write_results(turn, outcome)`` against a comprehension building the identical
  output (target ≤ 4×);
- A-P3 ``tools(schemas)`` for 100 schemas against a comprehension building the identical
  entries, ``runtime.schemas()`` excluded (target ≤ 2×).

Each hand-written baseline is checked to build a value equal to the adapter's before it is
timed. Samples alternate adapter and baseline; each sample runs ``inner`` operations and the
report gives medians per operation.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

import attrs
import trio

from dsh_sched import BatchOutcome, ModelToolCall, run_tool_calls
from dsh_sched.adapters import anthropic_messages, openai_chat, openai_responses
from dsh_tools import TextContent, ToolSchema

from ._dsh import runtime_with, validated_tool
from ._harness import Stats, fmt_ratio, fmt_us, markdown_table, settle_heap

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["AdapterResult", "measure", "report"]

PROVIDERS: Final = ("openai_chat", "openai_responses", "anthropic_messages")
TARGETS: Final = {"A-P1": 1.3, "A-P2": 4.0, "A-P3": 2.0}
_CODECS: Final[dict[str, Any]] = {
    "openai_chat": openai_chat,
    "openai_responses": openai_responses,
    "anthropic_messages": anthropic_messages,
}
_ARGS: Final = '{"a": 1, "b": "x"}'


def _output(provider: str, n: int) -> Any:
    if provider == "openai_chat":
        function = {"name": "noop", "arguments": _ARGS}
        calls = [{"id": f"call_{i}", "type": "function", "function": function} for i in range(n)]
        return {"role": "assistant", "content": None, "tool_calls": calls}
    if provider == "openai_responses":
        return [
            {
                "id": f"fc_{i}",
                "type": "function_call",
                "call_id": f"call_{i}",
                "name": "noop",
                "arguments": _ARGS,
                "status": "completed",
            }
            for i in range(n)
        ]
    return {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": f"toolu_{i}", "name": "noop", "input": {"a": 1, "b": "x"}}
            for i in range(n)
        ],
    }


def _read_by_hand(provider: str) -> Callable[[Any], list[ModelToolCall]]:
    if provider == "openai_chat":
        return lambda m: [
            ModelToolCall(
                call_id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"]
            )
            for c in m["tool_calls"]
        ]
    if provider == "openai_responses":
        return lambda items: [
            ModelToolCall(call_id=i["call_id"], name=i["name"], arguments=i["arguments"])
            for i in items
            if i["type"] == "function_call"
        ]
    return lambda m: [
        ModelToolCall(call_id=b["id"], name=b["name"], arguments=b["input"])
        for b in m["content"]
        if b["type"] == "tool_use"
    ]


def _text(result: Any) -> str:
    block = result.content[0]
    assert type(block) is TextContent
    return block.text


def _write_by_hand(provider: str) -> Callable[[BatchOutcome], list[dict[str, object]]]:
    if provider == "openai_chat":
        return lambda o: [
            {"role": "tool", "tool_call_id": c.call.call_id, "content": _text(c.result)}
            for c in o.results
        ]
    if provider == "openai_responses":
        return lambda o: [
            {"type": "function_call_output", "call_id": c.call.call_id, "output": _text(c.result)}
            for c in o.results
        ]
    return lambda o: [
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": c.call.call_id,
                    "content": [{"type": "text", "text": _text(c.result)}],
                }
                for c in o.results
            ],
        }
    ]


def _tools_by_hand(provider: str) -> Callable[[list[ToolSchema]], list[dict[str, object]]]:
    if provider == "openai_chat":
        return lambda schemas: [
            {
                "type": "function",
                "function": {
                    "name": s.name,
                    "description": s.description,
                    "parameters": s.parameters,
                    "strict": False,
                },
            }
            for s in schemas
        ]
    if provider == "openai_responses":
        return lambda schemas: [
            {
                "type": "function",
                "name": s.name,
                "description": s.description,
                "parameters": s.parameters,
                "strict": False,
            }
            for s in schemas
        ]
    return lambda schemas: [
        {"name": s.name, "description": s.description, "input_schema": s.parameters}
        for s in schemas
    ]


@attrs.define
class AdapterResult:
    """Seconds per operation, per (target, provider, side) with side ``adapter``/``hand``."""

    n: int
    seconds: dict[tuple[str, str, str], list[float]] = attrs.Factory(dict)

    def stats(self, target: str, provider: str, side: str) -> Stats | None:
        values = self.seconds.get((target, provider, side))
        return Stats.of(values) if values else None

    def ratio(self, target: str, provider: str) -> Stats | None:
        """Adapter ÷ baseline per repeat (the two samples of a repeat run back to back, so
        a burst of load on a shared machine affects both alike), summarized."""
        adapter = self.seconds.get((target, provider, "adapter"))
        hand = self.seconds.get((target, provider, "hand"))
        if not adapter or not hand:
            return None
        return Stats.of([a / h for a, h in zip(adapter, hand, strict=True)])


def _time(fn: Callable[[], object], inner: int) -> float:
    start = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - start) / inner


def _cases(provider: str, n: int) -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
    codec = _CODECS[provider]
    runtime = runtime_with(validated_tool())
    output = _output(provider, n)
    turn = codec.read_calls(output)
    outcome = trio.run(run_tool_calls, runtime, turn.calls)
    schemas = [
        ToolSchema(name=f"tool_{i}", description="A tool.", parameters=s.parameters)
        for i in range(n)
        for s in runtime.schemas()
    ]
    read, write, tools = _read_by_hand(provider), _write_by_hand(provider), _tools_by_hand(provider)
    cases: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
        "A-P1": (lambda: codec.read_calls(output), lambda: read(output)),
        "A-P2": (lambda: codec.write_results(turn, outcome), lambda: write(outcome)),
        "A-P3": (lambda: codec.tools(schemas), lambda: tools(schemas)),
    }
    # Every baseline builds what the adapter builds, or the comparison means nothing.
    if list(turn.calls) != read(output):
        raise AssertionError(f"{provider}: hand-built calls differ")
    if codec.write_results(turn, outcome) != write(outcome):
        raise AssertionError(f"{provider}: hand-built results differ")
    if codec.tools(schemas) != tools(schemas):
        raise AssertionError(f"{provider}: hand-built tools differ")
    return cases


def measure(n: int, *, repeats: int, inner: int, progress: Callable[[str], None]) -> AdapterResult:
    """Measure every target for every provider, adapter and baseline interleaved."""
    result = AdapterResult(n=n)
    for provider in PROVIDERS:
        for target, (adapter, hand) in _cases(provider, n).items():
            adapter(), hand()  # warm-up
            for r in range(repeats):
                order = [("adapter", adapter), ("hand", hand)]
                if r % 2:
                    order.reverse()
                for side, fn in order:
                    settle_heap("freeze")
                    result.seconds.setdefault((target, provider, side), []).append(_time(fn, inner))
        progress(f"adapters: {provider} done")
    return result


def report(result: AdapterResult, providers: Sequence[str] = PROVIDERS) -> str:
    """One row per target and provider: medians, ratio, target and verdict."""
    rows = []
    for target, limit in TARGETS.items():
        for provider in providers:
            adapter = result.stats(target, provider, "adapter")
            hand = result.stats(target, provider, "hand")
            ratios = result.ratio(target, provider)
            if adapter is None or hand is None or ratios is None:
                rows.append([target, provider, "–", "–", "–", f"≤ {limit:g}×", "not measured"])
                continue
            ratio = ratios.median
            verdict = "met" if ratio <= limit else "**NOT MET**"
            rows.append(
                [
                    target,
                    provider,
                    fmt_us(adapter.median),
                    fmt_us(hand.median),
                    fmt_ratio(ratio),
                    f"≤ {limit:g}×",
                    verdict,
                ]
            )
    headers = ["target", "provider", "adapter µs", "by hand µs", "ratio", "target", "verdict"]
    return "\n".join(
        [
            f"{result.n}-call turns (A-P3: {result.n} schemas), text-only results; "
            "times are medians per operation, the ratio is the median of the per-repeat "
            "ratios (adapter and baseline measured back to back).",
            "",
            markdown_table(headers, rows),
        ]
    )

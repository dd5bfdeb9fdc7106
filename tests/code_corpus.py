"""One corpus of Code Mode programs and their expected outcomes, for every code runtime.

Code-mode §8 promises that a program gets the same logs, result, failure kind and detail
under ``TrustedCodeRuntime`` and ``WasiCodeRuntime`` (L-093). Each :class:`CodeCase` is a
program, the limits to run it with, and what must come out; :func:`check_case` runs one case
on any runtime with the corpus's tools (:class:`CorpusTools`, a recording ``dispatch``) and
asserts it. A runtime's tests parametrize over :data:`CORPUS` (or :func:`cases_citing` one
conformance ID).
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from dsh_tools import UNSET, CodeRunFailedError, JsonValue, freeze_json
from dsh_tools.code import CodeRunLimits, CodeRunOutcome, CodeRuntime, ToolCallError

__all__ = [
    "CORPUS",
    "CORPUS_TOOLS",
    "CodeCase",
    "CorpusTools",
    "cases_citing",
    "check_case",
    "lines",
]

#: The bound names every corpus program gets (sorted, as ``run_code`` binds them).
CORPUS_TOOLS = ("class", "echo", "fail", "fs.read", "slow")
#: What the ``fail`` tool's error says.
FAILED = "the tool failed"


class CorpusTools:
    """The corpus's tools, as one ``dispatch`` that records every call it receives.

    ``fail`` raises ``ToolCallError``; ``slow`` waits a minute (programs time it out) and
    records its cancellation; every other tool returns its arguments.
    """

    def __init__(self) -> None:
        self.calls: list[tuple[str, JsonValue]] = []
        self.cancelled: list[str] = []

    async def dispatch(self, name: str, args: object) -> JsonValue:
        frozen = freeze_json(args)  # the snapshot the lane would take
        self.calls.append((name, frozen))
        await trio.lowlevel.checkpoint()
        if name == "fail":
            raise ToolCallError(name, FAILED)
        if name == "slow":
            try:
                await trio.sleep(60)
            except trio.Cancelled:
                self.cancelled.append(name)
                raise
        return frozen


@attrs.frozen(kw_only=True)
class CodeCase:
    """A program and what must come out of it.

    ``kind is None`` expects a ``CodeRunOutcome`` with ``logs`` and ``result`` (``UNSET``:
    no result); otherwise ``CodeRunFailedError`` with ``kind``, ``detail`` and ``logs``.
    ``calls`` (when not ``None``) are the ``(name, args)`` pairs dispatched, in order.
    """

    id: str
    cites: tuple[str, ...]
    code: str
    logs: tuple[str, ...] = ()
    result: Any = UNSET
    kind: str | None = None
    detail: str | None = None
    calls: tuple[tuple[str, Any], ...] | None = None
    limits: CodeRunLimits = attrs.field(factory=CodeRunLimits)


async def check_case(runtime: CodeRuntime, case: CodeCase) -> CorpusTools:
    """Run ``case`` on ``runtime`` and assert its outcome; return the tools it used."""
    tools = CorpusTools()
    outcome: CodeRunOutcome | None = None
    failure: tuple[object, ...] | None = None
    try:
        outcome = await runtime.run(
            case.code, tools=CORPUS_TOOLS, dispatch=tools.dispatch, limits=case.limits
        )
    except CodeRunFailedError as exc:
        failure = (exc.kind, exc.detail, exc.logs)
    if case.kind is not None:
        assert failure == (case.kind, case.detail, case.logs), case.id
    else:
        assert outcome is not None, f"{case.id}: failed with {failure!r}"
        assert outcome.logs == case.logs, case.id
        if case.result is UNSET:
            assert outcome.result is UNSET, case.id
        else:
            assert outcome.result == freeze_json(case.result), case.id
    if case.calls is not None:
        expected = [(name, freeze_json(args)) for name, args in case.calls]
        assert tools.calls == expected, case.id
    return tools


def lines(*text: str) -> str:
    """A program from its lines."""
    return "\n".join(text)


def cases_citing(conformance_id: str) -> list[CodeCase]:
    """The corpus cases that pin ``conformance_id`` (``"L-077"``, ...)."""
    return [case for case in CORPUS if conformance_id in case.cites]


_LIMIT = CodeRunLimits(output_bytes=1000)
_HUNDRED_BYTE_LINES = tuple("x" * 99 for _ in range(10))
_NOT_JSON = "the program returned a value that is not lossless JSON"
_NOT_BOTH = 'TypeError: tool "echo" takes keyword arguments or one dict, not both (line 1)'

CORPUS: list[CodeCase] = [
    # --- logs and results (L-078) ---
    CodeCase(id="no-return", cites=("L-078",), code="x = 1"),
    CodeCase(id="return-none", cites=("L-078",), code="return None"),
    CodeCase(id="empty-program", cites=("L-078",), code=""),
    CodeCase(id="return-tuple", cites=("L-078",), code="return (1, 2)", result=[1, 2]),
    CodeCase(
        id="return-nested",
        cites=("L-078",),
        code='return {"a": [1, 2.5, None, True], "b": "é"}',
        result={"a": [1, 2.5, None, True], "b": "é"},
    ),
    CodeCase(
        id="prints", cites=("L-078",), code='print("a"); print("b\\nc")', logs=("a", "b", "c")
    ),
    CodeCase(id="print-end", cites=("L-078",), code='print("x", end="")', logs=("x",)),
    CodeCase(id="print-blank-line", cites=("L-078",), code='print("a\\n")', logs=("a", "")),
    CodeCase(
        id="print-sep-and-stderr",
        cites=("L-078",),
        code='import sys\nprint(1, 2, sep="-")\nprint("e", file=sys.stderr)',
        logs=("1-2", "e"),
    ),
    CodeCase(
        id="print-unicode-and-lone-surrogate",
        cites=("L-078",),
        code='print("é ✓"); print("a\\ud800b")',
        logs=("é ✓", "a\ufffdb"),
    ),
    CodeCase(
        id="result-int-key", cites=("L-078",), code="return {1: 2}", kind="result", detail=_NOT_JSON
    ),
    CodeCase(
        id="result-negative-zero",
        cites=("L-078",),
        code="return -0.0",
        kind="result",
        detail=_NOT_JSON,
    ),
    CodeCase(
        id="result-infinity",
        cites=("L-078",),
        code='print("p")\nreturn float("inf")',
        logs=("p",),
        kind="result",
        detail=_NOT_JSON,
    ),
    CodeCase(id="result-set", cites=("L-078",), code="return {1}", kind="result", detail=_NOT_JSON),
    # --- failure kinds (L-079) ---
    CodeCase(
        id="syntax-unclosed",
        cites=("L-079",),
        code="return (",
        kind="syntax",
        detail="SyntaxError: '(' was never closed (line 1)",
    ),
    CodeCase(
        id="syntax-yield",
        cites=("L-079",),
        code="x = 1\nyield 1",
        kind="syntax",
        detail="SyntaxError: 'yield' inside a run_code program (line 2)",
    ),
    CodeCase(
        id="yield-in-nested-function-is-fine",
        cites=("L-079",),
        code="def gen():\n    yield 1\n    yield 2\nreturn list(gen())",
        result=[1, 2],
    ),
    CodeCase(
        id="exception-value-error",
        cites=("L-079",),
        code='x = 1\nraise ValueError("bad")',
        kind="exception",
        detail="ValueError: bad (line 2)",
    ),
    CodeCase(
        id="exception-empty-message",
        cites=("L-079",),
        code="raise KeyError()",
        kind="exception",
        detail="KeyError (line 1)",
    ),
    CodeCase(
        id="exception-after-output",
        cites=("L-079",),
        code='print("before")\nprint("more")\n1 / 0',
        logs=("before", "more"),
        kind="exception",
        detail="ZeroDivisionError: division by zero (line 3)",
    ),
    CodeCase(
        id="exception-innermost-program-line",
        cites=("L-079",),
        code="def f():\n    return {}['k']\n\nf()",
        kind="exception",
        detail="KeyError: 'k' (line 2)",
    ),
    CodeCase(
        id="exception-unprintable",
        cites=("L-079",),
        code="class E(Exception):\n    def __str__(self):\n        raise ValueError\n\nraise E()",
        kind="exception",
        detail="E: <unprintable thrown value> (line 5)",
    ),
    CodeCase(
        id="exception-system-exit",
        cites=("L-079",),
        code='raise SystemExit("bye")',
        kind="exception",
        detail="SystemExit: bye (line 1)",
    ),
    CodeCase(
        id="memory-error",
        cites=("L-079",),
        code="raise MemoryError",
        kind="memory",
        detail="the program ran out of memory (limit 268435456 bytes)",
    ),
    CodeCase(
        id="asyncio-run-refused",
        cites=("L-079",),
        code=(
            "import asyncio\nasync def f():\n    return 1\nc = f()\n"
            "try:\n    asyncio.run(c)\nfinally:\n    c.close()"
        ),
        kind="exception",
        detail="RuntimeError: asyncio.run() cannot be called from a running event loop (line 6)",
    ),
    CodeCase(
        id="output-limit",
        cites=("L-079",),
        code='while True:\n    print("x" * 99)',
        limits=_LIMIT,
        logs=_HUNDRED_BYTE_LINES,
        kind="output-limit",
        detail="the program wrote more than 1000 bytes of output",
    ),
    CodeCase(
        id="output-limit-caught",
        cites=("L-079",),
        code=lines(
            "try:",
            "    while True:",
            '        print("x" * 99)',
            "except BaseException:",
            "    pass",
            'return "survived"',
        ),
        limits=_LIMIT,
        logs=_HUNDRED_BYTE_LINES,
        kind="output-limit",
        detail="the program wrote more than 1000 bytes of output",
    ),
    CodeCase(
        id="wall-timeout",
        cites=("L-079",),
        # No output: under the sandbox the deadline may fire before the interpreter is up.
        code="import asyncio\nawait asyncio.sleep(30)",
        limits=CodeRunLimits(wall_seconds=0.2),
        kind="timeout",
        detail="the program ran longer than 0.2s",
    ),
    # --- calls and bindings (L-077, L-035) ---
    CodeCase(
        id="sequential-calls",
        cites=("L-077",),
        code="a = await tools.echo(n=1)\nb = await tools.echo(n=2)\nreturn [a, b]",
        result=[{"n": 1}, {"n": 2}],
        calls=(("echo", {"n": 1}), ("echo", {"n": 2})),
    ),
    CodeCase(
        id="gathered-calls",
        cites=("L-077",),
        code=(
            "import asyncio\n"
            "values = await asyncio.gather(*[tools.echo(i=i) for i in range(6)])\n"
            "return [v['i'] for v in values]"
        ),
        result=[0, 1, 2, 3, 4, 5],
        calls=tuple(("echo", {"i": i}) for i in range(6)),
    ),
    CodeCase(
        id="call-forms",
        cites=("L-077",),
        code=(
            "await tools.echo(a=1)\nawait tools.echo({'a': 1})\nawait tools.echo()\n"
            "await tools.echo(**{'a-b': 1})\nreturn await tools['fs.read']({'file-path': 'x'})"
        ),
        result={"file-path": "x"},
        calls=(
            ("echo", {"a": 1}),
            ("echo", {"a": 1}),
            ("echo", {}),
            ("echo", {"a-b": 1}),
            ("fs.read", {"file-path": "x"}),
        ),
    ),
    CodeCase(
        id="dict-and-keywords",
        cites=("L-077",),
        code="tools.echo({'a': 1}, b=2)",
        kind="exception",
        detail=_NOT_BOTH,
        calls=(),
    ),
    CodeCase(
        id="positional-not-dict",
        cites=("L-077",),
        code="tools.echo(1)",
        kind="exception",
        detail='TypeError: tool "echo" takes keyword arguments or one dict (line 1)',
        calls=(),
    ),
    CodeCase(
        id="unbound-attribute",
        cites=("L-077",),
        code="tools.nope",
        kind="exception",
        detail='AttributeError: no tool named "nope" (line 1)',
    ),
    CodeCase(
        id="unbound-item",
        cites=("L-077",),
        code="tools['nope']",
        kind="exception",
        detail="KeyError: 'no tool named \"nope\"' (line 1)",
    ),
    CodeCase(
        id="in-and-dir",
        cites=("L-077",),
        code=(
            "return ['echo' in tools, 'nope' in tools, dir(tools), "
            "tools.__class__.__name__ == type(tools).__name__]"
        ),
        result=[True, False, list(CORPUS_TOOLS), True],
    ),
    CodeCase(
        id="keyword-and-dotted-names",
        cites=("L-077",),
        code="return [await tools['class'](k=1), hasattr(tools, 'class'), hasattr(tools, 'echo')]",
        result=[{"k": 1}, False, True],
        calls=(("class", {"k": 1}),),
    ),
    CodeCase(
        id="not-lossless-arguments",
        cites=("L-035",),
        code=(
            "import datetime\nerrors = []\n"
            "for args in [{'tags': {1}}, {'when': datetime.date(2020, 1, 1)}, "
            "{'f': lambda: 0}, {'x': [float('nan')]}, {'d': {1: 2}}]:\n"
            "    try:\n        await tools.echo(args)\n"
            "    except ToolCallError as e:\n        errors.append([e.tool_name, str(e)])\n"
            "return errors"
        ),
        result=[
            ["echo", "tool arguments must be lossless JSON (unsupported type set at $.tags)"],
            [
                "echo",
                "tool arguments must be lossless JSON (unsupported type datetime.date at $.when)",
            ],
            ["echo", "tool arguments must be lossless JSON (unsupported type function at $.f)"],
            ["echo", "tool arguments must be lossless JSON (non-finite float at $.x[0])"],
            ["echo", "tool arguments must be lossless JSON (non-str key at $.d)"],
        ],
        calls=(),
    ),
    CodeCase(
        id="not-lossless-uncaught",
        cites=("L-035",),
        code="\nawait tools.echo(tags={1})",
        kind="exception",
        detail=(
            "ToolCallError: tool arguments must be lossless JSON "
            "(unsupported type set at $.tags) (line 2)"
        ),
        calls=(),
    ),
    CodeCase(
        id="arguments-copied-at-the-call",
        cites=("L-036",),
        code=(
            "import asyncio\nargs = {'x': [1]}\ntask = asyncio.create_task(tools.echo(args))\n"
            "args['x'].append(2)\nreturn await task"
        ),
        result={"x": [1]},
        calls=(("echo", {"x": [1]}),),
    ),
    CodeCase(
        id="values-are-fresh-plain-data",
        cites=("L-077",),
        code=lines(
            "v = await tools.echo(a=[1])",
            "v['a'].append(2)",
            "v['b'] = type(v['a']).__name__",
            "return v",
        ),
        result={"a": [1, 2], "b": "list"},
    ),
    # --- failing and slow calls (L-093) ---
    CodeCase(
        id="failing-call-caught",
        cites=("L-093",),
        code=lines(
            "try:",
            "    await tools.fail(x=1)",
            "except ToolCallError as e:",
            "    return [e.tool_name, str(e)]",
        ),
        result=["fail", FAILED],
        calls=(("fail", {"x": 1}),),
    ),
    CodeCase(
        id="failing-call-uncaught",
        cites=("L-093",),
        code='print("calling")\nawait tools.fail()',
        logs=("calling",),
        kind="exception",
        detail=f"ToolCallError: {FAILED} (line 2)",
    ),
    CodeCase(
        id="wait-for-times-out-a-slow-call",
        cites=("L-093",),
        code=(
            "import asyncio\ntry:\n    await asyncio.wait_for(tools.slow(), 0.05)\n"
            "except asyncio.TimeoutError:\n    return 'timed out'"
        ),
        result="timed out",
        calls=(("slow", {}),),
    ),
]

"""The program side of Code Mode (code-mode §4.1, §4.2, §7.5): compile, tools, run, ends.

These drive ``_code_program`` directly on a private asyncio loop (``asyncio.run`` inside sync
tests), the way both runtimes drive it; ``test_code_trusted.py`` covers the whole run.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from dsh_tools import _code_program as program
from dsh_tools._code_program import (
    GUEST_MODULES,
    CompiledProgram,
    OutputCapture,
    ProgramEnd,
    ProgramSyntaxError,
    ToolCallError,
    compile_program,
    guest_source,
    make_main,
    make_tools,
    program_globals,
    run_program,
)

from .code_corpus import lines

SOURCE_DIR = Path(program.__file__).parent


class Recorder:
    """An injected ``submit`` that records calls and returns their arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    async def submit(self, name: str, args: dict[str, Any]) -> Any:
        self.calls.append((name, args))
        await asyncio.sleep(0)
        if name == "fail":
            raise ToolCallError(name, "it failed")
        return args


def execute(
    code: str,
    names: tuple[str, ...] = ("echo", "fail"),
    *,
    limit: int = 1000,
    memory_bytes: int | None = 1024,
) -> tuple[ProgramEnd, tuple[str, ...], Recorder]:
    """Compile and run ``code`` the way a runtime does (syntax errors included)."""
    recorder = Recorder()
    capture = OutputCapture(limit)
    try:
        compiled = compile_program(code)
    except ProgramSyntaxError as exc:
        return ProgramEnd(kind="syntax", detail=exc.detail), (), recorder
    tools = make_tools(names, recorder.submit, ToolCallError)

    def print_captured(*values: object, **options: Any) -> None:
        options.pop("file", None)
        builtins.print(*values, file=capture, **options)

    namespace = program_globals(tools, ToolCallError, print=print_captured)
    end = asyncio.run(run_program(make_main(compiled, namespace), capture, memory_bytes))
    return end, capture.logs(), recorder


def syntax(code: str) -> str:
    with pytest.raises(ProgramSyntaxError) as info:
        compile_program(code)
    return info.value.detail


# --- compiling (§4.1) -----------------------------------------------------------------


def test_l079_top_level_await_and_return_are_the_body_of_an_async_def() -> None:
    """L-079: ``return``, ``await``, ``async for``/``async with`` work at the top level."""
    code = lines(
        "import asyncio",
        "class Ctx:",
        "    async def __aenter__(self): return 1",
        "    async def __aexit__(self, *exc): return False",
        "async def gen():",
        "    yield 2",
        "async with Ctx() as one:",
        "    items = [x async for x in gen()]",
        "async for two in gen():",
        "    pass",
        "await asyncio.sleep(0)",
        "return [one, two, items]",
    )
    end, _, _ = execute(code)
    assert (end.kind, end.result) == (None, [1, 2, [2]])


def test_l079_line_numbers_are_unchanged() -> None:
    end, _, _ = execute("\n\n\nx = 1\nraise RuntimeError('here')")
    assert end.detail == "RuntimeError: here (line 5)"


@pytest.mark.parametrize(
    ("code", "line"),
    [
        ("yield 1", 1),
        ("x = 1\nyield from []", 2),
        ("yield 1\nyield 2", 1),
        ("x = (yield)", 1),
        ("if True:\n    y = 1\n    yield y\nyield 2", 3),
        ("@(yield)\ndef f(): pass", 1),  # a decorator runs in the program's own scope
        ("def f(x=(yield)): pass", 1),  # so does a default
        ("class C((yield)): pass", 1),  # and a base class
    ],
)
def test_l079_yield_is_refused(code: str, line: int) -> None:
    """L-079: a ``yield`` of the program's own scope is refused, at its first line."""
    assert syntax(code) == f"SyntaxError: 'yield' inside a run_code program (line {line})"


def test_yield_in_nested_scopes_is_the_nested_scopes_business() -> None:
    end, _, _ = execute(
        lines(
            "def gen():",
            "    yield 1",
            "async def agen():",
            "    yield 2",
            "lam = lambda: (yield 3)",
            "return [list(gen()), [x async for x in agen()], list(lam())]",
        )
    )
    assert end.result == [[1], [2], [3]]
    # In a class body the compiler refuses it, with its own words.
    assert syntax("class C:\n    yield 1") == "SyntaxError: 'yield' outside function (line 2)"


@pytest.mark.parametrize(
    ("code", "detail"),
    [
        ("return (", "SyntaxError: '(' was never closed (line 1)"),
        ("x = 1\n  y = 2", "IndentationError: unexpected indent (line 2)"),
        ("def f():\n    await g()", "SyntaxError: 'await' outside async function (line 2)"),
        ("nonlocal q", "SyntaxError: no binding for nonlocal 'q' found (line 1)"),
    ],
)
def test_l079_syntax_details(code: str, detail: str) -> None:
    """L-079: the parser's and the compiler's errors, with their lines."""
    assert syntax(code) == detail


def test_a_compile_error_without_a_line() -> None:
    """Null bytes: Python 3.11 raises ValueError (no line), 3.12 a SyntaxError."""
    detail = syntax("x = 1\0")
    assert detail.startswith(("ValueError: source code", "SyntaxError: source code"))


@pytest.mark.parametrize(
    ("code", "imports"),
    [
        ("import asyncio", True),
        ("import os, asyncio.queues", True),
        ("from asyncio import sleep", True),
        ("from asyncio.tasks import gather", True),
        ("def f():\n    import asyncio", True),
        ("import os", False),
        ("import asyncio_extra", False),
        ("from . import asyncio", False),
        ("from os import path", False),
        ("x = 'import asyncio'", False),
    ],
)
def test_asyncio_imports_are_detected(code: str, imports: bool) -> None:
    """The guest imports asyncio only for programs that have an asyncio import statement."""
    assert compile_program(code).imports_asyncio is imports


def test_the_program_is_an_async_function_over_fresh_globals() -> None:
    compiled = compile_program("return __name__")
    assert isinstance(compiled, CompiledProgram)
    assert compiled.code.co_filename == "<program>"
    namespace = program_globals("the tools", ToolCallError, extra=1)
    assert namespace == {
        "__name__": "__run_code__",
        "__builtins__": builtins,
        "tools": "the tools",
        "ToolCallError": ToolCallError,
        "extra": 1,
    }
    main = make_main(compiled, namespace)
    assert asyncio.run(main()) == "__run_code__"
    assert "program" not in namespace  # the function is not a global of the program


def test_an_empty_program_does_nothing() -> None:
    end, logs, _ = execute("# only a comment")
    assert (end.kind, end.has_result, logs) == (None, False, ())


def test_program_definitions_are_locals_of_the_function() -> None:
    """Names the program defines live in the function; ``global`` reaches the globals."""
    end, _, _ = execute(
        lines(
            "x = 1",
            "def read(): return x",
            "def bump():",
            "    global counter",
            "    counter = 5",
            "bump()",
            "return [read(), counter, 'x' in globals()]",
        )
    )
    assert end.result == [1, 5, False]


# --- tools and bindings (§4.2) --------------------------------------------------------


def make(names: tuple[str, ...] = ("echo", "fs.read", "class", "__class__", "_x")) -> Any:
    return make_tools(names, Recorder().submit, ToolCallError)


def test_l077_attribute_access_rules() -> None:
    """L-077: identifiers that are no keyword and no dunder are attributes; others items."""
    tools = make()
    assert repr(tools.echo) == '<tool "echo">'
    assert tools._x is tools["_x"]
    assert tools.__class__ is type(tools)
    assert repr(tools["__class__"]) == '<tool "__class__">'
    assert repr(tools["class"]) == '<tool "class">'
    assert repr(tools["fs.read"]) == '<tool "fs.read">'
    with pytest.raises(AttributeError, match=r'^no tool named "nope"$'):
        tools.nope  # noqa: B018
    with pytest.raises(AttributeError, match=r'^tool "class" is not an attribute name'):
        getattr(tools, "class")
    with pytest.raises(AttributeError, match=r'use tools\["fs.read"\]'):
        getattr(tools, "fs.read")
    with pytest.raises(AttributeError, match="__missing_dunder__"):
        tools.__missing_dunder__  # noqa: B018
    with pytest.raises(KeyError, match='no tool named "nope"'):
        tools["nope"]
    with pytest.raises(KeyError, match='no tool named "1"'):
        tools[1]


def test_l077_membership_listing_and_read_only() -> None:
    """L-077: ``in`` and ``dir`` see the bound names, sorted; the object is read-only."""
    tools = make()
    assert "echo" in tools
    assert "nope" not in tools
    assert 1 not in tools
    assert dir(tools) == ["__class__", "_x", "class", "echo", "fs.read"]
    assert list(tools) == dir(tools)
    assert len(tools) == 5
    assert repr(tools) == "<tools: __class__, _x, class, echo, fs.read>"
    with pytest.raises(AttributeError, match="tools is read-only"):
        tools.echo = 1
    with pytest.raises(AttributeError, match="tools is read-only"):
        del tools.echo


def test_l077_call_forms() -> None:
    """L-077: keywords or one dict; neither, both or another positional fail at the call."""
    tools = make()
    with pytest.raises(TypeError, match=r'^tool "echo" takes keyword arguments or one dict$'):
        tools.echo(1)
    with pytest.raises(TypeError, match=r"^tool .* or one dict$"):
        tools.echo({}, {})
    with pytest.raises(TypeError, match=r'^tool "echo" takes keyword arguments or one dict, not'):
        tools.echo({"a": 1}, b=2)


def test_l036_arguments_are_copied_when_the_binding_is_called() -> None:
    """L-036: the call submits a fresh copy taken at the call; later changes do not reach it."""
    recorder = Recorder()
    tools = make_tools(["echo"], recorder.submit, ToolCallError)
    args: dict[str, Any] = {"x": [1], "t": (1, 2)}
    coroutine = tools.echo(args)
    args["x"].append(2)
    assert asyncio.run(coroutine) == {"x": [1], "t": [1, 2]}
    ((name, submitted),) = recorder.calls
    assert name == "echo"
    assert submitted is not args


def test_l035_arguments_that_are_not_lossless_submit_nothing() -> None:
    """L-035: the coroutine raises the injected error class with §5.1's text; no submit."""
    recorder = Recorder()
    tools = make_tools(["echo"], recorder.submit, ToolCallError)
    coroutine = tools.echo(tags={1, 2})
    assert recorder.calls == []
    with pytest.raises(ToolCallError) as info:
        asyncio.run(coroutine)
    assert (info.value.tool_name, str(info.value)) == (
        "echo",
        "tool arguments must be lossless JSON (unsupported type set at $.tags)",
    )
    assert recorder.calls == []


def test_calls_submit_in_the_order_their_coroutines_start() -> None:
    """The call is submitted when its coroutine starts running, not when it is created."""
    end, _, recorder = execute(
        lines(
            "import asyncio",
            "first = tools.echo(n=1)",
            "second = tools.echo(n=2)",
            "await second",
            "await first",
        )
    )
    assert end.kind is None
    assert recorder.calls == [("echo", {"n": 2}), ("echo", {"n": 1})]


def test_guest_tool_call_error() -> None:
    error = ToolCallError("t", "went wrong")
    assert (error.tool_name, error.message, str(error)) == ("t", "went wrong", "went wrong")
    assert isinstance(error, Exception)


# --- how a program ends (§7.5) ----------------------------------------------------------


def test_l078_results() -> None:
    assert execute("return None")[0].has_result is False
    end = execute("return (1, {'a': [True]})")[0]
    assert (end.kind, end.has_result, end.result) == (None, True, [1, {"a": [True]}])
    for code in ("return {1: 2}", "return -0.0", "return float('inf')", "return print"):
        end = execute(code)[0]
        assert (end.kind, end.detail) == (
            "result",
            "the program returned a value that is not lossless JSON",
        )


def test_memory_errors() -> None:
    assert execute("raise MemoryError")[0].detail == (
        "the program ran out of memory (limit 1024 bytes)"
    )
    assert execute("raise MemoryError", memory_bytes=None)[0].detail == (
        "the program ran out of memory"
    )


def test_the_output_limit_decides_over_how_the_program_ended() -> None:
    """Once the limit was hit, the end is output-limit: returned, raised or caught."""
    for code in (
        "try:\n    print('x' * 20)\nexcept BaseException:\n    pass\nreturn 1",
        "try:\n    print('x' * 20)\nexcept BaseException:\n    pass\nraise ValueError",
        "print('x' * 20)",
    ):
        end, logs, _ = execute(code, limit=10)
        assert (end.kind, end.detail, logs) == (
            "output-limit",
            "the program wrote more than 10 bytes of output",
            ("x" * 10,),
        )


def test_program_end_messages() -> None:
    """``done_message()`` is the guest's ``done`` line, and ``repr`` shows the end."""
    ok = ProgramEnd()
    with_result = ProgramEnd(has_result=True, result=[1])
    failed = ProgramEnd(kind="exception", detail="ValueError: x (line 1)")
    assert ok.done_message() == {"op": "done", "status": "ok"}
    assert with_result.done_message() == {"op": "done", "status": "ok", "result": [1]}
    assert failed.done_message() == {
        "op": "done",
        "status": "error",
        "kind": "exception",
        "detail": "ValueError: x (line 1)",
    }
    assert repr(ok) == "ProgramEnd()"
    assert repr(with_result) == "ProgramEnd(result=[1])"
    assert repr(failed) == "ProgramEnd(kind='exception', detail='ValueError: x (line 1)')"


# --- the source the WASI guest runs --------------------------------------------------


def test_the_guest_source_runs_in_one_namespace() -> None:
    """``guest_source()`` run in a plain dict, as the guest does, runs a program."""
    sources = [(SOURCE_DIR / f"{name}.py") for name in GUEST_MODULES]
    assert guest_source() == "\n".join(path.read_text(encoding="utf-8") for path in sources)
    guest: dict[str, Any] = {"__name__": "_code_program"}
    for path in sources:  # one after the other, in one namespace: guest_source() run by parts
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), guest)

    async def submit(name: str, args: dict[str, Any]) -> Any:
        return {"got": args}

    compiled = guest["compile_program"]("print('hi')\nreturn await tools.echo(a=1)")
    error = guest["ToolCallError"]
    tools = guest["make_tools"](["echo"], submit, error)
    capture = guest["OutputCapture"](100)
    # The guest makes its capture sys.stdout; here print is pointed at it instead.
    namespace = guest["program_globals"](tools, error, print=partial(print, file=capture))
    main = guest["make_main"](compiled, namespace)
    end = asyncio.run(guest["run_program"](main, capture))
    assert end.done_message() == {"op": "done", "status": "ok", "result": {"got": {"a": 1}}}
    assert capture.logs() == ("hi",)
    assert guest["lossless_copy"] is not program.lossless_copy  # the guest's own copy


def test_the_guest_modules_share_no_top_level_name() -> None:
    """Run in one namespace, one module's names must not replace the other's."""
    names: list[set[str]] = []
    for name in GUEST_MODULES:
        tree = ast.parse((SOURCE_DIR / f"{name}.py").read_text(encoding="utf-8"))
        defined: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                defined.update(t.id for t in targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.Import):
                defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        names.append(defined)
    shared = set.intersection(*names) - {"__all__", "TYPE_CHECKING"}
    assert shared == set()


def test_the_guest_modules_import_only_cheap_standard_modules() -> None:
    """No ast, importlib.util, asyncio or typing when the guest runs the source."""
    script = lines(
        "import sys",
        "before = set(sys.modules)",
        f"exec({guest_source()!r}, {{'__name__': '_code_program'}})",
        "print(' '.join(sorted(set(sys.modules) - before)))",
    )
    output = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert set(output) <= {"_ast", "keyword", "math"}

"""Small, shared building blocks for the tests (public API only).

Import as ``from tests.helpers import ...``. Everything here builds tools and calls the way a
user of ``dsh_tools`` would; nothing reaches into private state.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import re
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import attrs

from dsh_tools import (
    ExecutionMode,
    FrozenDict,
    JsonValue,
    Output,
    Scope,
    TextContent,
    ToolCall,
    ToolDefinition,
    ToolResult,
    ToolRunContext,
    ToolRuntime,
    define_tool,
)

if TYPE_CHECKING:
    import types

__all__ = [
    "ECHO_PARAMETERS",
    "Body",
    "WorkBudgetExceeded",
    "assert_help_lists_each_command_on_one_line",
    "call",
    "deep_equal",
    "error_text",
    "exactly",
    "make_echo",
    "mode",
    "nest",
    "raw_tool",
    "returning",
    "run",
    "text_output",
    "work_budget",
]

Body = Callable[[JsonValue, ToolRunContext], Awaitable[object]]

ECHO_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
}

_call_ids: Iterator[int] = itertools.count(1)


def text_output() -> Output:
    """An output that accepts a string and renders it as one text block."""
    return Output(schema={"type": "string"}, render=lambda args, value: [TextContent(value)])


def returning(value: object) -> Body:
    """A tool body that returns ``value``."""

    async def body(args: JsonValue, ctx: ToolRunContext) -> object:
        return value

    return body


def raw_tool(
    name: str,
    execute: Body | None = None,
    *,
    description: str | None = None,
    parameters: JsonValue = None,
    output: Output | None = None,
    is_concurrency_safe: bool | Callable[[object], object] = False,
) -> ToolDefinition:
    """A raw ("MCP-style") definition; by default it returns its own name as a string."""
    return ToolDefinition(
        name=name,
        description=f"the {name} tool" if description is None else description,
        parameters={"type": "object"} if parameters is None else parameters,
        output=text_output() if output is None else output,
        execute=returning(name) if execute is None else execute,
        is_concurrency_safe=is_concurrency_safe,
    )


def make_echo(name: str = "echo") -> ToolDefinition:
    """The conformance fixture ``echo``: returns ``args.get("text", "")`` as one text block."""

    async def body(args: FrozenDict, ctx: ToolRunContext) -> object:
        return args.get("text", "")

    return define_tool(
        name=name,
        description="Echo the given text.",
        parameters=ECHO_PARAMETERS,
        output=text_output(),
        execute=body,
    )


def call(
    name: str,
    arguments: object = None,
    *,
    scope: Scope | None = None,
    call_id: str | None = None,
) -> ToolCall:
    """A call with a fresh ``call_id`` (``arguments=None`` means ``{}``)."""
    return ToolCall(
        call_id=f"call-{next(_call_ids)}" if call_id is None else call_id,
        name=name,
        arguments={} if arguments is None else arguments,
        scope=scope,
    )


async def run(
    runtime: ToolRuntime,
    name: str,
    arguments: object = None,
    *,
    scope: Scope | None = None,
) -> ToolResult:
    """Execute one call of ``name`` and return its result."""
    return await runtime.execute(call(name, arguments, scope=scope))


def mode(
    runtime: ToolRuntime, name: str, arguments: object = None, *, scope: Scope | None = None
) -> ExecutionMode:
    """Classify one call of ``name``."""
    return runtime.execution_mode(call(name, arguments, scope=scope))


def error_text(result: ToolResult) -> str:
    """The text of the single content block of a failed result."""
    assert result.is_error, result
    assert len(result.content) == 1, result.content
    block = result.content[0]
    assert isinstance(block, TextContent), block
    return block.text


def exactly(message: str) -> str:
    """A ``match=`` pattern that accepts exactly ``message`` (for ``pytest.raises``)."""
    return f"^{re.escape(message)}$"


def nest(depth: int, leaf: object, wrap: Callable[[object], object]) -> object:
    """Build ``wrap(wrap(...wrap(leaf)))`` ``depth`` times, iteratively."""
    node = leaf
    for _ in range(depth):
        node = wrap(node)
    return node


def deep_equal(a: object, b: object, *, tuple_is_list: bool = True) -> bool:
    """Structural JSON equality, iteratively (``==`` recurses in C on 5000-deep values).

    Mappings compare by items (insertion order ignored, like ``dict``); lists and tuples
    compare item by item, and with ``tuple_is_list=False`` their types must match too.
    """
    stack: list[tuple[object, object]] = [(a, b)]
    while stack:
        x, y = stack.pop()
        if isinstance(x, dict) and isinstance(y, dict):
            if x.keys() != y.keys():
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif isinstance(x, list | tuple) and isinstance(y, list | tuple):
            if not tuple_is_list and type(x) is not type(y):
                return False
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif (
            isinstance(x, dict | list | tuple)
            or isinstance(y, dict | list | tuple)
            or type(x) is not type(y)
            or x != y
        ):
            return False
    return True


class WorkBudgetExceeded(Exception):
    """Raised inside the measured code by :func:`work_budget` once its budget is spent."""


@contextlib.contextmanager
def work_budget(module: types.ModuleType, calls: int) -> Iterator[list[int]]:
    """Count the Python function calls made inside ``module``'s file, a measure of the work
    done that does not depend on the machine's speed, and stop that work (raising
    :class:`WorkBudgetExceeded` from the next call) once it exceeds ``calls``.

    Uses ``sys.setprofile``, which coverage (a tracer) leaves free. Yields a one-item list
    holding the count so far.
    """
    filename = module.__file__
    count = [0]

    def profile(frame: types.FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_filename == filename:
            count[0] += 1
            if count[0] > calls:
                raise WorkBudgetExceeded(f"more than {calls} calls into {module.__name__}")

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield count
    finally:
        sys.setprofile(previous)


def assert_help_lists_each_command_on_one_line(parser: argparse.ArgumentParser) -> None:
    """``--help`` in an 80-column terminal names every subcommand on one line with its help
    (the caller sets ``COLUMNS=80``): no command missing, no help wrapped onto a second line."""
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    lines = parser.format_help().splitlines()
    assert commands.choices, "the parser has no subcommands"
    for name in commands.choices:
        rows = [i for i, line in enumerate(lines) if line.startswith(f"    {name} ")]
        assert len(rows) == 1, (name, lines)
        row = lines[rows[0]]
        assert row[4 + len(name) :].strip(), f"{name} has no help: {row!r}"
        following = lines[rows[0] + 1] if rows[0] + 1 < len(lines) else ""
        assert not following.startswith(" " * 5), f"{name}'s help wraps: {row!r} {following!r}"


@attrs.define
class Picky:
    """An attrs class whose own ``__setattr__`` refuses 13: code of the class's own that
    raises while it is built (the converter reports it; a fast path must give up)."""

    x: int

    def __setattr__(self, name: str, value: object) -> None:
        if value == 13:
            raise ValueError("no 13")
        object.__setattr__(self, name, value)

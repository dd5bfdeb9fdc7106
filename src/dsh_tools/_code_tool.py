"""The ``run_code`` tool: its definition, its durable content and its body's first steps.

Each runtime builds one ``run_code`` definition (code-mode §3.1) with :func:`define_tool`, so
its arguments are validated like any tool's. It lives in no layer: the registry resolves
the name to it wherever the effective mode presents it. Its body checks the call, reads the
tools it binds and hands the run to the sub-call lane (code-mode §3.3).
"""

from __future__ import annotations

import copy
import functools
import json
from typing import TYPE_CHECKING, Any, Final

from ._code_present import check_code_runtime, effective_mode
from ._code_values import require_code_limits
from ._content import TextContent
from ._define import define_tool
from ._definition import Output, ToolDefinition
from ._errors import ToolArgsError

if TYPE_CHECKING:
    from ._calls import ToolRunContext
    from ._json import FrozenDict, JsonValue

__all__ = ["RUN_CODE_DESCRIPTION", "build_run_code", "render_run_code"]

RUN_CODE_DESCRIPTION: Final = (
    "Run a Python program that calls the tools declared in the SDK. The program is the body "
    "of an async function: call a tool with `await tools.<name>(...)`, run independent calls "
    "at the same time with `asyncio.gather(...)` after `import asyncio`, `print()` what you "
    "want to read, and `return` a JSON value. You get back the printed lines and the "
    "returned value."
)

_PARAMETERS: Final = {
    "type": "object",
    "properties": {
        "code": {
            "type": "string",
            "description": (
                "The body of an async Python function. It can use await, return, print(), "
                "tools and ToolCallError."
            ),
        },
        "description": {
            "type": "string",
            "description": "What the program does, in 5 to 10 words, shown to the user.",
        },
    },
    "required": ["code", "description"],
}

_OUTPUT_SCHEMA: Final = {
    "type": "object",
    "properties": {"logs": {"type": "array", "items": {"type": "string"}}, "result": {}},
    "required": ["logs"],
    "additionalProperties": False,
}

_NO_OUTPUT: Final = "(run_code completed with no output)"
#: Deeper lines of a rendered result keep this indentation, so that a deep value stays
#: readable (and short) for the model.
_MAX_INDENT: Final = 10


def build_run_code() -> ToolDefinition:
    """A new ``run_code`` definition (one per runtime, whatever its mode).

    A shallow copy of one immutable template: compiling the schemas costs far more than a
    runtime's construction otherwise does, and the copies share everything but identity.
    """
    return copy.copy(_template())


@functools.cache
def _template() -> ToolDefinition:
    return define_tool(
        name="run_code",
        description=RUN_CODE_DESCRIPTION,
        parameters=_PARAMETERS,
        output=Output(schema=_OUTPUT_SCHEMA, render=render_run_code),
        execute=_run_code_body,
        present_call=_present_call,
    )


def _present_call(args: FrozenDict) -> object:
    return {"title": args["description"], "raw_input": args["code"]}


def render_run_code(args: JsonValue, value: JsonValue) -> list[TextContent]:
    """``run_code``'s durable content: the printed lines, then the result (code-mode §3.2).

    A ``str`` result is shown as it is; any other result as indented JSON whose indentation
    stops growing at 10 spaces. Empty output gives ``(run_code completed with no output)``.
    """
    assert isinstance(value, dict)  # the output schema guarantees it
    parts: list[str] = []
    logs = value["logs"]
    if logs:
        parts.append("\n".join(logs))
    if "result" in value:
        result = value["result"]
        parts.append(result if isinstance(result, str) else _indented_json(result))
    return [TextContent("\n".join(parts) or _NO_OUTPUT)]


def _scalar(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _indented_json(value: object) -> str:
    """``json.dumps(value, ensure_ascii=False, indent=2)``, indentation capped, iteratively.

    ``json.dumps`` with ``indent`` recurses once per level; this walk keeps its own stack, so
    a value nested 5000 deep renders too.
    """
    lines: list[list[Any]] = []  # [depth, text]; a comma is appended when a sibling follows
    # Open containers: [items iterator, is a mapping, depth, closing bracket, first item].
    stack: list[list[Any]] = []

    def open_value(item: object, depth: int, prefix: str) -> None:
        if isinstance(item, dict) and item:
            lines.append([depth, prefix + "{"])
            stack.append([iter(item.items()), True, depth, "}", True])
        elif isinstance(item, list | tuple) and item:
            lines.append([depth, prefix + "["])
            stack.append([iter(item), False, depth, "]", True])
        elif isinstance(item, dict):
            lines.append([depth, prefix + "{}"])
        elif isinstance(item, list | tuple):
            lines.append([depth, prefix + "[]"])
        else:
            lines.append([depth, prefix + _scalar(item)])

    open_value(value, 0, "")
    while stack:
        frame = stack[-1]
        entry: Any = next(frame[0], _DONE)
        if entry is _DONE:
            stack.pop()
            lines.append([frame[2], frame[3]])
            continue
        if frame[4]:
            frame[4] = False
        else:
            lines[-1][1] += ","
        if frame[1]:
            key, item = entry
            open_value(item, frame[2] + 1, _scalar(key) + ": ")
        else:
            open_value(entry, frame[2] + 1, "")
    return "\n".join(" " * min(2 * depth, _MAX_INDENT) + text for depth, text in lines)


_DONE: Final = object()


async def _run_code_body(args: FrozenDict, ctx: ToolRunContext) -> object:
    # Steps 1-3 of code-mode §3.3; the lane (steps 4-7) is _code_run's.
    if args["description"].strip() == "":
        raise ToolArgsError(["invalid description: expected a non-empty string"])
    runtime = ctx.execution._state.runtime
    scope = ctx.scope
    registry = runtime._registry
    code_runtime = check_code_runtime(runtime, effective_mode(registry, scope))
    limits = require_code_limits(runtime.code_limits)
    # Read once: a tool registered later is not bound (run_code is in no layer, so the view
    # never holds it). Sorted by code point.
    tools = tuple(sorted(defn.name for defn in registry.visible(scope)))
    from . import _code_run  # the lane lives in its own module

    return await _code_run.run_code_body(
        runtime=runtime,
        code_runtime=code_runtime,
        limits=limits,
        code=args["code"],
        tools=tools,
        ctx=ctx,
    )

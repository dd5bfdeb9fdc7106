"""Tools whose names are not Python attribute names, end to end through ``run_code``."""

from __future__ import annotations

import json

from dsh_sched import ModelToolCall, run_tool_calls
from dsh_tools import FrozenDict, ToolDefinition, ToolRunContext, ToolRuntime, define_tool
from dsh_tools.code import TrustedCodeRuntime, render_python_sdk

from .helpers import text_output

NAMES = ("__class__", "class", "fs.read")


def named(name: str) -> ToolDefinition:
    async def body(args: FrozenDict, ctx: ToolRunContext) -> object:
        return f"{name}:{args.get('x', '')}"

    return define_tool(
        name=name,
        description=f"The {name} tool.",
        parameters={"type": "object", "properties": {"x": {"type": "string"}}},
        output=text_output(),
        execute=body,
    )


async def test_l051_item_access_reaches_every_name_and_attributes_stay_python() -> None:
    """L-051: tools["__class__"], tools["class"], tools["fs.read"] reach their tools;
    tools.__class__ is still the object's class; the SDK declares them with overloads."""
    runtime = ToolRuntime(mode="code", code_runtime=TrustedCodeRuntime())
    definitions = [named(name) for name in NAMES]
    for definition in definitions:
        runtime.register(definition)
    program = "\n".join(
        [
            'a = await tools["__class__"](x="1")',
            'b = await tools["class"]({"x": "2"})',
            'c = await tools["fs.read"](x="3")',
            "return [a, b, c, tools.__class__ is type(tools), sorted(dir(tools))]",
        ]
    )
    arguments = json.dumps({"code": program, "description": "Call the odd names"})
    outcome = await run_tool_calls(
        runtime, [ModelToolCall(call_id="c1", name="run_code", arguments=arguments)]
    )
    result = outcome.results[0].result
    assert not result.is_error, result.content
    assert result.value["result"] == (
        "__class__:1",
        "class:2",
        "fs.read:3",
        True,
        ("__class__", "class", "fs.read"),
    )
    sdk = render_python_sdk(definitions)
    for name in NAMES:
        assert f'    def __getitem__(self, name: Literal["{name}"])' in sdk
    assert sdk.count("    @overload\n") == 3

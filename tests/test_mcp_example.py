"""``examples/mcp_source.py``: local and MCP tools in one batch, restricted and approved."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_mcp_example_runs_a_mixed_batch(capfd: pytest.CaptureFixture[str]) -> None:
    # Run in this process (its server is still a subprocess): no second interpreter start-up.
    example = runpy.run_path(str(ROOT / "examples" / "mcp_source.py"), run_name="example")
    trio.run(example["main"])
    lines = capfd.readouterr().out.splitlines()
    assert lines[0] == "the worker sees: word_count, shout, notes__lookup, notes__save_note"
    assert lines[1] == (
        '  approval asked for notes__save_note: MCP tool "save_note" of server "notes" '
        "may change its environment"
    )
    table = [line.split(maxsplit=2) for line in lines[2:]]
    assert table == [
        ["word_count", "PARALLEL", "3"],
        ["notes__lookup", "PARALLEL", "an MCP source for trio"],
        ["notes__lookup", "PARALLEL", "milk, eggs"],
        ["shout", "PARALLEL", "DONE READING"],
        ["notes__save_note", "EXCLUSIVE", "saved 'todo'"],
        ["notes__delete_all", "EXCLUSIVE", 'Error: unknown tool "notes__delete_all"'],
    ]

"""``python -m dsh_tools inspect`` (runtime.md §14): conformance group I."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import dsh_tools._inspect as inspect_module
from dsh_tools import Abort, Scope, ToolRuntime
from dsh_tools.cli import UnknownEntryError, inspect_report, main

CAUTION = (
    "waterfall listeners receive a trailing call_next() and MUST call it to delegate — "
    "returning without call_next() short-circuits the chain."
)
EVENTS = [
    "tools/change",
    "tools/execute",
    "tools/post-execute",
    "tools/pre-execute",
    "tools/result",
]


def run_cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_tools", "inspect", *args], capture_output=True, check=False
    )


def test_i001_full_report_from_the_command_line() -> None:
    proc = run_cli()
    assert proc.returncode == 0
    text = proc.stdout.decode("utf-8")
    assert text == inspect_report()
    api, events = text.split("\n\n## events\n")
    assert api.startswith("## api\n")
    assert events.endswith(CAUTION + "\n")
    assert "\n\n" not in api


def test_i002_api_lists_entries_and_methods_in_definition_order() -> None:
    lines = inspect_report("api").splitlines()
    headers = [line for line in lines if line.startswith("- ")]
    assert [h.split(" — ")[0] for h in headers] == ["- ToolRuntime", "- Scope", "- Abort"]
    assert headers[0] == (
        "- ToolRuntime — The tool runtime: an explicit registry of tools, scopes, guards and hooks."
    )
    runtime_block = lines[lines.index(headers[0]) + 1 : lines.index(headers[1])]
    names = [line.strip().removeprefix("async ").split("(")[0] for line in runtime_block]
    expected = [n for n, v in vars(ToolRuntime).items() if inspect.isfunction(v) and n[0] != "_"]
    assert names == expected
    assert all(line.startswith("    ") and not line.startswith("     ") for line in runtime_block)
    assert (
        "    open_scope(*, parent: Scope | None = None, name: str | None = None) -> Scope" in lines
    )
    assert (
        "    restrict(*, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None)"
        " -> Disposer" in lines
    )


def test_i003_one_api_entry_with_docstrings() -> None:
    text = inspect_report("api", "ToolRuntime")
    lines = text.splitlines()
    assert lines[0] == "## api"
    assert lines[1].startswith("- ToolRuntime — ")
    assert "- Scope" not in text
    doc = inspect.cleandoc(ToolRuntime.get.__doc__ or "")
    expected = [f"    {line}" if line.strip() else "" for line in doc.splitlines()]
    signature = "    get(name: str, scope: Scope | None = None) -> ToolDefinition | None"
    at = lines.index(signature)
    assert lines[at - len(expected) : at] == expected


def test_i004_unknown_api_entry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["inspect", "api", "Nope"]) == 1
    captured = capsys.readouterr()
    assert captured.err == 'no catalogued api entry named "Nope"\n'
    assert captured.out == ""
    with pytest.raises(UnknownEntryError):
        inspect_report("api", "toolruntime")  # case-sensitive


def test_i005_i006_events_sorted_with_modes_signatures_and_registration() -> None:
    lines = inspect_report("events").splitlines()
    headers = [line for line in lines if line.startswith("- ")]
    assert [h[2:].split(" [")[0] for h in headers] == EVENTS
    assert headers == [
        "- tools/change [emit] — The visible tool set changed.",
        "- tools/execute [waterfall] — Wrap dispatch of an allowed call.",
        "- tools/post-execute [waterfall] — Accept, replace, or block a dispatched result.",
        "- tools/pre-execute [waterfall] — Allow, deny, or ask before dispatch.",
        "- tools/result [emit] — Observe each final, frozen result.",
    ]
    at = lines.index(headers[3])
    assert lines[at + 1] == (
        "    async (execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision"
    )
    assert lines[at + 2] == (
        "    registered with: ToolRuntime.on_pre_execute, Scope.on_pre_execute"
    )
    at = lines.index(headers[4])
    assert lines[at + 1] == "    (execution: ToolExecution, result: ToolResult) -> None"


@pytest.mark.parametrize("name", [None, "tools/result"])
def test_i007_caution_line_ends_the_events_section(name: str | None) -> None:
    assert inspect_report("events", name).splitlines()[-1] == CAUTION


def test_i008_one_event_with_its_docstring() -> None:
    proc = run_cli("events", "tools/pre-execute")
    assert proc.returncode == 0
    lines = proc.stdout.decode("utf-8").splitlines()
    assert lines[0] == "## events"
    assert lines[1] == "- tools/pre-execute [waterfall] — Allow, deny, or ask before dispatch."
    assert lines[2] == "    Allow, deny, or ask before dispatch."
    assert lines[-3].startswith("    async (execution: ToolExecution")
    assert lines[-1] == CAUTION
    assert sum(line.startswith("- ") for line in lines) == 1


def test_i009_unknown_event() -> None:
    proc = run_cli("events", "nope")
    assert proc.returncode == 1
    assert proc.stderr.decode() == 'no catalogued event named "nope"\n'
    assert proc.stdout == b""


def test_i010_async_methods_are_marked() -> None:
    lines = inspect_report("api").splitlines()
    assert "    async execute(call: ToolCall) -> ToolResult" in lines
    assert "    async wait() -> None" in lines


def test_i011_report_is_built_from_live_docstrings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ToolRuntime.get, "__doc__", "Look a tool up. More text here.")
    assert "    Look a tool up. More text here." in inspect_report("api", "ToolRuntime")

    class Double:
        """A test double. Second sentence."""

        def poke(self, depth: int = 2, /, *rest: str, flag: bool = False) -> None:
            """Poke."""

        def _hidden(self) -> None:
            """Not listed."""

    monkeypatch.setattr(inspect_module, "API_CATALOGUE", (Double,))
    assert inspect_report("api") == (
        "## api\n- Double — A test double.\n"
        "    poke(depth: int = 2, /, *rest: str, flag: bool = False) -> None\n"
    )


def test_i012_usage_errors_exit_2() -> None:
    assert run_cli("bogus").returncode == 2
    assert run_cli("api", "ToolRuntime", "extra").returncode == 2


def test_summary_rules() -> None:
    assert inspect_module.summary(None) == "(no summary)"
    assert inspect_module.summary("One line\ncontinued. Then more.") == "One line continued."
    assert inspect_module.summary("v1.2 is out") == "v1.2 is out"
    assert inspect_module.summary("Ends here.\n\nSecond paragraph.") == "Ends here."
    assert inspect_module.summary("   \n  ") == "(no summary)"


def test_report_argument_errors() -> None:
    with pytest.raises(ValueError, match="unknown section"):
        inspect_report("bogus")
    with pytest.raises(ValueError, match="needs a section"):
        inspect_report(None, "ToolRuntime")


def test_every_catalogued_method_has_a_real_docstring() -> None:
    for cls in (ToolRuntime, Scope, Abort):
        assert cls.__doc__
        for name, value in vars(cls).items():
            if inspect.isfunction(value) and not name.startswith("_"):
                assert value.__doc__, (cls, name)
                assert len(value.__doc__.strip()) > 10, (cls, name)


def test_signature_line_with_evaluated_annotations_and_var_keywords() -> None:
    def probe(self: object, x, *args, key=3, **options):  # type: ignore[no-untyped-def]
        return None

    probe.__annotations__ = {"x": int, "options": str, "return": list[int]}
    assert inspect_module.signature_line(probe, "probe") == (
        "probe(x: int, *args, key=3, **options: str) -> list[int]"
    )


def test_full_report_is_pinned() -> None:
    """The whole report, character for character (regenerate deliberately with
    ``python -m dsh_tools inspect > tests/data/inspect.txt`` after an API change)."""
    pinned = (Path(__file__).parent / "data" / "inspect.txt").read_text(encoding="utf-8")
    assert run_cli().stdout.decode("utf-8") == pinned


def test_undocumented_entries_have_no_summary_and_no_docstring_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Bare:
        def act(self) -> None:
            pass

    monkeypatch.setattr(inspect_module, "API_CATALOGUE", (Bare,))
    assert inspect_report("api", "Bare") == "## api\n- Bare — (no summary)\n    act() -> None\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_report_that_cannot_be_written_is_one_line_not_a_traceback() -> None:
    """Standard output on a full disk: exit 1 with one line on stderr, no traceback (the
    interpreter's own flush at exit must not fail again either)."""
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [sys.executable, "-m", "dsh_tools", "inspect"],
            stdout=full,
            stderr=subprocess.PIPE,
            check=False,
        )
    assert done.returncode == 1
    assert done.stderr.decode() == "cannot write the report: No space left on device\n"

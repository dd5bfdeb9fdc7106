"""``python -m dsh_tools inspect`` (runtime.md §14): conformance group I."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import dsh_tools._inspect as inspect_module
import dsh_tools.cli as cli_module
from dsh_tools import Abort, Scope, ToolRuntime
from dsh_tools.cli import UnknownEntryError, inspect_report, main
from tests.helpers import assert_help_lists_each_command_on_one_line

CAUTION = (
    "waterfall listeners receive a trailing call_next() and MUST call it to delegate — "
    "returning without call_next() short-circuits the chain."
)
EVENTS = [
    "tools/change",
    "tools/code-dispatch",
    "tools/code-dispatch-log",
    "tools/code-dispatch-start",
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
    assert [h.split(" — ")[0] for h in headers[:3]] == ["- ToolRuntime", "- Scope", "- Abort"]
    assert headers[0] == (
        "- ToolRuntime — The tool runtime: an explicit registry of tools, scopes, guards and hooks."
    )
    runtime_block = lines[lines.index(headers[0]) + 1 : lines.index(headers[1])]
    # The constructor first (decision: the api section covers the whole public API), then
    # the public methods in definition order.
    assert runtime_block[0] == (
        "    ToolRuntime(*, approval: ApprovalService | None = None, "
        "mode: PresentationMode | str = PresentationMode.NATIVE, "
        "code_runtime: CodeRuntime | None = None, code_limits: CodeRunLimits | None = None, "
        "max_parallel_sub_calls: int = 10) -> None"
    )
    # Then the attributes and properties (Code Mode's), then the methods.
    attributes = runtime_block[1:5]
    assert attributes == [
        "    code_runtime: CodeRuntime | None",
        "    code_limits: CodeRunLimits",
        "    mode: PresentationMode",
        "    max_parallel_sub_calls: int",
    ]
    names = [line.strip().removeprefix("async ").split("(")[0] for line in runtime_block[5:]]
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


def test_an_unknown_bare_name_points_at_the_dotted_entry(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A submodule's names are catalogued dotted; the bare name says which entry to ask for."""
    assert main(["inspect", "api", "WasiCodeRuntime"]) == 1
    assert capsys.readouterr().err == (
        'no catalogued api entry named "WasiCodeRuntime"; '
        'did you mean "dsh_tools.code.WasiCodeRuntime"?\n'
    )
    assert main(["inspect", "api", "dsh_tools.code.CodeRunLimits"]) == 0
    assert capsys.readouterr().out.startswith(
        "## api\n- dsh_tools.code.CodeRunLimits — What one Code Mode run may use."
    )


def test_i005_i006_events_sorted_with_modes_signatures_and_registration() -> None:
    lines = inspect_report("events").splitlines()
    headers = [line for line in lines if line.startswith("- ")]
    assert [h[2:].split(" [")[0] for h in headers] == EVENTS
    assert headers == [
        "- tools/change [emit] — The visible tool set changed.",
        "- tools/code-dispatch [emit] — A Code Mode sub-call settled.",
        "- tools/code-dispatch-log [waterfall] — Rewrite the content logged for a settled "
        "sub-call.",
        "- tools/code-dispatch-start [emit] — A Code Mode sub-call started.",
        "- tools/execute [waterfall] — Wrap dispatch of an allowed call.",
        "- tools/post-execute [waterfall] — Accept, replace, or block a dispatched result.",
        "- tools/pre-execute [waterfall] — Allow, deny, or ask before dispatch.",
        "- tools/result [emit] — Observe each final, frozen result.",
    ]
    at = lines.index(headers[6])
    assert lines[at + 1] == (
        "    async (execution: ToolExecution, call_next: CallNext[PreDecision]) -> PreDecision"
    )
    assert lines[at + 2] == (
        "    registered with: ToolRuntime.on_pre_execute, Scope.on_pre_execute"
    )
    at = lines.index(headers[7])
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
    # The docstring follows without its first paragraph, which is the header's summary.
    assert lines[2].startswith("    Event ``tools/pre-execute`` (waterfall). Runs after")
    assert lines[-3].startswith("    async (execution: ToolExecution")
    assert lines[-1] == CAUTION
    assert sum(line.startswith("- ") for line in lines) == 1


def test_i009_unknown_event() -> None:
    proc = run_cli("events", "nope")
    assert proc.returncode == 1
    assert proc.stderr.decode() == 'no catalogued event named "nope"\n'
    assert proc.stdout == b""
    with pytest.raises(UnknownEntryError, match='no catalogued event named "nope"'):
        inspect_report("events", "nope")


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
    monkeypatch.setattr(inspect_module, "API_MODULES", ())
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
    monkeypatch.setattr(inspect_module, "API_MODULES", ())
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


# --- Discoverability (issue 10): the api section covers both packages' public API --------

#: The names a user of the two packages looks up first.
KEY_ENTRIES = [
    "tool",
    "ToolRunContext",
    "ToolResult",
    "ToolSchema",
    "ModelToolCall",
    "run_tool_calls",
    "open_batch",
    "Batch",
    "BatchOutcome",
    "CommittedCall",
    "Sink",
    "RecordingSink",
    "JsonlSessionLog",
    "CallStarted",
    "CallCommitted",
    "ContextAccepted",
    "dsh_sched.testing",
    "dsh_sched.testing.TraceRecorder",
    "dsh_sched.testing.check_trace",
]


def _entry_names(text: str) -> list[str]:
    return [line[2:].split(" — ")[0] for line in text.splitlines() if line.startswith("- ")]


def test_api_covers_every_public_name_of_both_packages() -> None:
    import dsh_sched
    import dsh_sched.aio
    import dsh_sched.testing
    import dsh_tools
    import dsh_tools.code
    import dsh_tools.lowlevel
    import dsh_tools.policies
    import dsh_tools.testing

    names = _entry_names(inspect_report("api"))
    assert len(names) == len(set(names)), "an entry name is catalogued twice"
    expected = {*dsh_tools.__all__, *dsh_sched.__all__}
    for module in (
        dsh_tools.lowlevel,
        dsh_tools.policies,
        dsh_tools.testing,
        dsh_tools.code,
        dsh_sched.testing,
        dsh_sched.aio,
    ):
        expected.add(module.__name__)
        expected.update(f"{module.__name__}.{name}" for name in module.__all__)
    assert set(names) == expected
    assert set(KEY_ENTRIES) <= set(names)


@pytest.mark.parametrize("name", KEY_ENTRIES)
def test_inspect_api_name_works_for_each_key_entry(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inspect", "api", name]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "## api"
    assert _entry_names("\n".join(lines)) == [name]
    assert lines[1].startswith(f"- {name} — ")
    assert "(no summary)" not in lines[1]
    assert len(lines) > 2


def test_api_entries_show_what_a_user_needs() -> None:
    text = inspect_report("api")
    lines = text.splitlines()
    # Functions: their signature; classes: constructor, attributes, properties, methods.
    assert "    async run_tool_calls(runtime: ToolRuntime, calls: Iterable[ModelToolCall]," in (
        text
    )
    at = lines.index("- ModelToolCall — One tool call as the model emitted it.")
    assert lines[at + 1] == (
        "    ModelToolCall(*, call_id: str, name: str, arguments: str | Mapping[str, object])"
        " -> None"
    )
    assert "    abort_reason: object" in lines
    assert "    classmethod from_json(data: Mapping[str, Any]) -> ToolResult" in lines
    at = lines.index("- Abort — A one-shot request to abort tool calls.")
    assert lines[at + 1 : at + 3] == ["    aborted: bool", "    reason: object"]
    # Constants and aliases: their value, without private module paths.
    assert "    TOOL_DENIED = ErrorCode.TOOL_DENIED" in lines
    assert "    ContentBlock = TextContent | ImageContent" in lines
    assert "    JsonValue = Any" in lines
    assert "    CallNext = Callable[[], Awaitable[T]]" in lines
    assert "    DEFAULT_MAX_PARALLEL = 10" in lines
    # A submodule lists its names, each catalogued under its dotted name.
    at = lines.index(
        "- dsh_sched.testing — Testing tools for the scheduler: trace recording, invariant"
        " checking and fuzzing."
    )
    assert lines[at + 1].startswith("    TimelineRow — One call of the batch")
    assert " at 0x" not in text  # no address of a private sentinel: the report is stable


def test_member_lines_cover_every_kind_of_member(monkeypatch: pytest.MonkeyPatch) -> None:
    import enum
    from typing import ClassVar

    class Colour(enum.Enum):
        """Colours."""

        RED = "r"

    class Double:
        """A double. With more.

        Second paragraph.
        """

        size: int
        LIMIT: ClassVar[int] = 3
        _hidden: str

        def __init__(self, size: int) -> None:
            self.size = size

        def __call__(self, x: int) -> int:
            """Call it."""
            return x

        @property
        def area(self) -> int:
            """The area."""
            return self.size

        @property
        def untyped(self):  # type: ignore[no-untyped-def]
            return None

        @classmethod
        def make(cls, size: int) -> Double:
            """Make one."""
            return cls(size)

        @staticmethod
        def unit():  # type: ignore[no-untyped-def]
            return 1

    def helper(x: int) -> int:
        """Help."""
        return x

    monkeypatch.setattr(inspect_module, "API_CATALOGUE", (Double, Colour, helper))
    monkeypatch.setattr(inspect_module, "API_MODULES", ())
    assert inspect_report("api") == (
        "## api\n"
        "- Double — A double.\n"
        "    Double(size: int) -> None\n"
        "    size: int\n"
        "    (x: int) -> int\n"
        "    area: int\n"
        "    untyped\n"
        "    classmethod make(size: int) -> Double\n"
        "    staticmethod unit()\n"
        "- Colour — Colours.\n"
        "    RED = 'r'\n"
        "- helper — Help.\n"
        "    helper(x: int) -> int\n"
    )
    full = inspect_report("api", "Double").splitlines()
    # The docstring's first paragraph is more than the summary: it is shown whole, once.
    assert full[:5] == [
        "## api",
        "- Double — A double.",
        "    A double. With more.",
        "",
        "    Second paragraph.",
    ]
    assert full[6:8] == ["    size: int", "    Call it."]
    assert (
        inspect_report("api", "helper") == "## api\n- helper — Help.\n    helper(x: int) -> int\n"
    )


@pytest.mark.parametrize("name", EVENTS)
def test_inspect_events_name_prints_each_line_once(name: str) -> None:
    """The header already shows the summary: the docstring below it does not repeat it."""
    lines = inspect_report("events", name).splitlines()
    text_lines = [line.strip() for line in lines if line.strip()]
    assert len(text_lines) == len(set(text_lines))
    summary = lines[1].split(" — ", 1)[1]
    assert sum(summary in line for line in lines) == 1


def test_inspect_api_name_does_not_repeat_the_summary() -> None:
    for name in ("ToolRuntime", "run_tool_calls", "dsh_sched.testing", "BatchOutcome"):
        lines = inspect_report("api", name).splitlines()
        summary = lines[1].split(" — ", 1)[1]
        assert lines[2].strip() != summary, name


def test_dsh_tools_loads_dsh_sched_only_for_the_api_section() -> None:
    """Layering: ``dsh_tools`` never imports ``dsh_sched`` at module level; the inspect CLI
    imports it only when the api section is built."""
    probe = (
        "import sys\n"
        "import dsh_tools, dsh_tools.cli\n"
        "from dsh_tools.cli import inspect_report\n"
        "assert 'dsh_sched' not in sys.modules, 'import'\n"
        "inspect_report('events')\n"
        "assert 'dsh_sched' not in sys.modules, 'events'\n"
        "inspect_report('api', 'ToolRuntime')\n"
        "assert 'dsh_sched' in sys.modules, 'api'\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    source = (Path(inspect_module.__file__).parent).glob("*.py")
    for path in source:
        for line in path.read_text(encoding="utf-8").splitlines():
            assert not line.lstrip().startswith(("import dsh_sched", "from dsh_sched")), path


def test_help_lists_every_command_on_one_line_each(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert_help_lists_each_command_on_one_line(cli_module._parser())

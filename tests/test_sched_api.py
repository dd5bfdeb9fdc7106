"""The public surface of dsh_sched (scheduler.md §1); its layering is tests/test_layering.py."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import dsh_sched
import dsh_sched.aio
import dsh_sched.testing
import dsh_tools

SRC = Path(dsh_sched.__file__).parent
TOOLS_SRC = Path(dsh_tools.__file__).parent


def test_dsh_sched_all_is_pinned() -> None:
    assert sorted(dsh_sched.__all__) == sorted(
        [
            "ModelToolCall",
            "parse_arguments",
            "run_tool_calls",
            "open_batch",
            "Batch",
            "BatchOutcome",
            "BatchStatistics",
            "CommittedCall",
            "Sink",
            "CallStarted",
            "CallCommitted",
            "ContextAccepted",
            "RecordingSink",
            "JsonlSessionLog",
            "read_session_log",
            "LoggedCall",
            "DEFAULT_MAX_PARALLEL",
        ]
    )
    for name in dsh_sched.__all__:
        assert getattr(dsh_sched, name) is not None


def test_dsh_sched_testing_all_is_pinned() -> None:
    assert sorted(dsh_sched.testing.__all__) == [
        "TimelineRow",
        "TraceEvent",
        "TraceRecorder",
        "check_trace",
        "render_timeline",
        "timeline_rows",
    ]


def test_dsh_sched_aio_all_is_pinned() -> None:
    """integrations §1: the bridge's public names."""
    assert sorted(dsh_sched.aio.__all__) == [
        "Portal",
        "aio_tool",
        "portal",
        "run_on_asyncio",
        "run_tool_calls",
    ]
    assert getattr(dsh_sched.aio.Portal, "__final__", False)
    for name in dsh_sched.aio.__all__:
        assert (getattr(dsh_sched.aio, name).__doc__ or "").strip(), name


def test_public_concrete_classes_are_final() -> None:
    for name in (
        "Batch",
        "BatchOutcome",
        "CommittedCall",
        "ModelToolCall",
        "CallStarted",
        "CallCommitted",
        "ContextAccepted",
        "RecordingSink",
        "JsonlSessionLog",
        "LoggedCall",
    ):
        cls = getattr(dsh_sched, name)
        assert getattr(cls, "__final__", False), name
    assert getattr(dsh_sched.testing.TraceRecorder, "__final__", False)
    assert getattr(dsh_sched.testing.TraceEvent, "__final__", False)
    assert getattr(dsh_sched.testing.TimelineRow, "__final__", False)


def test_init_modules_only_re_export() -> None:
    adapters = SRC / "adapters"
    for path in (
        SRC / "__init__.py",
        SRC / "testing.py",
        SRC / "aio.py",
        adapters / "__init__.py",
        adapters / "openai_chat.py",
        adapters / "openai_responses.py",
        adapters / "anthropic_messages.py",
    ):
        tree = ast.parse(path.read_text())
        defined = [n for n in tree.body if isinstance(n, ast.ClassDef)]
        assert defined == [], path


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
    return found


def test_sink_is_a_protocol() -> None:
    assert typing.Protocol in dsh_sched.Sink.__mro__ or getattr(
        dsh_sched.Sink, "_is_protocol", False
    )


def test_lazy_fuzzing_names_match_the_fuzzing_modules() -> None:
    """dsh_sched.testing lists the fuzzing kit's names statically (so that importing it needs
    no hypothesis); the list must not drift from the modules it loads them from."""
    import importlib

    import dsh_sched.testing as testing

    modules = ("_fuzz_scenario", "_fuzz_strategies", "_fuzz_harness", "_fuzz_runners")
    exported: dict[str, str] = {}
    for module_name in modules:
        module = importlib.import_module(f"dsh_sched.{module_name}")
        for name in module.__all__:
            if name in testing._FUZZ_NAMES:
                exported[name] = module_name
                assert getattr(testing, name) is getattr(module, name)
    assert exported == testing._FUZZ_NAMES


def test_only_the_strategies_need_hypothesis() -> None:
    """The fuzzing kit's data, harness and runners work without hypothesis; only the
    strategies module imports it."""
    for path in SRC.glob("_fuzz_*.py"):
        imports_hypothesis = any(m.split(".")[0] == "hypothesis" for m, _ in _imports(path))
        assert imports_hypothesis == (path.name == "_fuzz_strategies.py"), path


def test_adapters_import_no_sdk() -> None:
    """integrations §1: the adapters never import openai, anthropic or mcp."""
    for path in (SRC / "adapters").glob("*.py"):
        for module, _ in _imports(path):
            assert module.split(".")[0] not in ("openai", "anthropic", "mcp", "pydantic"), path

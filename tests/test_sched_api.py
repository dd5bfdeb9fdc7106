"""The public surface of dsh_sched (scheduler.md §1) and its layering (README "Layering")."""

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

#: The only modules of src/ that may import asyncio (README "Layering", integrations §1):
#: the asyncio bridge. Code Mode's program runtimes join this list when they land.
ASYNCIO_ALLOWED = {
    "dsh_sched/_aio_portal.py",
    "dsh_sched/_aio_calls.py",
}


def test_dsh_sched_all_is_pinned() -> None:
    assert sorted(dsh_sched.__all__) == sorted(
        [
            "ModelToolCall",
            "parse_arguments",
            "run_tool_calls",
            "open_batch",
            "Batch",
            "BatchOutcome",
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
    assert sorted(dsh_sched.testing.__all__) == ["TraceEvent", "TraceRecorder", "check_trace"]


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


def test_init_modules_only_re_export() -> None:
    for path in (SRC / "__init__.py", SRC / "testing.py", SRC / "aio.py"):
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


def test_dsh_sched_uses_only_public_dsh_tools_names_and_never_execute() -> None:
    """README "Layering": public names only; calls are driven through lowlevel."""
    for path in SRC.glob("*.py"):
        text = path.read_text()
        assert ".execute(" not in text, path  # never ToolRuntime.execute()
        for module, names in _imports(path):
            if module.startswith("dsh_tools"):
                assert module in ("dsh_tools", "dsh_tools.lowlevel"), (path, module)
                assert all(not n.startswith("_") for n in names), (path, names)
                public = dsh_tools_public(module)
                assert set(names) <= public, (path, set(names) - public)


def test_only_the_asyncio_bridge_imports_asyncio() -> None:
    """README "Layering": every module of both packages, checked against ASYNCIO_ALLOWED."""
    importers = set()
    for package in (SRC, TOOLS_SRC):
        for path in package.rglob("*.py"):
            if any(m == "asyncio" or m.startswith("asyncio.") for m, _ in _imports(path)):
                importers.add(path.relative_to(package.parent).as_posix())
    assert importers <= ASYNCIO_ALLOWED, importers - ASYNCIO_ALLOWED
    assert importers, "the walk found no module at all: the paths are wrong"


def dsh_tools_public(module: str) -> set[str]:
    import importlib

    return set(importlib.import_module(module).__all__)


def test_sink_is_a_protocol() -> None:
    assert typing.Protocol in dsh_sched.Sink.__mro__ or getattr(
        dsh_sched.Sink, "_is_protocol", False
    )


def test_lazy_strategy_names_match_the_strategies_module() -> None:
    """dsh_sched.testing lists the strategy names statically (so that importing it needs no
    hypothesis); the list must not drift from the module it loads them from."""
    import dsh_sched._strategies as strategies
    import dsh_sched.testing as testing

    assert frozenset(strategies.__all__) == testing._STRATEGY_NAMES
    for name in strategies.__all__:
        assert getattr(testing, name) is getattr(strategies, name)

"""The house's layering, checked on every module of both packages (subpackages included).

- ``dsh_tools`` never imports ``dsh_sched`` (the inspect CLI's lazy catalogue aside, which
  ``tests/test_cli.py`` pins: it loads ``dsh_sched`` by name, never by an import statement).
- ``dsh_sched`` uses only public ``dsh_tools`` modules and names, and drives calls through
  ``dsh_tools.lowlevel``, never ``ToolRuntime.execute()``.
- Only the modules in :data:`ASYNCIO_ALLOWED` import ``asyncio``: the library runs on trio.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import dsh_sched
import dsh_tools

PACKAGES = {
    "dsh_tools": Path(dsh_tools.__file__).parent,
    "dsh_sched": Path(dsh_sched.__file__).parent,
}

#: The only modules that may import ``asyncio``, by dotted name: the asyncio bridge
#: (``dsh_sched.aio...``) and Code Mode's program runtimes, when they land. Adding one is
#: one line here; any other module importing asyncio fails the test below.
ASYNCIO_ALLOWED: frozenset[str] = frozenset(
    {
        # The asyncio bridge: a trio guest run inside a running asyncio loop.
        "dsh_sched._aio_portal",
        "dsh_sched._aio_calls",
        # Code Mode's in-process runtime: the program runs on a private asyncio loop.
        "dsh_tools._code_trusted",
        # The WASI guest: package data run by the sandbox's own interpreter, not by the
        # host; it imports asyncio only for programs that do.
        "dsh_tools._wasi._guest",
    }
)


def module_name(package: str, path: Path) -> str:
    relative = path.relative_to(PACKAGES[package]).with_suffix("")
    parts = [package, *relative.parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(package: str) -> dict[str, Path]:
    """Every module of ``package``, subpackages included, by dotted name."""
    root = PACKAGES[package]
    return {module_name(package, path): path for path in sorted(root.rglob("*.py"))}


def imports(path: Path, name: str) -> list[tuple[str, list[str]]]:
    """``(module, names)`` for every import in module ``name`` (at ``path``), at any depth
    (inside functions too), ``importlib.import_module("...")`` and ``__import__("...")``
    included; a relative import is resolved against the module's own package."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            found.append((base, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.args[0].value, []))
    return found


def top(module: str) -> str:
    return module.split(".")[0]


def test_every_module_is_read_subpackages_included() -> None:
    names = set(modules("dsh_sched")) | set(modules("dsh_tools"))
    # One module of each subpackage: a scan that skipped subpackages would miss them.
    assert {"dsh_sched._demo._run", "dsh_sched.adapters._chat", "dsh_tools.examples"} <= names
    assert len(names) > 60


@pytest.mark.parametrize("name", sorted(modules("dsh_tools")))
def test_dsh_tools_never_imports_dsh_sched(name: str) -> None:
    for module, _ in imports(modules("dsh_tools")[name], name):
        assert top(module) != "dsh_sched", (name, module)


@pytest.mark.parametrize("name", sorted(modules("dsh_sched")))
def test_dsh_sched_uses_only_public_dsh_tools_names_and_never_execute(name: str) -> None:
    """README "Layering": public names only; calls are driven through lowlevel."""
    path = modules("dsh_sched")[name]
    assert ".execute(" not in path.read_text(encoding="utf-8"), name  # never ToolRuntime.execute()
    for module, names in imports(path, name):
        if top(module) != "dsh_tools":
            continue
        assert not any(part.startswith("_") for part in module.split(".")), (name, module)
        public = set(importlib.import_module(module).__all__)
        assert set(names) <= public, (name, module, set(names) - public)


def asyncio_importers(scanned: dict[str, Path]) -> set[str]:
    return {
        name
        for name, path in scanned.items()
        if any(top(module) == "asyncio" for module, _ in imports(path, name))
    }


def test_only_the_allowed_modules_import_asyncio() -> None:
    """The library runs on trio; asyncio is for the asyncio bridge and Code Mode's program
    runtimes only. A stale entry fails too, so the list stays exactly the importers."""
    assert asyncio_importers(modules("dsh_tools") | modules("dsh_sched")) == set(ASYNCIO_ALLOWED)


def test_the_import_scan_sees_every_form_of_import(tmp_path: Path) -> None:
    """The checks above can fail: the scan finds asyncio and dsh_sched however they are
    imported, at any depth, and resolves relative imports."""
    probe = tmp_path / "_probe.py"
    probe.write_text(
        "import importlib\n"
        "from . import _json\n"
        "def f():\n"
        "    import asyncio.events\n"
        "    from ..dsh_sched import run_tool_calls\n"
        "    return importlib.import_module('asyncio'), __import__('dsh_sched')\n",
        encoding="utf-8",
    )
    found = [module for module, _ in imports(probe, "dsh_tools._probe")]
    assert found == [
        "importlib",
        "dsh_tools",
        "asyncio.events",
        "dsh_sched",
        "asyncio",
        "dsh_sched",
    ]
    assert asyncio_importers({"dsh_tools._probe": probe}) == {"dsh_tools._probe"}
    relative = imports(PACKAGES["dsh_sched"] / "_demo" / "_run.py", "dsh_sched._demo._run")
    assert ("dsh_sched._batch", ["DEFAULT_MAX_PARALLEL", "open_batch"]) in relative


def test_no_module_of_the_library_exceeds_500_lines() -> None:
    """A module past ~500 lines holds several concepts (STYLE): split it along them."""
    too_long = {}
    for package in (dsh_tools, dsh_sched):
        root = Path(str(package.__file__)).parent
        for path in root.rglob("*.py"):
            lines = path.read_text(encoding="utf-8").count("\n")
            if lines > 500:
                too_long[path.relative_to(root.parent).as_posix()] = lines
    assert too_long == {}

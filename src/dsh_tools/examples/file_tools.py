"""Example tools written with ``@tool``: file tools confined to one directory.

They ship with the package so that ``python -m dsh_sched demo`` and the scripts in the
repository's ``examples/`` folder can use them from any install; importing this module
registers nothing.

Reads are parallel-safe (the scheduler runs them together); writes are exclusive (each runs
alone, as a barrier). Every path is resolved inside the workspace given at start; a path
that escapes it fails with the stable code ``PATH_OUTSIDE_WORKSPACE``.

Example:
    >>> runtime = ToolRuntime()  # doctest: +SKIP
    >>> for definition in file_tools(Path("/tmp/workspace")):  # doctest: +SKIP
    ...     runtime.register(definition)
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Literal

import attrs
import trio

from dsh_tools import HarnessError, ToolDefinition, tool

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "FileError",
    "FileInfo",
    "PathOutsideWorkspaceError",
    "WriteReceipt",
    "file_tools",
]


class PathOutsideWorkspaceError(HarnessError):
    """A path resolved outside the workspace (code ``PATH_OUTSIDE_WORKSPACE``)."""

    def __init__(self, path: str) -> None:
        super().__init__(f'path "{path}" is outside the workspace', "PATH_OUTSIDE_WORKSPACE")


class FileError(HarnessError):
    """A file operation failed (code ``FILE_ERROR``); the message names the workspace path."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "FILE_ERROR")


@attrs.frozen
class FileInfo:
    """What ``stat`` reports about one entry."""

    path: str
    kind: Literal["file", "directory"]
    size: int


@attrs.frozen
class WriteReceipt:
    """What a write did."""

    path: str
    bytes_written: int
    mode: Literal["overwrite", "append"]


def file_tools(root: Path) -> list[ToolDefinition]:
    """Build the file tools for a workspace directory (created if missing).

    Args:
        root: The workspace; no tool reads or writes outside it.

    Returns:
        ``list_dir``, ``read_file`` and ``stat`` (parallel-safe), ``write_file`` and
        ``delete_file`` (exclusive).
    """
    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)

    def inside(path: str) -> Path:
        # Resolve symlinks and ".." first, then check: a link pointing out is refused too.
        target = (root / path).resolve()
        if target != root and root not in target.parents:
            raise PathOutsideWorkspaceError(path)
        return target

    def relative(target: Path) -> str:
        return target.relative_to(root).as_posix() or "."

    def failed(path: str, exc: OSError) -> FileError:
        # Report the workspace-relative path, never the host's absolute one.
        return FileError(f'{exc.strerror or type(exc).__name__}: "{path}"')

    @tool(is_concurrency_safe=True)
    async def list_dir(
        path: Annotated[str, "A directory inside the workspace."] = ".",
    ) -> list[str]:
        """List a directory's entries, sorted; directories end with "/"."""
        target = trio.Path(inside(path))
        entries = []
        try:
            for entry in await target.iterdir():
                is_dir = await entry.is_dir()
                entries.append(entry.name + ("/" if is_dir else ""))
        except OSError as exc:
            raise failed(path, exc) from None
        return sorted(entries)

    @tool(is_concurrency_safe=True)
    async def read_file(
        path: Annotated[str, "A file inside the workspace."],
        max_bytes: Annotated[int, "Read at most this many bytes."] = 65536,
    ) -> str:
        """Read a UTF-8 text file (invalid bytes are replaced)."""
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        try:
            async with await trio.open_file(inside(path), "rb") as handle:
                data = await handle.read(max_bytes)
        except OSError as exc:
            raise failed(path, exc) from None
        return data.decode("utf-8", errors="replace")

    @tool(is_concurrency_safe=True)
    async def stat(path: Annotated[str, "A file or directory inside the workspace."]) -> FileInfo:
        """Describe one file or directory."""
        target = inside(path)
        try:
            info = await trio.to_thread.run_sync(os.stat, target)
        except OSError as exc:
            raise failed(path, exc) from None
        kind: Literal["file", "directory"] = "directory" if target.is_dir() else "file"
        return FileInfo(path=relative(target), kind=kind, size=info.st_size)

    @tool
    async def write_file(
        path: Annotated[str, "A file inside the workspace; parents are created."],
        content: str,
        mode: Literal["overwrite", "append"] = "overwrite",
    ) -> WriteReceipt:
        """Write text to a file, replacing it or appending to it."""
        target = inside(path)
        data = content.encode("utf-8")
        try:
            await trio.Path(target.parent).mkdir(parents=True, exist_ok=True)
            async with await trio.open_file(target, "wb" if mode == "overwrite" else "ab") as f:
                await f.write(data)
        except OSError as exc:
            raise failed(path, exc) from None
        return WriteReceipt(path=relative(target), bytes_written=len(data), mode=mode)

    @tool
    async def delete_file(path: Annotated[str, "A file inside the workspace."]) -> str:
        """Delete one file."""
        target = inside(path)
        try:
            await trio.Path(target).unlink()
        except OSError as exc:
            raise failed(path, exc) from None
        return f"deleted {relative(target)}"

    return [list_dir, read_file, stat, write_file, delete_file]

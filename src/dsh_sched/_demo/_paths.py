"""Where the demo writes: its output directory and its workspace, checked before any write.

The demo writes in two directories. In the output directory it writes ``session.jsonl``
and ``timeline.svg`` (replacing a previous run's) and touches nothing else. In the
workspace it creates its own files, which the file tools then read, overwrite and append
to, so the workspace must be the demo's alone: a directory that does not exist yet, or an
empty one. Nothing of the user's is ever replaced or deleted.

:func:`check_paths` refuses what cannot work up front (blocking I/O: a few ``stat`` calls),
and :func:`reported_as` turns an ``OSError`` that still happens while creating the
directories (a race, or a failure the checks cannot foresee) into the same
:class:`DemoPathError`.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Literal, TypeAlias, final

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

__all__ = [
    "SESSION_LOG_NAME",
    "TIMELINE_NAME",
    "Argument",
    "DemoPathError",
    "check_paths",
    "reported_as",
]

SESSION_LOG_NAME = "session.jsonl"
TIMELINE_NAME = "timeline.svg"

#: The ``run_demo`` argument a :class:`DemoPathError` is about.
Argument: TypeAlias = Literal["out_dir", "workspace"]

_NEW_OR_EMPTY = "pass a new or empty directory"


@final
class DemoPathError(ValueError):
    """The demo cannot use its output directory or its workspace.

    Raised by ``run_demo`` (and :func:`check_paths`) before the batch starts, having
    changed nothing of the user's: the path is not a directory, cannot be created or
    written to, the workspace is not empty, or the output directory lies in the workspace.

    Attributes:
        argument: Which path is at fault: ``"out_dir"`` or ``"workspace"``.
    """

    def __init__(self, argument: Argument, message: str) -> None:
        super().__init__(message)
        self.argument: Argument = argument


def _creatable(path: Path) -> str | None:
    """Why the missing directory ``path`` cannot be created, or ``None``."""
    # The nearest existing ancestor is the directory a ``mkdir(parents=True)`` writes in.
    ancestor = next(parent for parent in path.resolve().parents if parent.exists())
    if not ancestor.is_dir():
        return f"cannot create {path}: {ancestor} is not a directory"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"cannot create {path}: {ancestor} is not writable"
    return None


def _directory_problem(path: Path, *, fix: str) -> str | None:
    """Why the demo cannot write in the directory ``path``, or ``None``."""
    if not path.exists():
        return _creatable(path)
    if not path.is_dir():
        return f"{path} is not a directory: {fix}"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"{path} is not writable: {fix}"
    return None


def _workspace_problem(workspace: Path) -> str | None:
    problem = _directory_problem(workspace, fix=_NEW_OR_EMPTY)
    if problem is None and workspace.exists() and any(workspace.iterdir()):
        # The file tools overwrite and append to the demo's files: never to the user's.
        return f"{workspace} is not empty; the demo writes its own files there: {_NEW_OR_EMPTY}"
    return problem


def _out_dir_problem(out_dir: Path, workspace: Path | None) -> str | None:
    fix = f"pass a directory for {SESSION_LOG_NAME} and {TIMELINE_NAME}"
    problem = _directory_problem(out_dir, fix=fix)
    if problem is not None:
        return problem
    for name in (SESSION_LOG_NAME, TIMELINE_NAME):
        target = out_dir / name
        if target.exists() and not target.is_file():
            return f"{target} is not a file, so the demo cannot replace it: {fix}"
    if workspace is not None:
        out, root = out_dir.resolve(), workspace.resolve()
        if out == root or root in out.parents:
            # The file tools would list (and could change) the demo's own output.
            return f"{out_dir} is inside the workspace {workspace}: pass a directory outside it"
    return None


def check_paths(out_dir: Path, workspace: Path | None) -> None:
    """Check that the demo can write in ``out_dir`` and ``workspace`` (blocking I/O).

    Each must be a directory the user can write to, or a missing one that can be created.
    The workspace must also be empty (the demo creates its own files there), and
    ``out_dir`` must not lie in it. ``session.jsonl`` and ``timeline.svg`` in ``out_dir``,
    if present, must be files: the demo replaces them.

    Args:
        out_dir: Where the session log and the timeline go.
        workspace: The file tools' directory, or ``None`` if it is not chosen yet.

    Raises:
        DemoPathError: One of them cannot be used; its ``argument`` says which.
    """
    if workspace is not None:
        with reported_as("workspace", workspace):
            problem = _workspace_problem(workspace)
        if problem is not None:
            raise DemoPathError("workspace", problem)
    with reported_as("out_dir", out_dir):
        problem = _out_dir_problem(out_dir, workspace)
    if problem is not None:
        raise DemoPathError("out_dir", problem)


@contextlib.contextmanager
def reported_as(argument: Argument, path: Path) -> Iterator[None]:
    """Turn an ``OSError`` raised in the block into a :class:`DemoPathError` for ``argument``.

    Args:
        argument: Which path the block works on.
        path: That path, named in the message when the error names no file.

    Raises:
        DemoPathError: The block raised an ``OSError`` (chained as its cause).
    """
    try:
        yield
    except OSError as exc:
        where = exc.filename if exc.filename is not None else path
        raise DemoPathError(argument, f"cannot use {where}: {exc.strerror or exc}") from exc

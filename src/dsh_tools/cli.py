"""The ``python -m dsh_tools`` command line, and the inspect report for embedding.

Example:
    >>> from dsh_tools.cli import inspect_report
    >>> print(inspect_report("events", "tools/result"))  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from ._inspect import UnknownEntryError
from ._inspect import report as inspect_report

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["UnknownEntryError", "inspect_report", "main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dsh_tools", description="Tools for working with dsh_tools."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    inspect = commands.add_parser(
        "inspect",
        help="print the public API of both packages and the hook events",
        description=(
            "Print the public API of dsh_tools and dsh_sched (every name, with its signature"
            " or members) and the hook events, built from the live code. Give a section and"
            " a name for one entry in full, e.g. `inspect api run_tool_calls`."
        ),
    )
    inspect.add_argument("section", nargs="?", choices=("api", "events"), help="one section")
    inspect.add_argument("name", nargs="?", help="one catalogued entry of that section")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (usage errors exit 2 via argparse)."""
    args = _parser().parse_args(argv)
    try:
        text = inspect_report(args.section, args.name)
    except UnknownEntryError as exc:
        print(exc, file=sys.stderr)
        return 1
    try:
        sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.flush()
    except OSError as exc:
        # A full disk, a closed pipe (``| head``): say so in one line, not a traceback.
        _quiet_stdout()
        print(f"cannot write the report: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's final flush of what could not
    be written does not fail again at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # not a real file: nothing will be flushed to it at exit

"""The ``python -m dsh_tools`` command line, and the inspect report for embedding.

Example:
    >>> from dsh_tools.cli import inspect_report
    >>> print(inspect_report("events", "tools/result"))  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import os
import sys
from functools import partial
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
    inspect.add_argument(
        "section",
        nargs="?",
        choices=("api", "events", "mcp"),
        help="one section; mcp: describe an MCP server's tools (see `inspect mcp --help`)",
    )
    inspect.add_argument("name", nargs="?", help="one catalogued entry of that section")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (usage errors exit 2 via argparse)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["inspect", "mcp"]:
        return _inspect_mcp(argv[2:])
    args = _parser().parse_args(argv)
    try:
        text = inspect_report(args.section, args.name)
    except UnknownEntryError as exc:
        print(exc, file=sys.stderr)
        return 1
    return _write(text)


def _write(text: str) -> int:
    try:
        sys.stdout.buffer.write(text.encode("utf-8"))
        sys.stdout.flush()
    except OSError as exc:
        # A full disk, a closed pipe (``| head``): say so in one line, not a traceback.
        _quiet_stdout()
        print(f"cannot write the report: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


def _mcp_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dsh_tools inspect mcp",
        description="Connect to an MCP server and print its tools as dsh-trio registers them: "
        "name, execution mode, approval, and whether the schema is in the supported subset.",
        epilog="examples: inspect mcp -- uvx some-server --flag; inspect mcp http://127.0.0.1:8000/mcp",
    )
    parser.add_argument("--trusted", action="store_true", help="believe the server's hints")
    parser.add_argument("--prefix", default="", help="put before every registered name")
    parser.add_argument(
        "server", nargs="+", help="an http(s):// URL, or (after --) a command and its arguments"
    )
    return parser


def _inspect_mcp(argv: list[str]) -> int:
    """``inspect mcp``: its own parser, and ``mcp`` imported only when it is used."""
    parser = _mcp_parser()
    args = parser.parse_args(argv)
    try:
        import trio
        from mcp import StdioServerParameters

        from .mcp._inspect import report
    except ImportError:
        print(
            "inspect mcp requires the mcp package (mcp>=2,<3): pip install 'dsh-trio[mcp]'",
            file=sys.stderr,
        )
        return 1
    server: str | StdioServerParameters = args.server[0]
    if not args.server[0].startswith(("http://", "https://")):
        server = StdioServerParameters(command=args.server[0], args=args.server[1:])
    elif len(args.server) > 1:
        parser.error("a URL takes no further arguments")
    try:
        text = trio.run(partial(report, server, trusted=args.trusted, prefix=args.prefix))
    except ValueError as exc:  # a bad --prefix
        parser.error(str(exc))
    except Exception as exc:
        print(f"cannot inspect the MCP server: {_first_leaf(exc)}", file=sys.stderr)
        return 1
    return _write(text)


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's final flush of what could not
    be written does not fail again at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # not a real file: nothing will be flushed to it at exit

"""``python -m dsh_sched``: the command line (one command, ``demo``).

``python -m dsh_sched demo`` runs a scripted model batch over the example tools with live
progress, prints the committed results in model order, and writes the JSONL session log and
an SVG timeline of the batch (see :func:`dsh_sched._demo.run_demo`). Usage errors exit 2,
among them an output directory or a workspace the demo cannot use: the demo never replaces
or deletes a file of the user's.

Example:
    $ python -m dsh_sched demo --max-parallel 2 --abort-after 0.6 --out demo-out
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from ._batch import DEFAULT_MAX_PARALLEL

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]

#: The option behind each ``run_demo`` path argument, for ``DemoPathError`` messages.
_OPTIONS = {"out_dir": "--out", "workspace": "--workspace"}


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(
            f"expected a finite, non-negative number of seconds, got {text!r}"
        )
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dsh_sched",
        description=(
            "The dsh_sched batch scheduler's command line. "
            "`python -m dsh_sched COMMAND --help` describes one command."
        ),
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="command")
    demo = commands.add_parser(
        "demo",
        # One line in an 80-column `--help` (the description below says the rest).
        help="run a scripted batch of tool calls, with live progress",
        description=(
            "Run a scripted batch of 13 model tool calls over the example file tools: "
            "parallel-safe reads, exclusive writes, a slow call, a failing call and a denied "
            "call. Prints live progress and the committed results in model order, and writes "
            "the JSONL session log and an SVG timeline of the batch."
        ),
    )
    demo.add_argument(
        "--max-parallel",
        type=_positive_int,
        default=DEFAULT_MAX_PARALLEL,
        metavar="N",
        help="most parallel-safe bodies running at once (default: %(default)s)",
    )
    demo.add_argument(
        "--abort-after",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help=(
            "fire the batch Abort after SECONDS (0: before the batch starts) to watch "
            "started calls drain and the rest get synthetic results"
        ),
    )
    demo.add_argument(
        "--out",
        type=Path,
        default=Path("demo-out"),
        metavar="DIR",
        help=(
            "the directory where the demo writes session.jsonl and timeline.svg, created if "
            "missing; those two files are replaced, nothing else there is touched "
            "(default: ./demo-out)"
        ),
    )
    demo.add_argument(
        "--workspace",
        type=Path,
        default=None,
        metavar="DIR",
        help=(
            "the file tools' directory, kept afterwards: a new or empty directory, where the "
            "demo creates its own files (it refuses any other); --out must not be inside it "
            "(default: a temporary directory, removed afterwards)"
        ),
    )
    demo.add_argument(
        "--plain", action="store_true", help="plain text output, even if rich is installed"
    )
    demo.add_argument(
        "--code-mode",
        action="store_true",
        help=(
            "present the tools in Code Mode: the scripted model sends one run_code program "
            "that calls them (in the WebAssembly sandbox when the codemode extra is installed)"
        ),
    )
    # main() reports the demo's path errors as this command's usage errors.
    demo.set_defaults(command_parser=demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line.

    Args:
        argv: The arguments (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 0 on success, 130 when interrupted. Usage errors exit 2 (argparse).
    """
    args = _parser().parse_args(argv)
    # Only one command so far: "demo". Imported here so that `--help` stays instant.
    from ._demo import DemoPathError, check_paths, open_console, run_demo
    from ._demo._script import default_code_runtime

    command_parser: argparse.ArgumentParser = args.command_parser
    try:
        # Up front, before any output. run_demo checks again before it writes (the
        # directories may change meanwhile) and reports a failure to create them the same way.
        check_paths(args.out, args.workspace)
        console = open_console(plain=args.plain)
        code_runtime = None
        if args.code_mode:
            code_runtime, note = default_code_runtime()
            print(note)
        run = functools.partial(
            run_demo,
            out_dir=args.out,
            max_parallel=args.max_parallel,
            abort_after=args.abort_after,
            console=console,
            code_mode=args.code_mode,
            code_runtime=code_runtime,
        )
        if args.workspace is not None:
            trio.run(functools.partial(run, workspace=args.workspace))
        else:
            with tempfile.TemporaryDirectory(prefix="dsh-demo-") as temporary:
                trio.run(functools.partial(run, workspace=Path(temporary)))
    except DemoPathError as exc:
        command_parser.error(f"argument {_OPTIONS[exc.argument]}: {exc}")
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":  # pragma: no cover - run by `python -m`, tested in a subprocess
    sys.exit(main())

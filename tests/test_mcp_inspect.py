"""``python -m dsh_tools inspect mcp``: a server's tools as dsh-trio would register them."""

from __future__ import annotations

import socket
import sys

import pytest

from dsh_tools.cli import main
from tests.mcp_helpers import DEMO, LOWLEVEL


def test_inspect_mcp_over_stdio_lists_mode_approval_and_schema(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["inspect", "mcp", "--trusted", "--", sys.executable, str(DEMO)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "## mcp demo (protocol 2026-07-28, trusted)"
    assert out[1] == "- add [PARALLEL] approval: none, schema: supported"
    assert out[2] == "- write_note [EXCLUSIVE] approval: asks (destructive), schema: supported"
    assert out[-1] == (
        "- weird [EXCLUSIVE] approval: asks (destructive), schema: outside the subset "
        "(the server checks)"
    )
    assert len(out) == 11


def test_inspect_mcp_reports_skipped_tools(capsys: pytest.CaptureFixture[str]) -> None:
    prefix = "p" * 62  # every name of the low-level server is then too long
    assert main(["inspect", "mcp", "--prefix", prefix, "--", sys.executable, str(LOWLEVEL)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        "## mcp lowlevel (protocol 2026-07-28, untrusted: every tool runs alone and asks)",
        "(no tools registered)",
        "skipped:",
    ]
    assert out[3] == f'- "add": registered name "{prefix}add" must have 1 to 64 characters'
    assert out[-1] == '- "image_error": ' + (
        f'registered name "{prefix}image_error" must have 1 to 64 characters'
    )


def test_inspect_mcp_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as sock:  # a port on which nothing listens
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert main(["inspect", "mcp", f"http://127.0.0.1:{port}/mcp"]) == 1
    assert capsys.readouterr().err.startswith("cannot inspect the MCP server: ")
    for argv in (
        ["inspect", "mcp"],
        ["inspect", "mcp", "http://127.0.0.1:1/mcp", "extra"],
        ["inspect", "mcp", "--prefix", "a.b", "--", "true"],
    ):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2
    assert "prefix may contain only" in capsys.readouterr().err


def test_inspect_mcp_without_the_sdk(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)
    assert main(["inspect", "mcp", "--", "true"]) == 1
    assert capsys.readouterr().err == (
        "inspect mcp requires the mcp package (mcp>=2,<3): pip install 'dsh-trio[mcp]'\n"
    )

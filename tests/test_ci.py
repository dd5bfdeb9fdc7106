"""CI's gates (``.ci/run``) stay what the house says they are.

CI runs the README's test command, measured by coverage, fails below 99 % branch coverage,
and runs every docstring example in ``src/``. A gate edited away, or a README command that
drifts from what CI runs, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def ci_lines() -> list[str]:
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_ci_runs_the_readme_test_command_under_coverage_with_a_99_percent_gate() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"&& (\.venv/bin/python -m pytest -q)\n", readme)
    assert found is not None, "the README's test command moved: update this test and .ci/run"
    measured = found.group(1).replace(" -m pytest", " -m coverage run -m pytest")
    lines = ci_lines()
    assert measured in lines
    gates = [line for line in lines if " -m coverage report" in line]
    assert len(gates) == 1
    threshold = re.search(r"--fail-under=(\d+(?:\.\d+)?)", gates[0])
    assert threshold is not None
    assert float(threshold.group(1)) >= 99
    # Subprocess data files are combined before the report reads them.
    combine = [i for i, line in enumerate(lines) if " -m coverage combine" in line]
    assert combine
    assert lines.index(measured) < combine[0] < lines.index(gates[0])


def test_ci_runs_the_docstring_examples_of_src() -> None:
    assert ".venv/bin/python -m pytest -q --doctest-modules src" in ci_lines()


def test_ci_stops_at_the_first_failing_gate() -> None:
    assert "set -euo pipefail" in ci_lines()


def test_ci_builds_the_docs_site_with_the_readme_command_and_warnings_as_errors() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(
        r"^(\.venv/bin/python -m sphinx -W -b html docs docs/_build/html)$", readme, re.M
    )
    assert found is not None, "the README's docs command moved: update this test and .ci/run"
    assert found.group(1) in ci_lines()


def test_ci_installs_chromium_only_when_it_is_missing() -> None:
    """The browser test needs Chromium; .ci/run installs it before the tests, guarded."""
    lines = [line.strip() for line in ci_lines()]
    guard = lines.index("if ! command -v chromium >/dev/null 2>&1; then")
    install = next(i for i, line in enumerate(lines) if "apt-get install -y" in line)
    tests = lines.index(".venv/bin/python -m coverage run -m pytest -q")
    assert guard < install < tests

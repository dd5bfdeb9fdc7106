"""``tests/CONFORMANCE.md`` is current and maps every implemented conformance ID."""

from __future__ import annotations

from tests import conformance


def test_every_implemented_id_has_a_test_or_a_reason() -> None:
    cited = conformance.cited_ids()
    ids = conformance.spec_ids()
    assert len(ids) > 300  # the groups R V M P C J H T I S
    missing = [i for i in ids if i not in cited and i not in conformance.NOT_APPLICABLE]
    assert missing == []


def test_checklist_file_is_current() -> None:
    assert conformance.OUTPUT.read_text(encoding="utf-8") == conformance.render(), (
        "tests/CONFORMANCE.md is stale: run `python -m tests.conformance`"
    )


def test_the_repository_stands_alone() -> None:
    """No file of the project reaches for the specification's folder beside the checkout: a
    user's clone has only the repository (the map above reads its IDs from the committed
    file unless ``DSH_SPEC_DIR`` is set)."""
    root = conformance.TESTS.parent
    # Spelled in pieces so that this file does not match itself.
    needles = (".." + "/shared", "shared" + "/spec")
    offenders: list[str] = []
    for folder in ("src", "tests", "benches", "examples", "docs", ".ci"):
        for path in sorted((root / folder).rglob("*")):
            if not path.is_file() or path.suffix in {".pyc", ".png", ".svg"}:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            offenders.extend(f"{path.relative_to(root)}: {n}" for n in needles if n in text)
    readme = (root / "README.md").read_text(encoding="utf-8")
    offenders.extend(f"README.md: {n}" for n in needles if n in readme)
    assert offenders == []

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

"""The pure scheduling state machine (dsh_tools._lane_plan; scheduler.md §4), without trio.

These tests import the private ``_lane_plan`` module on purpose: it is the sync core the driver
is built on, tested like h11's state machine, with plain objects for executions and steps.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_tools._lane_plan import GroupPlan, QueuePlan


def group(size: int = 4, *, parallel: bool = True, max_parallel: int = 2) -> GroupPlan[str, str]:
    return GroupPlan(10, size, parallel=parallel, max_parallel=max_parallel)


def test_s009_pool_bounded_by_max_parallel_running_dispatches() -> None:
    g = group()
    assert g.can_start()
    g.started("e0")
    g.dispatching()
    g.started("e1")
    g.dispatching()
    assert not g.can_start()  # two dispatches in flight, max_parallel=2
    g.dispatched(1, "s1")  # a later call finishes first
    assert g.can_start()  # finished-but-uncommitted results do not occupy the pool (§4.3)
    assert g.ready() is None  # head of line still running (S-005)


def test_s005_head_of_line_commit_order() -> None:
    g = group()
    for e in ("e0", "e1", "e2"):
        g.started(e)
        g.dispatching()
    g.dispatched(2, "s2")
    g.dispatched(1, "s1")
    assert g.ready() is None
    g.dispatched(0, "s0")
    committed = []
    while (step := g.ready()) is not None:
        committed.append((g.commit_index(), step))
        g.committed()
    assert committed == [(10, "s0"), (11, "s1"), (12, "s2")]
    assert g.done()


def test_store_without_dispatch_is_ready_at_once() -> None:
    g = group(parallel=False, size=1)
    gi = g.started("e0")
    g.store(gi, "final")
    assert g.running == 0
    assert g.ready() == "final"


def test_reclassification_only_after_the_first_start_of_a_parallel_group() -> None:
    g = group()
    assert not g.needs_reclassification()
    g.started("e0")
    assert g.needs_reclassification()
    exclusive = group(size=1, parallel=False)
    exclusive.started("e0")
    assert not exclusive.needs_reclassification()


def test_stop_ends_starts_and_records_an_observed_abort() -> None:
    g = group()
    g.stop()
    assert not g.can_start()
    assert not g.observed_abort
    h = group()
    h.stop(abort=True)
    assert h.observed_abort


def test_group_is_exhausted_after_its_last_start() -> None:
    g = group(size=2, max_parallel=5)
    g.started("e0")
    g.started("e1")
    assert not g.can_start()
    assert g.next_index() == 12


def test_uncommitted_lists_started_calls_with_their_steps() -> None:
    g = group(max_parallel=3)
    for e in ("e0", "e1", "e2"):
        g.started(e)
    g.dispatching()
    g.store(0, "s0")
    g.committed()
    g.dispatched(2, "s2")
    assert g.uncommitted() == [(11, "e1", None), (12, "e2", "s2")]


def test_dispatched_without_a_step_leaves_a_hole() -> None:
    g = group()
    g.started("e0")
    g.dispatching()
    g.dispatched(0, None)
    assert g.running == 0
    assert g.ready() is None
    assert not g.done()


def test_committed_forgets_state_and_refuses_to_overrun() -> None:
    g = group()
    g.started("e0")
    g.store(0, "s0")
    g.committed()
    assert g.uncommitted() == []
    with pytest.raises(RuntimeError, match="nothing started"):
        g.committed()


@pytest.mark.parametrize(
    ("size", "parallel"), [(0, True), (2, False)], ids=["empty", "exclusive-of-two"]
)
def test_invalid_groups_are_rejected(size: int, parallel: bool) -> None:
    with pytest.raises(ValueError, match="group"):
        GroupPlan(0, size, parallel=parallel, max_parallel=1)


def test_batch_plan_groups_and_synthetic_suffix() -> None:
    plan = QueuePlan(5)
    assert plan.group_size(exclusive=True) == 1
    assert plan.group_size(exclusive=False) == 5
    plan.advance(2)
    assert plan.group_size(exclusive=False) == 3
    assert plan.pending()
    assert [plan.take_unstarted(), plan.take_unstarted(), plan.take_unstarted()] == [2, 3, 4]
    assert plan.take_unstarted() is None
    assert not plan.pending()


def test_batch_plan_rejects_bad_advances() -> None:
    plan = QueuePlan(2)
    with pytest.raises(ValueError, match="cannot advance"):
        plan.advance(3)
    with pytest.raises(ValueError, match="cannot advance"):
        plan.advance(-1)


# A model-based property: random interleavings of the driver's moves never break the
# pool bound, never commit out of order, and end with every started call committed.

_moves = st.lists(st.tuples(st.sampled_from(["start", "finish", "commit"]), st.integers(0, 20)))


@given(size=st.integers(1, 12), max_parallel=st.integers(1, 4), moves=_moves)
def test_random_interleavings_keep_the_pool_bound_and_model_order(
    size: int, max_parallel: int, moves: list[tuple[str, int]]
) -> None:
    g: GroupPlan[int, int] = GroupPlan(0, size, parallel=True, max_parallel=max_parallel)
    in_flight: list[int] = []
    committed: list[int] = []
    for move, pick in moves:
        if move == "start" and g.can_start():
            gi = g.started(g.next_index())
            g.dispatching()
            in_flight.append(gi)
        elif move == "finish" and in_flight:
            gi = in_flight.pop(pick % len(in_flight))
            g.dispatched(gi, gi)
        elif move == "commit" and (step := g.ready()) is not None:
            assert step == g.to_commit
            committed.append(g.commit_index())
            g.committed()
        assert 0 <= g.running <= max_parallel
        assert g.running == len(in_flight)
    for gi in list(in_flight):
        g.dispatched(gi, gi)
    while g.ready() is not None:
        committed.append(g.commit_index())
        g.committed()
    assert committed == list(range(g.to_start))
    assert g.done()


def test_an_open_queue_grows_until_closed() -> None:
    """code-mode §5: a Code Mode program's queue grows while the lane runs."""
    plan = QueuePlan(closed=False)
    assert not plan.pending()
    plan.extend(2)
    assert plan.pending()
    assert plan.group_size(exclusive=False) == 2
    plan.advance(2)
    assert not plan.pending()
    plan.extend(1)
    assert plan.take_unstarted() == 2
    plan.close()
    plan.close()  # idempotent
    with pytest.raises(ValueError, match="the queue is closed"):
        plan.extend(1)
    with pytest.raises(ValueError, match="cannot extend the queue by -1"):
        QueuePlan(closed=False).extend(-1)


def test_a_parallel_group_grows_with_its_queue() -> None:
    g: GroupPlan[str, str] = GroupPlan(0, 1, parallel=True, max_parallel=3)
    g.started("a")
    assert not g.can_start()
    g.grow(2)
    assert g.can_start()
    assert g.size == 3
    exclusive: GroupPlan[str, str] = GroupPlan(0, 1, parallel=False, max_parallel=3)
    with pytest.raises(ValueError, match="an exclusive group does not grow"):
        exclusive.grow(1)

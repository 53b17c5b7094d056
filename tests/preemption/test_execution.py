"""A plan's evictions as pure state: the order, the retries, all or none, the refusal backoff."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.model.pod import PodView
from batchsched.preemption.execution import (
    EVICTION_RETRY_S,
    Answer,
    Execution,
    Refusals,
    backoff_s,
    eviction_order,
)
from batchsched.preemption.model import budgets_exceeded
from tests.preemption.scenario import budget, pod


def victims(count: int) -> tuple[PodView, ...]:
    return tuple(pod(f"v{i}", 1, node="n1") for i in range(count))


@pytest.mark.parametrize(
    ("attempts", "seconds"),
    [(1, 5.0), (2, 10.0), (3, 20.0), (6, 160.0), (9, 160.0)],
    ids=["the first", "doubled", "doubled again", "reaches the cap", "stays at the cap"],
)
def test_the_refusal_backoff(attempts: int, seconds: float) -> None:
    assert backoff_s(attempts, 5.0, 160.0) == seconds


def test_victims_a_budget_covers_are_evicted_first_otherwise_as_planned() -> None:
    plain = pod("a", 1, node="n1"), pod("b", 1, node="n1")
    covered = pod("db", 1, node="n1", labels={"app": "db"})
    order = eviction_order((*plain, covered), [budget("db", 1, app="db")])
    assert [p.name for p in order] == ["db", "a", "b"]


def test_after_the_covered_victims_those_on_the_nominated_nodes_go_before_the_others() -> None:
    # The preemptor waits for the room on its nominated nodes only: the rest of a victim
    # gang elsewhere may go after it was placed.
    elsewhere = pod("gang-0", 1, node="n0"), pod("gang-2", 1, node="n2")
    nominated = pod("gang-1", 1, node="n1"), pod("gang-3", 1, node="n3")
    covered = pod("db", 1, node="n2", labels={"app": "db"})
    victims = (elsewhere[0], nominated[0], elsewhere[1], nominated[1], covered)
    order = eviction_order(victims, [budget("db", 1, app="db")], {"n1", "n3"})
    assert [p.name for p in order] == ["db", "gang-1", "gang-3", "gang-0", "gang-2"]


def test_a_budget_is_exceeded_when_it_covers_more_victims_than_it_allows() -> None:
    covered = [pod(f"db-{i}", 1, node="n1", labels={"app": "db"}) for i in range(2)]
    within, short = budget("db", 2, app="db"), budget("db", 1, app="db")
    assert budgets_exceeded(covered, [within]) == ()
    (excess,) = budgets_exceeded(covered, [short])
    assert (
        excess.describe() == "PodDisruptionBudget ml/db (2 victims covered, 1 disruption allowed)"
    )


def test_before_it_started_a_plan_evicts_in_order_and_a_refusal_ends_it() -> None:
    execution = Execution(victims(3), give_up_at=100.0)
    first = execution.next_victim(0.0)
    assert first is not None and first.name == "v0"
    assert execution.answered(first, Answer.REFUSED, 0.0) is None
    assert execution.finished and execution.next_victim(50.0) is None
    assert not execution.started


def test_before_it_started_a_victim_waiting_for_its_retry_holds_the_others_back() -> None:
    execution = Execution(victims(2), give_up_at=100.0)
    first = execution.next_victim(0.0)
    assert first is not None
    assert execution.answered(first, Answer.FAILED, 0.0) == EVICTION_RETRY_S
    assert execution.next_victim(0.5) is None
    assert execution.next_retry() == EVICTION_RETRY_S
    assert execution.next_victim(1.0) is first


def test_once_started_a_plan_outlives_its_abandonment_and_retries_refusals() -> None:
    execution = Execution(victims(3), give_up_at=100.0)
    v0 = execution.next_victim(0.0)
    assert v0 is not None
    execution.answered(v0, Answer.ACCEPTED, 0.0)
    execution.abandon()  # the preemptor was placed
    v1 = execution.next_victim(0.0)
    assert v1 is not None and v1.name == "v1"
    assert execution.answered(v1, Answer.REFUSED, 0.0) == EVICTION_RETRY_S
    v2 = execution.next_victim(0.0)  # others go on while v1 waits
    assert v2 is not None and v2.name == "v2"
    execution.answered(v2, Answer.ACCEPTED, 0.0)
    assert execution.next_victim(0.5) is None and not execution.finished
    assert execution.next_victim(1.0) is v1
    execution.answered(v1, Answer.ACCEPTED, 1.0)
    assert execution.finished and len(execution.evicted) == 3


def test_a_plan_not_started_evicts_nothing_once_abandoned() -> None:
    execution = Execution(victims(2), give_up_at=100.0)
    execution.abandon()
    assert execution.next_victim(0.0) is None and execution.finished


def test_refusals_wait_out_a_growing_backoff_and_start_over_when_forgotten() -> None:
    refusals = Refusals()
    assert refusals.refuse("ml/high", "no", 0.0, ["u1"]).wait_s == 5.0
    assert refusals.waiting("ml/high", 4.9) is not None
    assert refusals.ended(4.9) == []
    assert [r.uids for r in refusals.ended(5.0)] == [("u1",)]
    assert refusals.ended(6.0) == []  # told once
    assert refusals.waiting("ml/high", 5.0) is None
    assert refusals.refuse("ml/high", "no", 5.0, ["u1"]).wait_s == 10.0
    refusals.forget_pod("u1")
    assert len(refusals) == 0
    assert refusals.refuse("ml/high", "no", 20.0, ["u1"]).wait_s == 5.0


ANSWERS = st.sampled_from([Answer.ACCEPTED, Answer.GONE, Answer.REFUSED, Answer.FAILED])


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 5),
    st.lists(st.one_of(ANSWERS, st.just("abandon")), max_size=30),
)
def test_every_victim_goes_or_none_does_and_no_victim_is_retried_at_once(
    count: int, script: list[Answer | str]
) -> None:
    """Drive an execution as the runtime does, with answers and abandonments in any order:
    evictions stop only when nothing was evicted; a victim is never tried again sooner than
    EVICTION_RETRY_S after it failed."""
    execution = Execution(victims(count), give_up_at=60.0)
    now, tried_at = 0.0, dict[str, float]()
    steps = iter(script)
    while not execution.finished:
        victim = execution.next_victim(now)
        if victim is None:
            due = execution.next_retry()
            assert due is not None and due > now
            now = due
            continue
        if victim.uid in tried_at:
            assert now - tried_at[victim.uid] >= EVICTION_RETRY_S
        tried_at[victim.uid] = now
        step = next(steps, Answer.ACCEPTED)
        while not isinstance(step, Answer):  # abandoned while its eviction is in flight
            execution.abandon()
            step = next(steps, Answer.ACCEPTED)
        execution.answered(victim, step, now)
        if execution.abandoned and not execution.started:
            assert execution.next_victim(now + 3600) is None
    if execution.started:
        done = execution.evicted | execution.gone | execution.given_up
        assert done == {v.uid for v in execution.victims}
    else:
        assert not execution.evicted

"""Hypothesis on the batch simulator: a gang that was backfilled while the head gang waited
never delayed it. Re-simulate without the backfilled gang: the head starts at the same time.

Runtimes are known and exact here (the promise a reservation makes rests on them), members of
a gang are alike, one tenant, so the head is the oldest gang that had to wait."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.sim.batch import BatchJob, BatchResult, BatchSimulator
from batchsched.sim.batch_workloads import default_profile, gang_job, gpu_cluster
from queues.model import QuotaPolicy, Tenant


@st.composite
def workloads(draw: st.DrawFn) -> tuple[int, list[BatchJob]]:
    """A gang holding some nodes, a wider one arriving behind it, and random gangs (mostly
    one member) arriving around them."""
    nodes = draw(st.integers(2, 4))
    held = draw(st.integers(1, nodes - 1))
    jobs = [
        gang_job("t/a-holds", "t", held, 8, 0.0, float(draw(st.integers(20, 100)))),
        gang_job(
            "t/b-wide",
            "t",
            draw(st.integers(held + 1, nodes)),
            8,
            1.0,
            float(draw(st.integers(5, 100))),
        ),
    ]
    for i in range(draw(st.integers(1, 12))):
        wide = draw(st.integers(0, 3)) == 0
        jobs.append(
            gang_job(
                f"t/c{i:02d}",
                "t",
                draw(st.integers(1, nodes)) if wide else 1,
                draw(st.sampled_from((1, 2, 4, 8))),
                float(draw(st.integers(0, 60))),
                float(draw(st.integers(5, 100))),
            )
        )
    return nodes, jobs


def _run(nodes: int, jobs: list[BatchJob], reservations: int) -> BatchResult:
    policy = QuotaPolicy({"t": Tenant("t")}, reservations=reservations)
    return BatchSimulator(gpu_cluster(nodes), default_profile(), policy).run(jobs)


@settings(max_examples=100, deadline=None)
@given(workloads(), st.integers(1, 3))
def test_removing_a_backfilled_gang_does_not_change_the_head_gang_s_start(
    workload: tuple[int, list[BatchJob]], reservations: int
) -> None:
    nodes, jobs = workload
    result = _run(nodes, jobs, reservations)
    records = result.log.jobs
    waited = sorted(
        (r.arrival, key) for key, r in records.items() if r.start is None or r.start > r.arrival
    )
    if not waited:
        return
    first, name = waited[0]
    head = records[name]
    if head.start is None:
        return  # it never fits: there is no promise to keep
    backfilled = [  # behind the head in order, started while it waited
        key
        for key, r in records.items()
        if r.start is not None
        and head.arrival <= r.start < head.start
        and (r.arrival, key) > (first, name)
    ]
    for key in backfilled[:3]:
        without = _run(nodes, [j for j in jobs if j.key != key], reservations)
        assert without.log.jobs[name].start == head.start, (key, name)

"""The seeded gang workload with topology requests (sim/topology_jobs.py)."""

from __future__ import annotations

from collections import Counter

import pytest

from batchsched.gang.topology import CLIQUE_LABEL, RACK_LABEL, ZONE_LABEL, TopologyRequest
from batchsched.model.resources import NVIDIA_GPU
from batchsched.sim.batch_jobs import BatchJob
from batchsched.sim.topology_jobs import TopologyMix, strip_topology, topology_jobs

MIX = TopologyMix(gangs=400)
JOBS = topology_jobs(MIX, seed=3)


def gpus_of(job_index: int) -> tuple[int, ...]:
    return tuple(p.requests.get(NVIDIA_GPU) for p in JOBS[job_index].members)


def drawn(jobs: list[BatchJob]) -> list[tuple[object, ...]]:
    return [
        (j.key, j.arrival, j.runtime, j.topology, tuple(p.requests for p in j.members))
        for j in jobs
    ]


def test_the_same_seed_draws_the_same_gangs_and_another_seed_others() -> None:
    assert drawn(topology_jobs(MIX, seed=3)) == drawn(JOBS)
    assert drawn(topology_jobs(MIX, seed=4)) != drawn(JOBS)


def test_gangs_arrive_in_order_and_run_within_the_range() -> None:
    arrivals = [job.arrival for job in JOBS]
    assert arrivals == sorted(arrivals) and arrivals[0] > 0
    assert all(600.0 <= job.runtime <= 3600.0 for job in JOBS)
    # Poisson: the mean gap is near the interval (400 draws).
    assert arrivals[-1] / len(JOBS) == pytest.approx(MIX.interval, rel=0.15)


def test_big_gangs_are_whole_nodes_and_small_ones_two_or_more_small_pods() -> None:
    for i, job in enumerate(JOBS):
        sizes = set(gpus_of(i))
        total = sum(gpus_of(i))
        assert len(sizes) == 1 and total in MIX.gang_gpus, job.key
        if total >= MIX.big_gpus:
            assert sizes == {8}, job.key
        else:
            assert sizes <= {1, 2, 4} and len(job.members) >= 2, job.key


def test_requests_are_mixed_and_a_required_clique_only_for_gangs_a_clique_holds() -> None:
    kinds = Counter(job.topology for job in JOBS)
    required_clique = TopologyRequest(CLIQUE_LABEL, True)
    assert kinds[TopologyRequest(RACK_LABEL, True)] / len(JOBS) == pytest.approx(0.3, abs=0.07)
    assert kinds[required_clique] > 0
    assert kinds[TopologyRequest(CLIQUE_LABEL, False)] / len(JOBS) > 0.4
    assert all(
        sum(gpus_of(i)) <= MIX.clique_gpus
        for i, j in enumerate(JOBS)
        if j.topology == required_clique
    )


def test_pod_group_carries_the_request_and_stripping_removes_it() -> None:
    job = JOBS[0]
    assert job.pod_group().topology == job.topology is not None
    assert job.pod_group().min_member == len(job.members)
    assert {j.topology for j in strip_topology(JOBS)} == {None}


def test_preferred_level_is_configurable() -> None:
    jobs = topology_jobs(TopologyMix(gangs=50, preferred=ZONE_LABEL), seed=1)
    assert TopologyRequest(ZONE_LABEL, False) in {j.topology for j in jobs}


def test_a_bad_mix_is_refused() -> None:
    with pytest.raises(ValueError, match="one weight per gang size"):
        TopologyMix(gang_gpus=(2, 4), weights=(1.0,))

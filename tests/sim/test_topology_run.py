"""Gangs with topology requests through the batch simulator, measured for domain tightness
(sim/topology_run.py). Domain choice itself is the workload cycle's (cycle/domains.py); the
tests that need it are skipped where the cycle has none yet."""

from __future__ import annotations

import dataclasses
import importlib.util

import pytest

from batchsched.gang.topology import CLIQUE_LABEL, RACK_LABEL, TopologyRequest
from batchsched.sim.batch_jobs import BatchJob
from batchsched.sim.batch_workloads import default_profile, gang_job
from batchsched.sim.tightness import Ended, Started
from batchsched.sim.topology_cluster import topology_cluster
from batchsched.sim.topology_jobs import TopologyMix, strip_topology, topology_jobs
from batchsched.sim.topology_run import domain_choice, run_topology, without_domains

needs_domain_choice = pytest.mark.skipif(
    importlib.util.find_spec("batchsched.cycle.domains") is None,
    reason="the workload cycle does not choose topology domains yet (cycle/domains.py)",
)


# Racks of 32 GPUs here: no gang bigger than one.
SMALL = TopologyMix(gangs=40, interval=20.0, gang_gpus=(2, 4, 8, 16, 32), weights=(1,) * 5)


def job(
    key: str, members: int, gpus: int, arrival: float, request: TopologyRequest | None
) -> BatchJob:
    return dataclasses.replace(
        gang_job(f"ml/{key}", "t", members, gpus, arrival, 100.0), topology=request
    )


def test_the_placement_log_records_each_member_s_node_and_each_end_in_order() -> None:
    nodes = topology_cluster(1, 4)
    jobs = [job("a", 2, 8, 0.0, None), job("b", 1, 8, 50.0, None)]
    run = run_topology(nodes, jobs, default_profile())
    events = run.events
    assert [type(e).__name__ for e in events] == ["Started", "Started", "Ended", "Ended"]
    first = events[0]
    assert isinstance(first, Started) and first.key == "ml/a" and first.at == 0.0
    assert len({node for node, _ in first.placed}) == 2
    assert isinstance(events[2], Ended) and events[2].key == "ml/a"
    assert run.summary.started == 2 and run.summary.unstarted == 0


def test_without_domains_drops_only_the_topology_domains_plugin() -> None:
    profile = default_profile()
    blind = without_domains(profile)
    assert not domain_choice(blind)
    assert [p.name for p in blind.pre_filter] == [
        p.name for p in profile.pre_filter if p.name != "TopologyDomains"
    ]


@needs_domain_choice
def test_with_domain_choice_every_required_request_is_honoured() -> None:
    nodes = topology_cluster(4, 4, racks_per_block=2)
    jobs = topology_jobs(SMALL, seed=2)
    profile = default_profile()
    assert domain_choice(profile)
    run = run_topology(nodes, jobs, profile)
    assert run.summary.required > 0
    assert run.summary.honoured == run.summary.required
    assert run.summary.unstarted == 0


@needs_domain_choice
def test_the_blind_baseline_is_judged_on_the_requests_it_was_not_given() -> None:
    nodes = topology_cluster(4, 4, racks_per_block=2)
    jobs = topology_jobs(SMALL, seed=2)
    requests = {j.key: j for j in jobs}
    run = run_topology(
        nodes, strip_topology(jobs), without_domains(default_profile()), requests=requests
    )
    assert run.summary.required == sum(
        1 for j in jobs if j.topology is not None and j.topology.required
    )


@needs_domain_choice
def test_a_gang_refused_its_required_clique_does_not_hold_back_one_alike_that_prefers_it() -> None:
    # Cliques of one 4-GPU node: a 2 x 4-GPU gang never fits one, but fits the rack.
    nodes = topology_cluster(1, 2, gpus_per_node=4, clique_nodes=1)
    jobs = [
        job("required", 2, 4, 1.0, TopologyRequest(CLIQUE_LABEL, True)),
        job("preferred", 2, 4, 2.0, TopologyRequest(CLIQUE_LABEL, False)),
    ]
    run = run_topology(nodes, jobs, default_profile(), mode="greedy")
    records = run.result.log.jobs
    assert records["ml/required"].start is None
    assert records["ml/preferred"].wait == 0.0


@needs_domain_choice
def test_a_required_rack_gang_waits_for_a_rack_rather_than_spanning_two() -> None:
    nodes = topology_cluster(2, 2, racks_per_block=1)
    jobs = [
        job("half", 1, 8, 0.0, None),
        job("other-half", 1, 8, 0.0, None),
        job("rack", 2, 8, 1.0, TopologyRequest(RACK_LABEL, True)),
    ]
    run = run_topology(nodes, jobs, default_profile(), mode="greedy")
    (gang,) = [g for g in run.gangs if g.key == "ml/rack"]
    halves = [e for e in run.events if isinstance(e, Started) and "half" in e.key]
    spread = len({node.split("-")[0] for e in halves for node, _ in e.placed}) == 2
    assert gang.honoured
    assert gang.wait > 0 or not spread  # one half in each rack: no rack was free at t=1

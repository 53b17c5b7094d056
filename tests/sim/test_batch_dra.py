"""The batch simulator with gangs whose GPUs come through DRA claims: a started gang's claims
show their allocation and consumers, and a gang that ends gives its devices back."""

from __future__ import annotations

import pytest

from batchsched.dra.objects import ResourceClaim
from batchsched.sim.batch import BatchJob, BatchSimulator
from batchsched.sim.batch_workloads import default_profile
from batchsched.sim.claims import add_claims
from batchsched.sim.run import cluster_snapshot
from batchsched.sim.trace import trace_node
from queues.model import QuotaPolicy, Tenant
from tests.sim.test_dra_sim import _pods_of_sizes, dra_cluster

ONE = QuotaPolicy({"t": Tenant("t")}, default_tenant="t")


def test_a_gang_waits_for_the_devices_the_gang_before_it_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    snapshot = cluster_snapshot(dra_cluster(trace_node("n", 256_000, 2_097_152, 8, "G2")))
    dra = snapshot.dra
    pods = _pods_of_sizes([4, 4, 8], dra=True)
    for pod in pods:
        add_claims(dra, pod.claims)
    written: list[ResourceClaim] = []
    set_claim = dra.set_claim

    def recording(claim: ResourceClaim) -> None:
        written.append(claim)
        set_claim(claim)

    monkeypatch.setattr(dra, "set_claim", recording)
    jobs = [
        BatchJob("t/first", "t", (pods[0].pod, pods[1].pod), 0.0, 100.0),
        BatchJob("t/second", "t", (pods[2].pod,), 1.0, 50.0),
    ]
    result = BatchSimulator(snapshot, default_profile(), ONE, mode="greedy").run(jobs)
    assert result.log.jobs["t/first"].start == 0.0
    assert result.log.jobs["t/second"].start == 100.0  # when the first gang's claims let go
    # PreBind's writes: each claim with its devices and its pod as the consumer.
    bound = [(c.name, len(c.allocation.devices), [r.name for r in c.reserved_for])
             for c in written if c.allocation is not None]  # fmt: skip
    assert bound == [("p0-gpus", 4, ["p0"]), ("p1-gpus", 4, ["p1"]), ("p2-gpus", 8, ["p2"])]
    assert (dra.claims, dict(dra.in_use), dra.assumed) == ({}, {}, {})

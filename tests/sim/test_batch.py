"""The batch simulator's scenarios on its virtual clock: weighted fair share, backfill against
strict FIFO and greedy, reservations that hold, quota on a simulated run, starving gangs."""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest

from batchsched.sim.batch import BatchJob, BatchResult, BatchSimulator, Mode
from batchsched.sim.batch_workloads import default_profile, gang_job, gpu_cluster
from queues.model import GPU, QuotaPolicy, Tenant, flavor_key
from queues.usage import UsageLedger

H100 = flavor_key("NVIDIA-H100-80GB-HBM3")
ONE = QuotaPolicy({"t": Tenant("t")}, default_tenant="t")


def simulate(
    jobs: list[BatchJob], nodes: int, policy: QuotaPolicy = ONE, mode: Mode = "backfill"
) -> BatchResult:
    return BatchSimulator(gpu_cluster(nodes), default_profile(), policy, mode=mode).run(jobs)


def test_two_tenants_weighted_two_to_one_converge_to_a_two_to_one_gpu_share() -> None:
    policy = QuotaPolicy(
        {"a": Tenant("a", weight=2.0), "b": Tenant("b", weight=1.0)}, half_life_s=600.0
    )
    jobs = [gang_job(f"{t}/j{i}", t, 1, 1, 0.0, 100.0) for t in ("a", "b") for i in range(1000)]
    result = simulate(jobs, nodes=6, policy=policy)  # 48 GPUs
    a = result.log.tenant_gpus("a", 1000.0, 3000.0)
    b = result.log.tenant_gpus("b", 1000.0, 3000.0)
    print(f"GPUs held over [1000 s, 3000 s): a={a:.2f} b={b:.2f} ratio={a / b:.3f}")
    assert a + b == pytest.approx(48.0, rel=0.01)  # enough work: the cluster stays full
    assert a / b == pytest.approx(2.0, rel=0.05)


def mixed_workload(seed: int = 7) -> list[BatchJob]:
    """6 nodes of 8 GPUs: a long 4-node gang, then the head gang that wants all 6 nodes,
    many small short jobs around them, and a later big gang."""
    rng = random.Random(seed)
    jobs = [
        gang_job("t/long", "t", 4, 8, 0.0, 300.0),
        gang_job("t/head", "t", 6, 8, 1.0, 200.0),
        gang_job("t/later", "t", 3, 8, 600.0, 100.0),
    ]
    for i in range(80):
        gpus = rng.choice((1, 2, 4))
        runtime = float(rng.randint(20, 80))
        jobs.append(gang_job(f"t/small-{i:02d}", "t", 1, gpus, 2.0 + 3 * i, runtime))
    return jobs


def utilisation(result: BatchResult) -> float:
    return result.log.gpu_utilisation(0.0, result.log.makespan())


def test_backfill_raises_utilisation_over_fifo_and_keeps_the_head_gang_s_start() -> None:
    fifo = simulate(mixed_workload(), 6, mode="fifo")
    backfill = simulate(mixed_workload(), 6, mode="backfill")
    greedy = simulate(mixed_workload(), 6, mode="greedy")
    head = {
        name: r.log.jobs["t/head"].start
        for name, r in (("fifo", fifo), ("backfill", backfill), ("greedy", greedy))
    }
    print(
        f"GPU utilisation fifo={utilisation(fifo):.3f} backfill={utilisation(backfill):.3f} "
        f"greedy={utilisation(greedy):.3f}; head gang starts at {head}"
    )
    assert all(r.reasons == {} for r in (fifo, backfill, greedy))
    assert utilisation(backfill) > utilisation(fifo) + 0.05
    assert head["fifo"] == head["backfill"] == 300.0  # when the long gang ends
    assert head["greedy"] is not None and head["greedy"] > head["backfill"]  # reservations matter


def _backfilled(result: BatchResult, head: str) -> list[str]:
    """Gangs that started while `head` waited, after it arrived."""
    record = result.log.jobs[head]
    assert record.start is not None
    return [
        key
        for key, job in result.log.jobs.items()
        if job.start is not None and record.arrival < job.start < record.start
    ]


def test_removing_any_backfilled_gang_leaves_the_head_gang_s_start_unchanged() -> None:
    jobs = mixed_workload()
    result = simulate(jobs, 6)
    start = result.log.jobs["t/head"].start
    backfilled = _backfilled(result, "t/head")
    assert len(backfilled) >= 10
    for key in backfilled[:: len(backfilled) // 8]:  # a spread of them keeps the test quick
        without = simulate([j for j in jobs if j.key != key], 6)
        assert without.log.jobs["t/head"].start == start, key


class WatchedLedger(UsageLedger):
    """Checks every tenant's usage against its max after each start: what went over, and the
    most each tenant ever used of what its max names."""

    def __init__(self, policy: QuotaPolicy) -> None:
        super().__init__(policy.half_life_s)
        self.over: list[str] = []
        self.peaks: dict[str, int] = {}

    def add(self, policy: QuotaPolicy, tenant: str, amounts: Mapping[str, int], now: float) -> None:
        super().add(policy, tenant, amounts, now)
        for t in policy.tenants.values():
            used = self.current(t.name)
            for name, limit in t.max.items():
                self.peaks[t.name] = max(self.peaks.get(t.name, 0), used.get(name, 0))
                if used.get(name, 0) > limit:
                    self.over.append(f"{t.name} {name} {used.get(name, 0)} > {limit} at t={now:g}")


@pytest.mark.parametrize(
    "limit",
    [
        pytest.param({GPU: 12_000}, id="a GPU max is never exceeded"),
        pytest.param({H100: 8_000}, id="a per-model GPU max is never exceeded"),
    ],
)
def test_a_tenant_s_max_is_never_exceeded_in_a_simulated_run(limit: dict[str, int]) -> None:
    policy = QuotaPolicy(
        {
            "org": Tenant("org", max=limit),
            "org/a": Tenant("org/a", parent="org"),
            "org/b": Tenant("org/b", parent="org"),
            "free": Tenant("free"),
        }
    )
    rng = random.Random(3)
    jobs = [
        gang_job(
            f"x/j{i}",
            rng.choice(("org/a", "org/b", "free")),
            rng.randint(1, 2),
            rng.choice((1, 2, 4)),
            float(i),
            float(rng.randint(10, 60)),
        )
        for i in range(120)
    ]
    sim = BatchSimulator(gpu_cluster(4), default_profile(), policy)
    sim.ledger = ledger = WatchedLedger(policy)
    result = sim.run(jobs)
    assert ledger.over == []
    assert ledger.peaks["org"] >= next(iter(limit.values())) - 4000  # the max did bind
    assert all(job.end is not None for job in result.log.jobs.values())  # nothing starved


def test_quota_reasons_reach_the_result_for_a_gang_over_its_tenant_s_max() -> None:
    policy = QuotaPolicy({"a": Tenant("a", max={GPU: 8000}), "b": Tenant("b")})
    jobs = [gang_job("a/big", "a", 2, 8, 0.0, 10.0), gang_job("a/ok", "a", 1, 8, 0.0, 10.0)]
    result = simulate(jobs, 4, policy=policy)
    assert result.reasons == {
        "a/big": "tenant a would exceed its max 8 nvidia.com/gpu: "
        "0 nvidia.com/gpu in use + 16 nvidia.com/gpu requested"
    }
    assert result.log.jobs["a/ok"].start == 0.0
    assert result.log.jobs["a/big"].start is None


def starving_workload() -> list[BatchJob]:
    """4 nodes of 8 GPUs: a long gang on two nodes, the head wanting all four after it, a
    second gang wanting two nodes, and 4-GPU jobs that keep the two free nodes busy."""
    jobs = [
        gang_job("t/a-long", "t", 2, 8, 0.0, 1000.0),
        gang_job("t/b-head", "t", 4, 8, 1.0, 10.0),
        gang_job("t/c-second", "t", 2, 8, 5.0, 50.0),
    ]
    jobs += [gang_job(f"t/d-small-{i:02d}", "t", 1, 4, 3.0 + 10 * i, 40.0) for i in range(90)]
    return jobs


@pytest.mark.parametrize(
    ("starvation_s", "second_by"),
    [
        pytest.param(20.0, 100.0, id="a starving gang beyond the first K gets a reservation"),
        pytest.param(1e9, None, id="without starvation the second gang waits behind small jobs"),
    ],
)
def test_a_starving_gang_beyond_the_first_k_gets_a_reservation(
    starvation_s: float, second_by: float | None
) -> None:
    policy = QuotaPolicy({"t": Tenant("t")}, reservations=1, starvation_s=starvation_s)
    result = simulate(starving_workload(), 4, policy=policy)
    second = result.log.jobs["t/c-second"].start
    assert result.log.jobs["t/b-head"].start == 1000.0  # the head's reservation holds either way
    assert second is not None
    if second_by is not None:
        assert second <= second_by
    else:
        assert second > 500.0

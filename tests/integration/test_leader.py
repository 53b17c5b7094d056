"""Leader election on a real API server's Lease, with short durations so failover is quick.

The first tests are pure (the decision rules); the rest run against kube-apiserver. Outcomes
are awaited as events or polled from the API with a deadline, never slept for.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from kubernetes_asyncio import client, config

from batchsched.clock import Clock, FakeClock
from batchsched.kube.client import micro_time
from batchsched.kube.leader import (
    LeaderElectionConfig,
    LeaderElector,
    LeadershipLost,
    claimed_record,
    may_acquire,
)
from batchsched.kube.lease import LeaseRecord
from batchsched.metrics import SchedulerMetrics
from tests.integration.control_plane import ControlPlane

NAMESPACE = "kube-system"
LEASE_S, RENEW_S, RETRY_S = 3.0, 2.0, 0.5
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
# Loopback requests and event-loop scheduling: what a bound may overrun by.
SLACK_S = 1.0


# -- the decision rules, no API server needed ------------------------------------------------

HELD = LeaseRecord("other", 15, "a", "r", 4)


@pytest.mark.parametrize(
    ("record", "observed_at", "now", "expected"),
    [
        (HELD, 100.0, 110.0, False),
        (HELD, 100.0, 115.0, True),
        (LeaseRecord("me", 15, "a", "r", 4), 100.0, 101.0, True),
        (LeaseRecord("", 1, "a", "r", 4), 100.0, 100.0, True),
        (LeaseRecord("other", 1, "a", "r", 4), 100.0, 101.0, True),
    ],
    ids=[
        "a lease another holder renewed 10s ago (by our clock) of 15s is not ours to take",
        "a lease unchanged for its whole duration on our clock has expired",
        "a lease we hold is always ours to renew",
        "a released lease (empty holder) may be taken at once",
        "a lease released with duration 1s expires one second after we saw it",
    ],
)
def test_may_acquire_judges_expiry_by_our_own_clock(
    record: LeaseRecord, observed_at: float, now: float, expected: bool
) -> None:
    assert may_acquire(record, "me", observed_at, now) is expected


def test_taking_over_a_lease_counts_a_transition_and_renewing_keeps_the_acquire_time() -> None:
    taken = claimed_record(HELD, "me", 1_700_000_000.0, 15)
    assert (taken.holder, taken.transitions, taken.acquire_time) == ("me", 5, taken.renew_time)
    renewed = claimed_record(taken, "me", 1_700_000_002.0, 15)
    assert (renewed.transitions, renewed.acquire_time) == (5, taken.acquire_time)
    assert renewed.renew_time != taken.renew_time
    assert claimed_record(None, "me", 1_700_000_000.0, 15).transitions == 0


def test_micro_time_is_the_api_format() -> None:
    assert micro_time(1_700_000_000.25) == "2023-11-14T22:13:20.250000Z"


@pytest.mark.parametrize(
    ("lease", "renew", "retry"),
    [(10.0, 10.0, 2.0), (15.0, 2.0, 2.0), (15.0, 10.0, 0.0)],
    ids=[
        "a renew deadline as long as the lease is rejected",
        "a renew deadline within retryPeriod*1.2 is rejected",
        "a zero retry period is rejected",
    ],
)
def test_config_rejects_durations_client_go_rejects(
    lease: float, renew: float, retry: float
) -> None:
    with pytest.raises(ValueError):
        LeaderElectionConfig(lease_duration=lease, renew_deadline=renew, retry_period=retry)


def test_default_config_is_kube_schedulers() -> None:
    cfg = LeaderElectionConfig()
    assert (cfg.namespace, cfg.name) == ("kube-system", "gpu-scheduler")
    assert (cfg.lease_duration, cfg.renew_deadline, cfg.retry_period) == (15.0, 10.0, 2.0)
    hostname, _, suffix = cfg.identity.rpartition("_")
    assert hostname and uuid.UUID(suffix)


# -- against the real API server -------------------------------------------------------------


class NoJitter(random.Random):
    """Acquire retries exactly every retryPeriod, so timing bounds in these tests are tight."""

    def random(self) -> float:
        return 0.0


class Candidate:
    """One replica: an elector whose leading work is to wait until cancelled."""

    def __init__(
        self, api: client.ApiClient, lease: str, identity: str, clock: Clock | None = None
    ) -> None:
        cfg = LeaderElectionConfig(
            namespace=NAMESPACE,
            name=lease,
            identity=identity,
            lease_duration=LEASE_S,
            renew_deadline=RENEW_S,
            retry_period=RETRY_S,
        )
        self.metrics = SchedulerMetrics()
        self.elector = LeaderElector(api, cfg, clock=clock, metrics=self.metrics, rng=NoJitter())
        self.started = asyncio.Event()
        self.stopped = asyncio.Event()
        self.task = asyncio.create_task(self.elector.run(self._lead))

    async def _lead(self) -> None:
        self.started.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.stopped.set()

    async def kill(self) -> None:
        """Stop renewing without releasing, as SIGKILL would."""
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, LeadershipLost):
            await self.task

    def gauge(self) -> float | None:
        name = self.elector.config.name
        return self.metrics.registry.get_sample_value(
            "leader_election_master_status", {"name": name}
        )


@pytest.fixture
async def lease(api: client.ApiClient) -> AsyncIterator[str]:
    name = f"le-{uuid.uuid4().hex[:10]}"
    yield name
    with contextlib.suppress(client.ApiException):
        await client.CoordinationV1Api(api).delete_namespaced_lease(name, NAMESPACE)


@pytest.fixture
async def candidates() -> AsyncIterator[list[Candidate]]:
    started: list[Candidate] = []
    yield started
    for candidate in started:
        await candidate.kill()


async def read_lease(api: client.ApiClient, name: str) -> client.V1LeaseSpec:
    lease = await client.CoordinationV1Api(api).read_namespaced_lease(name, NAMESPACE)
    return lease.spec


async def wait_for(condition: Callable[[], Awaitable[bool]], timeout: float) -> None:
    """Poll the API until `condition` holds; fail after `timeout` seconds."""
    async with asyncio.timeout(timeout):
        while not await condition():
            await asyncio.sleep(0.05)


async def first_to_lead(group: list[Candidate], timeout: float) -> Candidate:
    waits = {asyncio.ensure_future(c.started.wait()): c for c in group}
    done, pending = await asyncio.wait(waits, timeout=timeout, return_when="FIRST_COMPLETED")
    for waiting in pending:
        waiting.cancel()
    assert done, f"nobody acquired the lease within {timeout}s"
    return waits[next(iter(done))]


async def test_a_single_elector_acquires_the_lease_and_keeps_renewing_it(
    api: client.ApiClient, lease: str, candidates: list[Candidate]
) -> None:
    me = Candidate(api, lease, "replica-a")
    candidates.append(me)
    await asyncio.wait_for(me.started.wait(), RETRY_S + SLACK_S)
    assert me.elector.is_leader and me.gauge() == 1.0
    spec = await read_lease(api, lease)
    assert (spec.holder_identity, spec.lease_duration_seconds) == ("replica-a", 3)
    assert spec.lease_transitions == 0
    first_renew = spec.renew_time

    async def renewed_twice() -> bool:
        current = await read_lease(api, lease)
        return bool((current.renew_time - first_renew).total_seconds() >= 2 * RETRY_S * 0.9)

    await wait_for(renewed_twice, 3 * RETRY_S + SLACK_S)
    spec = await read_lease(api, lease)
    assert spec.holder_identity == "replica-a" and spec.acquire_time <= first_renew
    assert me.elector.is_leader and not me.task.done()


async def test_the_lease_is_written_in_the_api_formats(
    api: client.ApiClient, control_plane: ControlPlane, lease: str, candidates: list[Candidate]
) -> None:
    candidates.append(me := Candidate(api, lease, "replica-a"))
    await asyncio.wait_for(me.started.wait(), RETRY_S + SLACK_S)
    raw = control_plane.kubectl("get", "lease", "-n", NAMESPACE, lease, "-o", "json")
    spec = json.loads(raw)["spec"]
    assert MICRO_TIME.match(spec["renewTime"]) and MICRO_TIME.match(spec["acquireTime"])


async def test_of_two_electors_only_one_leads(
    api: client.ApiClient, lease: str, candidates: list[Candidate]
) -> None:
    candidates.extend([Candidate(api, lease, "replica-a"), Candidate(api, lease, "replica-b")])
    leader = await first_to_lead(candidates, RETRY_S + SLACK_S)
    standby = next(c for c in candidates if c is not leader)
    first_renew = (await read_lease(api, lease)).renew_time

    async def leader_renewed_for_a_lease_duration() -> bool:
        spec = await read_lease(api, lease)
        assert spec.holder_identity == leader.elector.identity
        return bool((spec.renew_time - first_renew).total_seconds() >= LEASE_S)

    await wait_for(leader_renewed_for_a_lease_duration, LEASE_S + 2 * RETRY_S + SLACK_S)
    assert not standby.started.is_set() and not standby.elector.is_leader
    assert standby.gauge() == 0.0 and standby.elector.leader == leader.elector.identity


async def test_a_killed_leader_is_replaced_once_its_lease_expires(
    api: client.ApiClient, lease: str, candidates: list[Candidate]
) -> None:
    candidates.extend([Candidate(api, lease, "replica-a"), Candidate(api, lease, "replica-b")])
    leader = await first_to_lead(candidates, RETRY_S + SLACK_S)
    standby = next(c for c in candidates if c is not leader)
    await leader.kill()
    killed_at = time.monotonic()
    # The standby saw the last renewal within one retry, waits out the lease on its own
    # clock, and notices expiry at its next retry.
    await asyncio.wait_for(standby.started.wait(), LEASE_S + 2 * RETRY_S + SLACK_S)
    waited = time.monotonic() - killed_at
    assert waited >= LEASE_S - 2 * RETRY_S, "took over a lease that had not expired"
    spec = await read_lease(api, lease)
    assert (spec.holder_identity, spec.lease_transitions) == (standby.elector.identity, 1)


async def test_release_hands_the_lease_to_a_standby_at_once(
    api: client.ApiClient, lease: str, candidates: list[Candidate]
) -> None:
    candidates.extend([Candidate(api, lease, "replica-a"), Candidate(api, lease, "replica-b")])
    leader = await first_to_lead(candidates, RETRY_S + SLACK_S)
    standby = next(c for c in candidates if c is not leader)
    await leader.kill()
    released_at = time.monotonic()
    await leader.elector.release()
    await asyncio.wait_for(standby.started.wait(), RETRY_S + SLACK_S)
    assert time.monotonic() - released_at < LEASE_S - RETRY_S
    spec = await read_lease(api, lease)
    assert (spec.holder_identity, spec.lease_transitions) == (standby.elector.identity, 1)


async def test_release_is_refused_while_running_and_a_no_op_for_a_standby(
    api: client.ApiClient, lease: str, candidates: list[Candidate]
) -> None:
    candidates.extend([Candidate(api, lease, "replica-a"), Candidate(api, lease, "replica-b")])
    leader = await first_to_lead(candidates, RETRY_S + SLACK_S)
    standby = next(c for c in candidates if c is not leader)
    with pytest.raises(RuntimeError):
        await leader.elector.release()
    await standby.kill()
    await standby.elector.release()
    assert (await read_lease(api, lease)).holder_identity == leader.elector.identity


async def test_a_leader_whose_lease_was_stolen_reports_lost_leadership(
    api: client.ApiClient, lease: str, candidates: list[Candidate]
) -> None:
    candidates.append(me := Candidate(api, lease, "replica-a"))
    await asyncio.wait_for(me.started.wait(), RETRY_S + SLACK_S)
    await client.CoordinationV1Api(api).patch_namespaced_lease(
        lease, NAMESPACE, {"spec": {"holderIdentity": "thief"}}
    )
    with pytest.raises(LeadershipLost, match="thief"):
        await asyncio.wait_for(me.task, 2 * RETRY_S + SLACK_S)
    assert me.stopped.is_set(), "the leading work must be cancelled"
    assert not me.elector.is_leader and me.gauge() == 0.0
    assert (await read_lease(api, lease)).holder_identity == "thief"


async def test_a_leader_cut_off_from_the_api_gives_up_before_its_lease_expires(
    control_plane: ControlPlane, lease: str, candidates: list[Candidate]
) -> None:
    cfg = client.Configuration()
    await config.load_kube_config(
        config_file=str(control_plane.kubeconfig), client_configuration=cfg
    )
    async with client.ApiClient(cfg) as own_client:
        candidates.append(me := Candidate(own_client, lease, "replica-a"))
        await asyncio.wait_for(me.started.wait(), RETRY_S + SLACK_S)
        cfg.host = "https://127.0.0.1:9"  # nothing listens: every renewal is refused
        cut_at = time.monotonic()
        with pytest.raises(LeadershipLost, match="within"):
            await asyncio.wait_for(me.task, LEASE_S)
        assert time.monotonic() - cut_at <= RENEW_S + 0.5
        assert me.stopped.is_set()


async def test_a_stale_lease_of_another_holder_is_waited_out_on_our_own_clock(
    api: client.ApiClient, control_plane: ControlPlane, lease: str, candidates: list[Candidate]
) -> None:
    ancient = "2000-01-01T00:00:00.000000Z"
    ghost = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": lease, "namespace": NAMESPACE},
        "spec": {
            "holderIdentity": "ghost",
            "leaseDurationSeconds": int(LEASE_S),
            "acquireTime": ancient,
            "renewTime": ancient,
            "leaseTransitions": 7,
        },
    }
    control_plane.kubectl("create", "-f", "-", stdin=json.dumps(ghost))
    started_at = time.monotonic()
    candidates.append(me := Candidate(api, lease, "replica-a"))
    await asyncio.wait_for(me.started.wait(), LEASE_S + RETRY_S + SLACK_S)
    assert time.monotonic() - started_at >= LEASE_S, "a renewTime in the past is not expiry"
    spec = await read_lease(api, lease)
    assert (spec.holder_identity, spec.lease_transitions) == ("replica-a", 8)


async def test_the_injected_clock_decides_the_renew_deadline_and_the_health_check(
    api: client.ApiClient, lease: str, candidates: list[Candidate]
) -> None:
    clock = FakeClock()
    candidates.append(me := Candidate(api, lease, "replica-a", clock))
    await asyncio.wait_for(me.started.wait(), RETRY_S + SLACK_S)
    assert me.elector.healthz() == (True, "ok")
    clock.advance(LEASE_S + 20.0 + 1.0)  # renewals "stuck" for longer than kube tolerates
    healthy, reason = me.elector.healthz()
    assert not healthy and lease in reason
    with pytest.raises(LeadershipLost, match="within"):
        await asyncio.wait_for(me.task, RETRY_S + SLACK_S)
    assert me.elector.healthz() == (True, "not leading")

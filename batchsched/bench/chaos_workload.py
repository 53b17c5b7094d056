"""The chaos soak's workload as data: tenants, gangs, and the API objects that carry them.

Purely computational: `make_workload` turns (nodes, gangs, duration, seed) into the same list
of `GangSpec` every time, and the `*_body` functions into the JSON the bench creates. Pods
are bare (no Job controller is needed) and run on KWOK nodes: a member succeeds
`batchsched.test/complete-after` after it starts Running, or fails after
`batchsched.test/fail-after` (scripts/kwok/).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from batchsched.bench.e2e_cluster import BENCH_LABEL

GPU: Final = "nvidia.com/gpu"
SCHEDULER_NAME: Final = "gpu-scheduler"
GROUP_LABEL: Final = "scheduling.x-k8s.io/pod-group"
GROUPS_API: Final = "/apis/scheduling.x-k8s.io/v1alpha1"
CHAOS_LABEL: Final = "bench.batchsched.io/chaos"
COMPLETE_AFTER: Final = "batchsched.test/complete-after"
FAIL_AFTER: Final = "batchsched.test/fail-after"
EXPECTED_RUNTIME: Final = "batchsched.io/expected-runtime"
KWOK_NODE: Final = "kwok.x-k8s.io/node"
NODE_GPUS: Final = 8
TENANTS: Final = ("alpha", "beta", "gamma")

# Priority classes: low gangs may be preempted, normal ones never preempt, high ones preempt.
LOW: Final = ("chaos-low", 100, "PreemptLowerPriority")
NORMAL: Final = ("chaos-normal", 1000, "Never")
HIGH: Final = ("chaos-high", 100000, "PreemptLowerPriority")
PRIORITY_CLASSES: Final = (LOW, NORMAL, HIGH)

# Gang sizes (pods) and how often each is drawn; big gangs take whole nodes.
_SIZES: Final = ((1, 22), (2, 16), (4, 20), (8, 20), (16, 13), (32, 6), (64, 3))
_GPUS_SMALL: Final = ((1, 30), (2, 25), (4, 25), (8, 20))
_GPUS_BIG: Final = ((4, 40), (8, 60))


def namespace_of(tenant: str) -> str:
    return f"chaos-{tenant}"


@dataclass(frozen=True)
class GangSpec:
    """One gang: a PodGroup (minMember) and `size` member pods `<name>-<i>`."""

    name: str
    tenant: str
    size: int
    min_member: int
    gpus_per_pod: int
    runtime_s: int
    priority_class: str
    arrival_s: float  # after the run's start
    schedule_timeout_s: int
    expected_runtime: bool  # announces its runtime to backfill
    pdb: bool  # a PodDisruptionBudget covers its members
    fail_member: int | None  # this member fails (batchsched.test/fail-after)

    @property
    def namespace(self) -> str:
        return namespace_of(self.tenant)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def gpus(self) -> int:
        return self.size * self.gpus_per_pod

    def member(self, index: int) -> str:
        return f"{self.name}-{index}"

    def members(self) -> list[str]:
        return [self.member(i) for i in range(self.size)]


@dataclass(frozen=True)
class WorkloadShape:
    nodes: int
    gangs: int
    duration_s: float  # the fault window; arrivals come in its first half
    seed: int
    max_size: int = 64
    min_runtime_s: int = 5
    max_runtime_s: int = 240
    load: float = 0.7  # demanded GPU-seconds over what the arrival window offers
    schedule_timeout_s: int = 60
    high_fraction: float = 0.05
    low_fraction: float = 0.3
    fail_fraction: float = 0.03
    pdb_fraction: float = 0.1
    expected_runtime_fraction: float = 0.5


def make_workload(shape: WorkloadShape) -> list[GangSpec]:
    """Purely computational: the gangs of one run, sorted by arrival; the same for a seed."""
    rng = random.Random(shape.seed)
    capacity = shape.nodes * NODE_GPUS
    # No gang asks for more than half the cluster: every one can fit, with room to spare.
    cap = max(1, capacity // 2)
    window = shape.duration_s / 2
    raw: list[tuple[int, int, float, float]] = []
    for _ in range(shape.gangs):
        size = min(_draw(rng, _SIZES), shape.max_size)
        gpus = _draw(rng, _GPUS_BIG if size >= 16 else _GPUS_SMALL)
        while size * gpus > cap and gpus > 1:
            gpus //= 2
        size = min(size, cap // gpus)
        # Log-uniform runtimes, longest for the smallest gangs (as in real clusters, where the
        # big jobs are fewer and each is checkpointed more often).
        longest = max(shape.min_runtime_s, shape.max_runtime_s / math.sqrt(size))
        runtime = math.exp(rng.uniform(math.log(shape.min_runtime_s), math.log(longest)))
        raw.append((size, gpus, runtime, rng.uniform(0.0, window)))
    demand = sum(size * gpus * runtime for size, gpus, runtime, _ in raw)
    # Shorter runtimes when the gangs would ask for more than `load` of the window's GPUs.
    scale = min(1.0, shape.load * capacity * window / demand) if demand else 1.0
    gangs = [_gang(shape, rng, i, *row, scale) for i, row in enumerate(raw)]
    return sorted(gangs, key=lambda g: (g.arrival_s, g.name))


def _gang(
    shape: WorkloadShape,
    rng: random.Random,
    index: int,
    size: int,
    gpus: int,
    runtime_s: float,
    arrival: float,
    scale: float,
) -> GangSpec:
    runtime = round(max(shape.min_runtime_s, runtime_s * scale))
    draw = rng.random()
    if draw < shape.high_fraction:
        klass = HIGH[0]
        arrival = max(arrival, shape.duration_s / 8)  # after the cluster has filled up
    elif draw < shape.high_fraction + shape.low_fraction:
        klass = LOW[0]
    else:
        klass = NORMAL[0]
    elastic = size >= 4 and rng.random() < 0.1  # a few gangs run with one member short
    fails = rng.random() < shape.fail_fraction
    return GangSpec(
        name=f"g{index:05d}",
        tenant=TENANTS[index % len(TENANTS)],
        size=size,
        min_member=size - 1 if elastic else size,
        gpus_per_pod=gpus,
        runtime_s=runtime,
        priority_class=klass,
        arrival_s=round(arrival, 3),
        schedule_timeout_s=shape.schedule_timeout_s,
        expected_runtime=rng.random() < shape.expected_runtime_fraction,
        pdb=klass == LOW[0] and rng.random() < shape.pdb_fraction / shape.low_fraction,
        fail_member=rng.randrange(size) if fails else None,
    )


def _draw(rng: random.Random, table: Sequence[tuple[int, int]]) -> int:
    values, weights = zip(*table, strict=True)
    return int(rng.choices(values, weights)[0])


# API objects


def node_body(name: str) -> dict[str, object]:
    """A KWOK-managed node with 8 GPUs; KWOK keeps the allocatable it is created with."""
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", GPU: str(NODE_GPUS)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "type": "kwok",
                BENCH_LABEL: "true",
                CHAOS_LABEL: "true",
            },
            "annotations": {KWOK_NODE: "fake", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "status": {"capacity": resources, "allocatable": resources},
    }


def pod_group_body(gang: GangSpec) -> dict[str, object]:
    annotations = {EXPECTED_RUNTIME: f"{gang.runtime_s}s"} if gang.expected_runtime else {}
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": gang.name,
            "namespace": gang.namespace,
            "labels": {CHAOS_LABEL: "true"},
            "annotations": annotations,
        },
        "spec": {"minMember": gang.min_member, "scheduleTimeoutSeconds": gang.schedule_timeout_s},
    }


def member_body(gang: GangSpec, index: int) -> dict[str, object]:
    gpus = gang.gpus_per_pod
    requests = {"cpu": str(6 * gpus), "memory": f"{48 * gpus}Gi", GPU: str(gpus)}
    annotations = {COMPLETE_AFTER: f"{gang.runtime_s}s"}
    if gang.fail_member == index:
        annotations = {FAIL_AFTER: f"{max(1, gang.runtime_s // 2)}s"}
    if gang.expected_runtime:
        annotations[EXPECTED_RUNTIME] = f"{gang.runtime_s}s"
    container = {
        "name": "train",
        "image": "registry.k8s.io/pause:3.10",
        "resources": {"requests": requests, "limits": {GPU: str(gpus)}},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": gang.member(index),
            "namespace": gang.namespace,
            "labels": {GROUP_LABEL: gang.name, CHAOS_LABEL: "true"},
            "annotations": annotations,
        },
        "spec": {
            "schedulerName": SCHEDULER_NAME,
            "priorityClassName": gang.priority_class,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 5,
            "containers": [container],
        },
    }


def pdb_body(gang: GangSpec) -> dict[str, object]:
    """At most one member away at a time: preempting the gang whole needs the budget's leave."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": gang.name, "namespace": gang.namespace},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {GROUP_LABEL: gang.name}}},
    }


def priority_class_body(name: str, value: int, policy: str) -> dict[str, object]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name, "labels": {CHAOS_LABEL: "true"}},
        "value": value,
        "preemptionPolicy": policy,
    }


def quota_yaml(nodes: int) -> str:
    """Three flat tenants: each guaranteed a third of the GPUs, each allowed to borrow up to
    three quarters (never less than the biggest gang, half the cluster)."""
    capacity = nodes * NODE_GPUS
    lines = ["apiVersion: batchsched.io/v1alpha1", "kind: QuotaConfig", "tenants:"]
    for i, tenant in enumerate(TENANTS):
        lines += [
            f"- name: {tenant}",
            f"  weight: {i + 1}",
            f"  guaranteed: {{{GPU}: {capacity // len(TENANTS)}}}",
            f"  max: {{{GPU}: {max(capacity * 3 // 4, capacity // 2)}}}",
            f"  namespaces: [{namespace_of(tenant)}]",
        ]
    return "\n".join(lines) + "\n"


def leader_config_yaml(lease_s: float, renew_s: float, retry_s: float, lease_name: str) -> str:
    return (
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "leaderElection:\n"
        "  leaderElect: true\n"
        f"  leaseDuration: {lease_s:g}s\n"
        f"  renewDeadline: {renew_s:g}s\n"
        f"  retryPeriod: {int(retry_s * 1000)}ms\n"
        "  resourceNamespace: kube-system\n"
        f"  resourceName: {lease_name}\n"
        # kube-scheduler in the same plane runs with QPS/burst 5000; so do the replicas
        "clientConnection:\n"
        "  qps: 5000\n"
        "  burst: 5000\n"
        "profiles:\n"
        f"- schedulerName: {SCHEDULER_NAME}\n"
    )

"""What topology-e2e creates, as raw API bodies. Purely computational.

The cluster is sim/topology_cluster's (racks of 8-GPU nodes labelled with NVLink clique, rack,
block and zone) as plain Node objects; the gangs are sim/topology_jobs' seeded stream (2-64
GPUs, 8-GPU pods from `whole_node_gpus` up, 1/2/4-GPU pods below; required rack, required
clique or preferred clique), so this bench and `bench topology` draw the same gangs.

Each gang is given to a scheduler in the encoding it reads:
- `UPSTREAM` (kube-scheduler 1.36 and batchsched): a `scheduling.k8s.io/v1alpha2` Workload
  (one gang template), then its PodGroup (the API server's PodGroupWorkloadExists admission
  wants the Workload first) with `schedulingPolicy.gang.minCount` and, for a required level,
  `schedulingConstraints.topology[0].key`; a preferred level is our annotation
  `batchsched.io/topology-preferred` on the PodGroup (kube-scheduler has no "preferred" and
  ignores it). Pods name the group in `spec.schedulingGroup.podGroupName`.
- `PLUGINS` (scheduler-plugins Coscheduling): a `scheduling.x-k8s.io/v1alpha1` PodGroup
  (`minMember`) and the pods' label `scheduling.x-k8s.io/pod-group`; it knows no topology.

Arrival: gang n's objects are created `at` seconds after the first create (the stream's
Poisson arrivals, `interval` apart on average), its members `member_gap` apart after them, so
gangs interleave and a gang is seen partly created while others are being scheduled.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from batchsched.bench.e2e_cluster import BENCH_LABEL
from batchsched.gang.podgroup import POD_GROUP_LABEL
from batchsched.gang.topology import PREFERRED_ANNOTATION, TopologyRequest
from batchsched.model.node import NodeView
from batchsched.model.resources import Resources
from batchsched.sim.batch_jobs import BatchJob
from batchsched.sim.topology_cluster import topology_cluster
from batchsched.sim.topology_jobs import TopologyMix, topology_jobs

GPU: Final = "nvidia.com/gpu"
UPSTREAM_API: Final = "scheduling.k8s.io/v1alpha2"
PLUGINS_API: Final = "scheduling.x-k8s.io/v1alpha1"
TEMPLATE: Final = "workers"


class Encoding(enum.Enum):
    UPSTREAM = "scheduling.k8s.io/v1alpha2 Workload + PodGroup"
    PLUGINS = "scheduling.x-k8s.io/v1alpha1 PodGroup"


@dataclass(frozen=True, slots=True)
class Gang:
    name: str  # g-0007; its members are g-0007-0, g-0007-1, ...
    members: int
    member_requests: Resources  # every member asks the same
    request: TopologyRequest | None
    at: float  # seconds after the first create: its group objects, then its members

    @property
    def member_names(self) -> tuple[str, ...]:
        return tuple(f"{self.name}-{i}" for i in range(self.members))

    @property
    def gpus(self) -> int:
        return self.members * self.member_requests.get(GPU)


@dataclass(frozen=True, slots=True)
class Cluster:
    racks: int
    nodes_per_rack: int = 8
    gpus_per_node: int = 8
    clique_nodes: int = 2
    racks_per_block: int = 8

    def nodes(self) -> list[NodeView]:
        return topology_cluster(
            self.racks, self.nodes_per_rack, self.gpus_per_node, self.clique_nodes,
            self.racks_per_block,
        )  # fmt: skip

    @property
    def gpus(self) -> int:
        return self.racks * self.nodes_per_rack * self.gpus_per_node


def gangs(
    cluster: Cluster,
    seed: int,
    *,
    count: int | None = None,
    fill: float = 0.9,
    interval: float = 0.025,
    whole_node_gpus: int = 16,
) -> list[Gang]:
    """The first `count` gangs of the seeded stream, or (count None) as many as ask for at
    most `fill` of the cluster's GPUs; a prefix of the same stream either way."""
    size = count if count is not None else 64
    while True:
        mix = TopologyMix(
            gangs=size,
            interval=interval,
            clique_gpus=cluster.clique_nodes * cluster.gpus_per_node,
            big_gpus=whole_node_gpus,
        )
        out, full = _take(
            topology_jobs(mix, seed), None if count is not None else fill * cluster.gpus
        )
        if count is not None or full:
            return out
        size *= 2  # the stream is drawn gang by gang: a longer one starts with the same gangs


def _take(jobs: Sequence[BatchJob], gpu_limit: float | None) -> tuple[list[Gang], bool]:
    """The jobs as gangs, up to `gpu_limit` GPUs asked in all; and whether it was reached."""
    out: list[Gang] = []
    asked = 0
    for job in jobs:
        gang = Gang(
            name=job.key.split("/", 1)[1],
            members=len(job.members),
            member_requests=job.members[0].requests,
            request=job.topology,
            at=job.arrival,
        )
        if gpu_limit is not None and asked + gang.gpus > gpu_limit:
            return out, True
        asked += gang.gpus
        out.append(gang)
    return out, False


def member_offsets(gang: Gang, member_gap: float) -> tuple[float, ...]:
    """When each member is due, seconds after the first create."""
    return tuple(gang.at + i * member_gap for i in range(gang.members))


def node_body(node: NodeView) -> dict[str, object]:
    resources = node.allocatable.to_dict()
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": {**node.labels, BENCH_LABEL: "true"}},
        "status": {"capacity": resources, "allocatable": resources},
    }


def group_objects(gang: Gang, encoding: Encoding) -> list[tuple[str, dict[str, object]]]:
    """(resource, body) to create, in order, before the gang's pods."""
    if encoding is Encoding.PLUGINS:
        body: dict[str, object] = {
            "apiVersion": PLUGINS_API,
            "kind": "PodGroup",
            "metadata": {"name": gang.name},
            "spec": {"minMember": gang.members},
        }
        return [("podgroups", body)]
    policy = {"gang": {"minCount": gang.members}}
    required = _required(gang.request)
    template: dict[str, object] = {"name": TEMPLATE, "schedulingPolicy": policy, **required}
    workload: dict[str, object] = {
        "apiVersion": UPSTREAM_API,
        "kind": "Workload",
        "metadata": {"name": gang.name},
        "spec": {"podGroupTemplates": [template]},
    }
    ref = {"workload": {"workloadName": gang.name, "podGroupTemplateName": TEMPLATE}}
    metadata: dict[str, object] = {"name": gang.name}
    if gang.request is not None and not gang.request.required:
        metadata["annotations"] = {PREFERRED_ANNOTATION: gang.request.level}
    group: dict[str, object] = {
        "apiVersion": UPSTREAM_API,
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": {"podGroupTemplateRef": ref, "schedulingPolicy": policy, **required},
    }
    return [("workloads", workload), ("podgroups", group)]


def _required(request: TopologyRequest | None) -> dict[str, object]:
    if request is None or not request.required:
        return {}
    return {"schedulingConstraints": {"topology": [{"key": request.level}]}}


def member_body(
    gang: Gang, index: int, encoding: Encoding, scheduler_name: str
) -> dict[str, object]:
    requests = gang.member_requests.to_dict()
    container = {
        "name": "main",
        "image": "registry.k8s.io/pause:3.10",
        # Extended resources must have limits equal to requests.
        "resources": {"requests": requests, "limits": {GPU: requests[GPU]}},
    }
    metadata: dict[str, object] = {"name": gang.member_names[index]}
    spec: dict[str, object] = {"schedulerName": scheduler_name, "containers": [container]}
    if encoding is Encoding.PLUGINS:
        metadata["labels"] = {POD_GROUP_LABEL: gang.name}
    else:
        spec["schedulingGroup"] = {"podGroupName": gang.name}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def demanded_gpus(workload: Sequence[Gang]) -> int:
    return sum(g.gpus for g in workload)

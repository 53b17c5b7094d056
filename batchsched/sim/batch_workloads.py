"""Clusters and gang workloads for the batch simulator's scenarios and benchmarks.

Plain builders: `gpu_cluster(75)` is 75 nodes of 8 GPUs; `gang_job(...)` is one PodGroup's
members, each asking for the same GPUs (and cpu/memory in proportion).
"""

from __future__ import annotations

from collections.abc import Mapping

from batchsched.config import default_config
from batchsched.config.scheduler_config import GPU_SCHEDULER_NAME
from batchsched.framework.profile import Profile
from batchsched.model.node import NodeView, parse_node
from batchsched.model.pod import PodView, parse_pod
from batchsched.sim.batch_jobs import BatchJob
from batchsched.snapshot import Snapshot

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
CPU_PER_GPU = 8
MEMORY_GI_PER_GPU = 64


def gpu_node(name: str, gpus: int = 8, product: str = "NVIDIA-H100-80GB-HBM3") -> NodeView:
    labels = {"kubernetes.io/hostname": name}
    if product:
        labels["nvidia.com/gpu.product"] = product
    return parse_node(
        {
            "metadata": {"name": name, "labels": labels},
            "status": {
                "allocatable": {
                    "cpu": str(CPU_PER_GPU * max(gpus, 1) + 8),
                    "memory": f"{MEMORY_GI_PER_GPU * max(gpus, 1) + 64}Gi",
                    "pods": "110",
                    "nvidia.com/gpu": str(gpus),
                }
            },
        }
    )


def gpu_cluster(nodes: int, gpus: int = 8, product: str = "NVIDIA-H100-80GB-HBM3") -> Snapshot:
    return Snapshot([gpu_node(f"node-{i:03d}", gpus, product) for i in range(nodes)], [])


def default_profile() -> Profile:
    return default_config().build_profiles()[GPU_SCHEDULER_NAME]


def gang_job(
    key: str,
    tenant: str,
    members: int,
    gpus: int,
    arrival: float,
    runtime: float,
    priority: int = 0,
    expected_runtime: float | None = -1.0,
    job_class: str = "",
    labels: Mapping[str, str] | None = None,
) -> BatchJob:
    namespace, name = key.split("/")
    pods = tuple(
        _member(namespace, f"{name}-{i}", name, gpus, arrival, priority, labels or {})
        for i in range(members)
    )
    return BatchJob(key, tenant, pods, arrival, runtime, priority, expected_runtime, job_class)


def _member(
    namespace: str,
    name: str,
    group: str,
    gpus: int,
    arrival: float,
    priority: int,
    labels: Mapping[str, str],
) -> PodView:
    requests = {
        "cpu": str(CPU_PER_GPU * max(gpus, 1)),
        "memory": f"{MEMORY_GI_PER_GPU * max(gpus, 1)}Gi",
    }
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    view = parse_pod(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"{namespace}/{name}",
                "labels": {POD_GROUP_LABEL: group, **labels},
                "creationTimestamp": None,
            },
            "spec": {
                "schedulerName": GPU_SCHEDULER_NAME,
                "priority": priority,
                "containers": [{"name": "main", "resources": {"requests": requests}}],
            },
        }
    )
    return _at(view, arrival)


def _at(view: PodView, arrival: float) -> PodView:
    import dataclasses

    return dataclasses.replace(view, creation_time=arrival)

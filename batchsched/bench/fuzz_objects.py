"""Valid objects for every parser at the edge, varied by one `random.Random`: Pods, Nodes,
PriorityClasses, PodGroups, PodDisruptionBudgets, NodeResourceTopologies, tenant quota files
and KubeSchedulerConfigurations, each as the API server (or a user's YAML) would hand it over.

The fuzz targets (fuzz_targets.py) mutate these; each must parse as generated.
"""

from __future__ import annotations

import random
from typing import Final

from batchsched.bench.fuzz_inputs import Json
from gpu.machines import REFERENCE_MACHINES, build
from gpu.nrt import detail_json, nrt_object

GPU_ANNOTATIONS: Final = (
    "batchsched.io/gpu-milli",
    "batchsched.io/gpu-models",
    "batchsched.io/gpu-connectivity",
    "batchsched.io/expected-runtime",
)
_NAMES: Final = ("a", "train-0", "worker-7", "x" * 63, "n1", "gpu-node-12")
_CPU: Final = ("100m", "1", "2", "32", "0.5", "1500m", 4, 0.25)
_MEMORY: Final = ("128Mi", "1Gi", "256Gi", "1e9", "500M", 1073741824)
_STAMP: Final = "2025-01-01T00:00:00Z"


def _meta(rng: random.Random, namespaced: bool = True) -> dict[str, Json]:
    meta: dict[str, Json] = {
        "name": rng.choice(_NAMES),
        "uid": f"uid-{rng.randrange(10**6)}",
        "resourceVersion": str(rng.randrange(1, 10**6)),
        "creationTimestamp": _STAMP,
        "labels": {"app": "train", "scheduling.x-k8s.io/pod-group": rng.choice(_NAMES)},
    }
    if namespaced:
        meta["namespace"] = rng.choice(("default", "team-a", "research"))
    return meta


def _resources(rng: random.Random, gpus: bool) -> dict[str, Json]:
    amounts: dict[str, Json] = {"cpu": rng.choice(_CPU), "memory": rng.choice(_MEMORY)}
    if gpus:
        amounts["nvidia.com/gpu"] = rng.choice((1, 2, 8, "4"))
    return amounts


def valid_pod(rng: random.Random) -> dict[str, Json]:
    gpus = rng.random() < 0.5
    container = _pod_container(rng, gpus)
    meta = _meta(rng)
    meta["annotations"] = _pod_annotations(rng, gpus)
    spec: dict[str, Json] = {
        "schedulerName": "gpu-scheduler",
        "containers": [container],
        "priority": rng.choice((0, 1000, -5)),
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "affinity": _pod_affinity(),
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "train"}},
                "matchLabelKeys": ["app"],
            }
        ],
        "schedulingGates": [{"name": "wait"}] if rng.random() < 0.2 else [],
        "activeDeadlineSeconds": rng.choice((None, 3600)),
    }
    if rng.random() < 0.3:
        spec["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "2"}}}]
        spec["overhead"] = {"cpu": "100m"}
    if rng.random() < 0.5:
        spec["nodeName"] = "n1"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": spec,
        "status": {"phase": rng.choice(("Pending", "Running")), "startTime": _STAMP},
    }


def _pod_container(rng: random.Random, gpus: bool) -> dict[str, Json]:
    return {
        "name": "main",
        "image": rng.choice(("nvcr.io/nvidia/pytorch:24.05-py3", "busybox")),
        "resources": {"requests": _resources(rng, gpus), "limits": _resources(rng, gpus)},
        "ports": [{"containerPort": 8080, "hostPort": rng.choice((0, 8080)), "protocol": "TCP"}],
    }


def _pod_annotations(rng: random.Random, gpus: bool) -> dict[str, Json]:
    annotations: dict[str, Json] = {}
    if rng.random() < 0.5:
        annotations["batchsched.io/expected-runtime"] = rng.choice(("90m", "2h30m", "45s"))
    if not gpus and rng.random() < 0.5:
        annotations["batchsched.io/gpu-milli"] = str(rng.choice((1, 250, 500, 999)))
    if rng.random() < 0.3:
        annotations["batchsched.io/gpu-models"] = "NVIDIA-H100-80GB-HBM3|NVIDIA-A100-SXM4-80GB"
    if rng.random() < 0.3:
        annotations["batchsched.io/gpu-connectivity"] = rng.choice(("NVLink", "Socket"))
    return annotations


def _pod_affinity() -> dict[str, Json]:
    """Required and preferred node affinity and a required pod anti-affinity (a new object
    each time: the mutators change what they are given)."""
    zone_a: Json = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    newer: Json = {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["3"]}]}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [zone_a]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": newer}
            ],
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "train"}}, "topologyKey": "host"}
            ]
        },
    }


def valid_node(rng: random.Random) -> dict[str, Json]:
    machine = rng.choice(REFERENCE_MACHINES)
    meta = _meta(rng, namespaced=False)
    meta["labels"] = {"nvidia.com/gpu.product": machine.product, "zone": "a"}
    meta["annotations"] = {"batchsched.io/unhealthy-gpus": rng.choice(("", "2,5", "0"))}
    allocatable: dict[str, Json] = {
        "cpu": rng.choice(("96", "223500m")),
        "memory": rng.choice(("1Ti", "2015Gi")),
        "pods": "110",
        "nvidia.com/gpu": str(machine.gpu_count),
        "ephemeral-storage": "1Ti",
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": {
            "unschedulable": rng.random() < 0.1,
            "taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
        },
        "status": {
            "allocatable": allocatable,
            "capacity": dict(allocatable),
            "images": [{"names": ["busybox", "busybox:1.36"], "sizeBytes": 4_000_000}],
        },
    }


def valid_priority_class(rng: random.Random) -> dict[str, Json]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": _meta(rng, namespaced=False),
        "value": rng.choice((0, 1000, 2_000_000_000, -10)),
        "globalDefault": rng.random() < 0.2,
        "preemptionPolicy": rng.choice(("PreemptLowerPriority", "Never")),
    }


def valid_pod_group(rng: random.Random) -> dict[str, Json]:
    meta = _meta(rng)
    meta["annotations"] = {"batchsched.io/expected-runtime": "2h"}
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": meta,
        "spec": {
            "minMember": rng.choice((1, 4, 64)),
            "minResources": {"cpu": "8", "nvidia.com/gpu": str(rng.choice((1, 8, 64)))},
            "scheduleTimeoutSeconds": rng.choice((0, 60, 3600)),
        },
        "status": {"phase": "Pending"},
    }


def valid_disruption_budget(rng: random.Random) -> dict[str, Json]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(rng),
        "spec": {
            "minAvailable": 1,
            "selector": {
                "matchLabels": {"app": "train"},
                "matchExpressions": [{"key": "role", "operator": "In", "values": ["worker"]}],
            },
        },
        "status": {"disruptionsAllowed": rng.choice((0, 1, 3))},
    }


def valid_nrt(rng: random.Random) -> dict[str, Json]:
    machine = rng.choice(REFERENCE_MACHINES)
    unhealthy = frozenset(rng.sample(range(machine.gpu_count), rng.randint(0, 1)))
    topology = build(machine, unhealthy)
    reasons = [["XID 79"] if i in unhealthy else [] for i in range(topology.gpu_count)]
    detail = detail_json(topology, reasons, f"fake:{machine.name}", "580.65")
    return nrt_object(rng.choice(_NAMES), topology, detail, heartbeat=_STAMP)


def valid_quota_document(rng: random.Random) -> dict[str, Json]:
    teams: list[Json] = [
        {"name": "vision", "namespaces": ["vision"], "queues": ["vision"], "max": {"cpu": "64"}},
        {"name": "common", "namespaces": ["research-shared"], "weight": 0.5},
    ]
    return {
        "apiVersion": "batchsched.io/v1alpha1",
        "kind": "QuotaConfig",
        "queueLabel": "batchsched.io/queue",
        "defaultTenant": "shared",
        "fairShare": {"halfLife": rng.choice(("24h", "90m"))},
        "backfill": {"reservations": rng.choice((0, 4)), "starvationAfter": "1h"},
        "gpuModels": {"h100": "NVIDIA-H100-80GB-HBM3"},
        "tenants": [
            {"name": "shared", "namespaces": ["default"]},
            {
                "name": "research",
                "weight": rng.choice((1, 2, 2.5)),
                "guaranteed": {"nvidia.com/gpu": 16, "cpu": "200", "memory": "1Ti"},
                "max": {"nvidia.com/gpu": 64, "nvidia.com/gpu@h100": 16},
                "lendIdle": rng.random() < 0.5,
                "priority": {"min": 0, "max": 1000},
                "teams": teams,
            },
        ],
    }


def valid_scheduler_config(rng: random.Random) -> dict[str, Json]:
    version = rng.choice(("v1", "v1beta3", "v1beta2"))
    plugins: dict[str, Json] = {
        "score": {"enabled": [{"name": "NodeResourcesFit", "weight": rng.randint(1, 100)}]},
        "preScore": {"disabled": [{"name": "InterPodAffinity"}]},
    }
    profile: dict[str, Json] = {
        "schedulerName": "gpu-scheduler",
        "plugins": plugins,
        "pluginConfig": [
            {
                "name": "NodeResourcesFit",
                "args": {
                    "scoringStrategy": {"type": rng.choice(("MostAllocated", "LeastAllocated"))}
                },
            }
        ],
    }
    return {
        "apiVersion": f"kubescheduler.config.k8s.io/{version}",
        "kind": "KubeSchedulerConfiguration",
        "parallelism": rng.choice((1, 16)),
        "podInitialBackoffSeconds": 1,
        "podMaxBackoffSeconds": 10,
        "leaderElection": {"leaderElect": True, "leaseDuration": "15s", "renewDeadline": "10s"},
        "profiles": [profile],
    }

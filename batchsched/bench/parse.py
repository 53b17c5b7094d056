"""Raw JSON straight into our views vs kubernetes_asyncio's generated models.

Both sides start from the same bytes: a PodList as the API server sends it (running training
pods with managedFields, env, volumes, status), which is what the informer's list and every
watch event carry. The generated side stops at the model objects; turning those into our
views would cost more on top.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import time
from collections.abc import Callable
from types import SimpleNamespace

from kubernetes_asyncio import client

from batchsched.model.pod import parse_pod


def api_pod(i: int) -> dict[str, object]:
    """A bound GPU training pod as `GET /api/v1/pods` returns it (server-set fields too)."""
    stamp = "2025-01-01T00:00:00Z"
    return {"metadata": _metadata(i, stamp), "spec": _spec(i), "status": _status(stamp)}


def _metadata(i: int, stamp: str) -> dict[str, object]:
    job = f"train-{i // 8}"
    return {
        "name": f"{job}-worker-{i % 8}",
        "namespace": "team-a",
        "uid": f"0000-{i:08d}",
        "resourceVersion": str(1000 + i),
        "creationTimestamp": stamp,
        "labels": {"app": "train", "job-name": job, "role": "worker"},
        "annotations": {"scheduling.x-k8s.io/group": job},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": "j"}],
        "managedFields": [
            {
                "manager": "job-controller",
                "operation": "Update",
                "apiVersion": "v1",
                "time": stamp,
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}, "f:role": {}}}},
            },
            {
                "manager": "kubelet",
                "operation": "Update",
                "apiVersion": "v1",
                "time": stamp,
                "fieldsType": "FieldsV1",
                "subresource": "status",
                "fieldsV1": {"f:status": {"f:conditions": {}, "f:phase": {}}},
            },
        ],
    }


def _container() -> dict[str, object]:
    return {
        "name": "trainer",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["torchrun", "--nproc-per-node=8", "train.py"],
        "env": [{"name": f"VAR_{k}", "value": f"value-{k}"} for k in range(10)],
        "resources": {
            "limits": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"},
            "requests": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"},
        },
        "volumeMounts": [
            {"name": "data", "mountPath": "/data"},
            {"name": "shm", "mountPath": "/dev/shm"},
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }


def _spec(i: int) -> dict[str, object]:
    container = _container()
    anti_affinity = {
        "weight": 50,
        "podAffinityTerm": {
            "labelSelector": {"matchLabels": {"job-name": f"train-{i // 8}"}},
            "topologyKey": "kubernetes.io/hostname",
        },
    }
    return {
        "containers": [container],
        "initContainers": [dict(container, name="fetch", command=["fetch-data"])],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "dataset"}},
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
        ],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "nodeName": f"gpu-node-{i % 500}",
        "schedulerName": "gpu-scheduler",
        "priority": 1000,
        "priorityClassName": "training",
        "preemptionPolicy": "PreemptLowerPriority",
        "enableServiceLinks": True,
        "securityContext": {},
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "affinity": {
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [anti_affinity]}
        },
    }


def _status(stamp: str) -> dict[str, object]:
    return {
        "phase": "Running",
        "hostIP": "10.0.0.1",
        "podIP": "10.1.0.1",
        "startTime": stamp,
        "qosClass": "Guaranteed",
        "conditions": [
            {"type": t, "status": "True", "lastTransitionTime": stamp}
            for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "containerStatuses": [
            {
                "name": "trainer",
                "ready": True,
                "restartCount": 0,
                "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "imageID": "sha256:abc",
                "containerID": "containerd://abc",
                "started": True,
                "state": {"running": {"startedAt": stamp}},
            }
        ],
    }


def pod_list_body(count: int) -> bytes:
    items = [api_pod(i) for i in range(count)]
    body = {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "9"}}
    return json.dumps({**body, "items": items}).encode()


def best_of(repeats: int, work: Callable[[], int]) -> float:
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        count = work()
        best = min(best, time.perf_counter() - start)
        assert count > 0
    return best


def raw_views(body: bytes) -> int:
    items = json.loads(body)["items"]
    return len([parse_pod(item) for item in items])


def json_only(body: bytes) -> int:
    return len(json.loads(body)["items"])


async def generated_seconds(body: bytes, repeats: int) -> float:
    async with client.ApiClient(client.Configuration()) as api:
        response = SimpleNamespace(data=body)

        def generated() -> int:
            pods = api.deserialize(response, "V1PodList")
            return len(pods.items)

        return best_of(repeats, generated)


def run(args: argparse.Namespace) -> int:
    body = pod_list_body(args.pods)
    raw = best_of(args.repeats, lambda: raw_views(body))
    decode = best_of(args.repeats, lambda: json_only(body))
    generated = asyncio.run(generated_seconds(body, args.repeats))
    python = f"{platform.python_implementation()} {platform.python_version()}"
    print(f"machine: {python} on {platform.machine()}, {os.cpu_count()} cpus")
    print(f"input: PodList of {args.pods} running GPU pods, {len(body) / 1e6:.1f} MB JSON")
    print(f"best of {args.repeats}:")
    print(f"  json.loads only:                      {decode * 1e3:8.1f} ms")
    print(f"  raw JSON -> PodView (json + parse):   {raw * 1e3:8.1f} ms")
    print(f"  ApiClient.deserialize -> V1PodList:   {generated * 1e3:8.1f} ms")
    per_raw, per_generated = raw / args.pods * 1e6, generated / args.pods * 1e6
    print(f"per pod: raw {per_raw:.1f} us, generated {per_generated:.1f} us")
    print(f"ratio: raw JSON into views is {generated / raw:.1f}x faster than generated models")
    return 0


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("parse", help="raw JSON into views vs generated client models")
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.set_defaults(run=run)

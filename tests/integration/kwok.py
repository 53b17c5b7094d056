"""Nodes run by KWOK, pods that really run, succeed and fail, and batch/v1 Jobs.

The `kwok_plane` fixture (conftest.py) starts kwok and kube-controller-manager on the
session's control plane. kwok manages only the Nodes annotated `kwok.x-k8s.io/node: fake`
and the pods bound to them, with the stages in scripts/kwok/:

* a managed Node becomes Ready and keeps a Lease in kube-node-lease;
* a pod bound to it becomes Running at once, with an IP;
* it then succeeds after `batchsched.test/complete-after` (any pod), fails after
  `batchsched.test/fail-after` (any pod), or, when a Job owns it and it has neither,
  succeeds after `pod-complete.stage.kwok.x-k8s.io/delay` (at once without it); a pod with
  none of these runs until deleted;
* a deleted pod is removed when its grace period ends (or `batchsched.test/terminate-after`
  after the delete).
"""

from __future__ import annotations

from typing import Any, Final

from kubernetes_asyncio import client

from batchsched.kube.client import ApiError, request_json
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod
from tests.integration.helpers import create_node, wait_for

KWOK_NODE_ANNOTATION: Final = "kwok.x-k8s.io/node"
KWOK_NODE_VALUE: Final = "fake"
COMPLETE_AFTER: Final = "batchsched.test/complete-after"
FAIL_AFTER: Final = "batchsched.test/fail-after"
TERMINATE_AFTER: Final = "batchsched.test/terminate-after"
JOB_POD_DELAY: Final = "pod-complete.stage.kwok.x-k8s.io/delay"

NODE_READY_TIMEOUT_S: Final = 30.0


def go_duration(seconds: float) -> str:
    """A Go duration string, which is what kwok's delay annotations hold: 3 -> "3s"."""
    return f"{seconds:g}s"


def kwok_node(
    name: str, gpus: int = 8, cpu: str = "64", memory: str = "512Gi", pods: int = 110
) -> NodeBuilder:
    """A Node kwok manages, as a builder (add labels, taints, ... before creating it)."""
    builder = make_node(name).cpu(cpu).memory(memory).pods(pods)
    if gpus:
        builder = builder.gpus(gpus)
    return builder.annotation(KWOK_NODE_ANNOTATION, KWOK_NODE_VALUE)


async def create_kwok_nodes(
    api: client.ApiClient,
    count: int,
    gpus: int = 8,
    cpu: str = "64",
    memory: str = "512Gi",
    prefix: str = "kwok-node",
) -> list[str]:
    """Create `count` kwok Nodes named `<prefix>-<i>` and wait until kwok made each Ready."""
    names = [f"{prefix}-{i}" for i in range(count)]
    for name in names:
        await create_node(api, kwok_node(name, gpus=gpus, cpu=cpu, memory=memory))
    await wait_nodes_ready(api, names)
    return names


async def wait_nodes_ready(
    api: client.ApiClient, names: list[str], timeout: float = NODE_READY_TIMEOUT_S
) -> None:
    pending = set(names)

    async def all_ready() -> bool:
        for name in sorted(pending):
            node = await request_json(api, "GET", f"/api/v1/nodes/{name}")
            if condition_status(node, "Ready") == "True":
                pending.discard(name)
        return not pending

    await wait_for(all_ready, timeout=timeout, what=f"nodes Ready: {sorted(pending)}")


def condition_status(obj: dict[str, Any], kind: str) -> str | None:
    """The status ("True", "False", ...) of condition `kind` of a Node, Pod or Job."""
    for condition in obj.get("status", {}).get("conditions") or []:
        if condition.get("type") == kind:
            return str(condition.get("status"))
    return None


def succeeding_pod(name: str, seconds: float, namespace: str = "default") -> PodBuilder:
    """A bare pod that runs `seconds` once started, then succeeds (bind it: `.node(...)`)."""
    return make_pod(name, namespace).annotation(COMPLETE_AFTER, go_duration(seconds))


def failing_pod(name: str, seconds: float, namespace: str = "default") -> PodBuilder:
    """A bare pod that runs `seconds` once started, then fails with exit code 1."""
    return make_pod(name, namespace).annotation(FAIL_AFTER, go_duration(seconds))


def job_body(
    name: str,
    namespace: str = "default",
    parallelism: int = 1,
    completions: int = 1,
    run_seconds: float = 1.0,
    gpus: int = 0,
    scheduler_name: str = "gpu-scheduler",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    node_name: str | None = None,
    cpu: str | None = None,
    backoff_limit: int | None = None,
) -> dict[str, Any]:
    """A batch/v1 Job whose pods run `run_seconds` on kwok, then succeed.

    `labels` and `annotations` go on the pod template (a PodGroup's label, for instance),
    and the labels on the Job too. `node_name` binds every pod to that Node at creation, so
    no scheduler is needed."""
    pod_annotations = {JOB_POD_DELAY: go_duration(run_seconds), **(annotations or {})}
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    requests: dict[str, str] = {}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    if cpu:
        requests["cpu"] = cpu
    if requests:
        container.setdefault("resources", {})["requests"] = requests
    pod_spec: dict[str, Any] = {
        "schedulerName": scheduler_name,
        "restartPolicy": "Never",
        "containers": [container],
    }
    if node_name:
        pod_spec["nodeName"] = node_name
    spec: dict[str, Any] = {
        "parallelism": parallelism,
        "completions": completions,
        "template": {
            "metadata": {"labels": dict(labels or {}), "annotations": pod_annotations},
            "spec": pod_spec,
        },
    }
    if backoff_limit is not None:
        spec["backoffLimit"] = backoff_limit
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": spec,
    }


async def create_job(api: client.ApiClient, body: dict[str, Any]) -> dict[str, object]:
    namespace = body["metadata"]["namespace"]
    return await request_json(api, "POST", f"/apis/batch/v1/namespaces/{namespace}/jobs", body=body)


async def read_job(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    return await request_json(api, "GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")


async def read_pod(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The pod, or None once it is gone."""
    try:
        return await request_json(api, "GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    except ApiError as err:
        if err.status == 404:
            return None
        raise


async def wait_pod_phase(
    api: client.ApiClient, namespace: str, name: str, phase: str, timeout: float = 30.0
) -> dict[str, Any]:
    """Wait until the pod's status.phase is `phase`; the pod as it was then."""
    seen: dict[str, Any] = {}

    async def reached() -> bool:
        pod = await read_pod(api, namespace, name)
        seen["pod"] = pod
        return pod is not None and pod.get("status", {}).get("phase") == phase

    await wait_for(reached, timeout=timeout, what=f"pod {namespace}/{name} phase {phase}")
    pod: dict[str, Any] = seen["pod"]
    return pod


async def wait_pod_gone(
    api: client.ApiClient, namespace: str, name: str, timeout: float = 30.0
) -> None:
    async def gone() -> bool:
        return await read_pod(api, namespace, name) is None

    await wait_for(gone, timeout=timeout, what=f"pod {namespace}/{name} removed")

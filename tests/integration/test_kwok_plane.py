"""kwok and kube-controller-manager on the test control plane: pods really run, finish and go.

No scheduler runs here: every pod is created already bound (spec.nodeName).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kubernetes_asyncio import client

from batchsched.kube.client import ApiError, request_json
from tests.builders import make_pod
from tests.integration.helpers import create_pod, wait_for
from tests.integration.kwok import (
    condition_status,
    create_job,
    create_kwok_nodes,
    failing_pod,
    job_body,
    read_job,
    read_pod,
    succeeding_pod,
    wait_pod_gone,
    wait_pod_phase,
)

PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"


def seconds_between(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


async def test_a_kwok_node_becomes_ready_and_keeps_a_lease(kwok_api: client.ApiClient) -> None:
    [name] = await create_kwok_nodes(kwok_api, 1, gpus=4, prefix="ready")

    node = await request_json(kwok_api, "GET", f"/api/v1/nodes/{name}")
    assert condition_status(node, "Ready") == "True"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4"  # type: ignore[index]
    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"

    async def lease_held() -> bool:
        try:
            lease = await request_json(kwok_api, "GET", lease_path)
        except ApiError:
            return False
        spec: dict[str, Any] = lease["spec"]  # type: ignore[assignment]
        return bool(spec.get("holderIdentity") and spec.get("renewTime"))

    await wait_for(lease_held, timeout=30, what=f"a Lease for node {name}")


async def test_a_bound_pod_runs_then_succeeds_after_its_delay(kwok_api: client.ApiClient) -> None:
    [node] = await create_kwok_nodes(kwok_api, 1, prefix="run")
    await create_pod(kwok_api, succeeding_pod("runner", seconds=3).gpus(1).node(node))

    running = await wait_pod_phase(kwok_api, "default", "runner", "Running", timeout=20)
    assert running["status"]["podIP"]
    assert condition_status(running, "Ready") == "True"
    done = await wait_pod_phase(kwok_api, "default", "runner", "Succeeded", timeout=30)

    [state] = [s["state"]["terminated"] for s in done["status"]["containerStatuses"]]
    assert state["exitCode"] == 0
    # Timestamps have whole seconds: it ran its 3 s, give or take one.
    assert seconds_between(done["status"]["startTime"], state["finishedAt"]) >= 2


async def test_a_failing_pod_fails_after_its_delay(kwok_api: client.ApiClient) -> None:
    [node] = await create_kwok_nodes(kwok_api, 1, prefix="fail")
    await create_pod(kwok_api, failing_pod("crasher", seconds=1).node(node))

    failed = await wait_pod_phase(kwok_api, "default", "crasher", "Failed", timeout=30)

    [state] = [s["state"]["terminated"] for s in failed["status"]["containerStatuses"]]
    assert state["exitCode"] == 1


async def test_a_pod_without_a_delay_keeps_running(kwok_api: client.ApiClient) -> None:
    [node] = await create_kwok_nodes(kwok_api, 1, prefix="steady")
    await create_pod(kwok_api, make_pod("server").node(node))
    await create_pod(kwok_api, succeeding_pod("marker", seconds=2).node(node))

    await wait_pod_phase(kwok_api, "default", "marker", "Succeeded", timeout=30)
    pod = await read_pod(kwok_api, "default", "server")
    assert pod is not None
    assert pod["status"]["phase"] == "Running"


async def test_a_job_of_two_pods_completes(kwok_api: client.ApiClient) -> None:
    [node] = await create_kwok_nodes(kwok_api, 1, prefix="job")
    body = job_body("train", parallelism=2, completions=2, run_seconds=1, gpus=1, node_name=node)
    await create_job(kwok_api, body)

    job: dict[str, Any] = {}

    async def complete() -> bool:
        job.update(await read_job(kwok_api, "default", "train"))
        return condition_status(job, "Complete") == "True"

    await wait_for(complete, timeout=60, what="Job train Complete")
    assert job["status"]["succeeded"] == 2
    assert job["status"].get("failed", 0) == 0


async def test_deleting_a_job_removes_its_pods(kwok_api: client.ApiClient) -> None:
    [node] = await create_kwok_nodes(kwok_api, 1, prefix="gc")
    await create_job(kwok_api, job_body("short", run_seconds=0, node_name=node))
    selector = [("labelSelector", "batch.kubernetes.io/job-name=short")]

    async def pods_of_job() -> list[dict[str, Any]]:
        listing = await request_json(
            kwok_api, "GET", "/api/v1/namespaces/default/pods", query=selector
        )
        return listing["items"]  # type: ignore[return-value]

    async def job_done() -> bool:
        return condition_status(await read_job(kwok_api, "default", "short"), "Complete") == "True"

    await wait_for(job_done, timeout=60, what="Job short Complete")
    assert len(await pods_of_job()) == 1
    await request_json(
        kwok_api,
        "DELETE",
        "/apis/batch/v1/namespaces/default/jobs/short",
        query=[("propagationPolicy", "Background")],
    )

    async def no_pods() -> bool:
        return not await pods_of_job()

    await wait_for(no_pods, timeout=60, what="the garbage collector deleting Job short's pods")


async def test_a_pdb_gets_its_status_and_the_eviction_api_honours_it(
    kwok_api: client.ApiClient,
) -> None:
    [node] = await create_kwok_nodes(kwok_api, 1, prefix="pdb")
    for name in ("guarded-0", "guarded-1"):
        builder = make_pod(name).label("app", "guarded").node(node)
        await create_pod(kwok_api, builder.set("spec.terminationGracePeriodSeconds", 1))
        await wait_pod_phase(kwok_api, "default", name, "Running", timeout=20)
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guarded"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }
    await request_json(kwok_api, "POST", PDBS, body=pdb)
    try:

        async def one_disruption_allowed() -> bool:
            got = await request_json(kwok_api, "GET", f"{PDBS}/guarded")
            status: dict[str, Any] = got.get("status") or {}  # type: ignore[assignment]
            return status.get("currentHealthy") == 2 and status.get("disruptionsAllowed") == 1

        await wait_for(one_disruption_allowed, timeout=30, what="PDB guarded status")
        await evict(kwok_api, "guarded-0")
        try:
            await evict(kwok_api, "guarded-1")
        except ApiError as err:
            assert err.status == 429
        else:
            raise AssertionError("the second eviction broke the PDB")
    finally:
        await request_json(kwok_api, "DELETE", f"{PDBS}/guarded")


async def evict(api: client.ApiClient, name: str) -> None:
    eviction = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": "default"},
    }
    path = f"/api/v1/namespaces/default/pods/{name}/eviction"
    await request_json(api, "POST", path, body=eviction)


async def test_a_deleted_pod_goes_away_after_its_grace_period(kwok_api: client.ApiClient) -> None:
    [node] = await create_kwok_nodes(kwok_api, 1, prefix="grace")
    builder = make_pod("leaver").node(node).set("spec.terminationGracePeriodSeconds", 2)
    await create_pod(kwok_api, builder)
    await wait_pod_phase(kwok_api, "default", "leaver", "Running", timeout=20)

    deleting = await request_json(kwok_api, "DELETE", "/api/v1/namespaces/default/pods/leaver")

    assert deleting["metadata"]["deletionTimestamp"]  # type: ignore[index]
    await wait_pod_gone(kwok_api, "default", "leaver", timeout=30)

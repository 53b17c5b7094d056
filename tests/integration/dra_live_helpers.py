"""Talking DRA to the real API server, for any scheduler under test (kube-scheduler in
test_dra_kube_baseline.py, batchsched in test_dra_live.py): the fixture nodes and objects
installed and removed, pods and claims read back and judged, and every watch event on them
recorded with its arrival time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from kubernetes_asyncio import client

from batchsched.kube.client import MERGE_PATCH, open_stream, request_json
from tests.integration.conftest import delete_pods, ignore_gone
from tests.integration.dra_objects import (
    CLAIM_FINALIZER,
    DGX_NODE,
    DRIVER,
    H100_SXM,
    NRT_PATH,
    PCIE_NODE,
    PCIE_ROOT,
    RESOURCE_PATH,
    PodClaim,
    VerdictScenario,
    baseline_cluster,
    baseline_nodes,
    claim_devices,
    claim_pod,
    claim_spec,
    collection_path,
    dgx_gpus,
    pcie_gpus,
    product_is,
    request,
    resource_claim,
    resource_claim_template,
)
from tests.integration.helpers import create_node, create_pod, wait_for
from tests.integration.kwok import COMPLETE_AFTER, read_pod, wait_nodes_ready

NS = "default"
CLAIMS = f"{RESOURCE_PATH}/namespaces/{NS}/resourceclaims"
TEMPLATES = f"{RESOURCE_PATH}/namespaces/{NS}/resourceclaimtemplates"
PODS = f"/api/v1/namespaces/{NS}/pods"
VERDICT_TIMEOUT_S = 60.0

ROOT_OF = {
    (node, gpu.device): gpu.pcie_root
    for node, gpus in ((DGX_NODE, dgx_gpus(DGX_NODE)), (PCIE_NODE, pcie_gpus(PCIE_NODE, 4)))
    for gpu in gpus
}


# The cluster


@contextlib.asynccontextmanager
async def fixture_cluster(api: client.ApiClient) -> AsyncIterator[client.ApiClient]:
    """The DGX-like and the L40S KWOK nodes, Ready, with baseline_cluster(): every DRA object
    removed again afterwards (the `api` fixture removes only Nodes, Pods and PodGroups)."""
    await delete_dra_objects(api)
    for node in baseline_nodes():
        await create_node(api, node)
    await wait_nodes_ready(api, [DGX_NODE, PCIE_NODE])
    for obj in baseline_cluster():
        await create(api, obj)
    try:
        yield api
    finally:
        await delete_pods(api)
        await delete_dra_objects(api)


async def create(api: client.ApiClient, obj: dict[str, Any]) -> dict[str, Any]:
    return await request_json(api, "POST", collection_path(obj), body=obj)


async def delete_dra_objects(api: client.ApiClient) -> None:
    """Claims first, and waited for: an allocated claim goes only once kube-controller-manager
    has dropped its finalizer."""
    await request_json(api, "DELETE", CLAIMS)

    async def no_claims() -> bool:
        return not (await request_json(api, "GET", CLAIMS)).get("items")

    await wait_for(no_claims, timeout=30, what="every ResourceClaim deleted")
    for path in (
        TEMPLATES,
        f"{RESOURCE_PATH}/resourceslices",
        f"{RESOURCE_PATH}/deviceclasses",
        NRT_PATH,
    ):
        await request_json(api, "DELETE", path)


# Reading pods and claims


def node_name(pod: dict[str, Any]) -> str:
    return str(pod.get("spec", {}).get("nodeName") or "")


def scheduled(pod: dict[str, Any]) -> dict[str, Any] | None:
    conditions = pod.get("status", {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "PodScheduled"), None)


def verdict(pod: dict[str, Any] | None) -> str:
    """ "running" (bound, and KWOK started it), "unschedulable", or "" (not decided yet)."""
    if pod is None:
        return ""
    if node_name(pod) and pod.get("status", {}).get("phase") == "Running":
        return "running"
    condition = scheduled(pod) or {}
    if (condition.get("status"), condition.get("reason")) == ("False", "Unschedulable"):
        return "unschedulable"
    return ""


async def wait_verdicts(
    api: client.ApiClient, names: tuple[str, ...], reason: str = ""
) -> dict[str, Any]:
    """name -> the pod, once each is Running, or unschedulable with a FailedScheduling Event
    naming `reason` (a scheduler may say first that it waits for a claim to be made)."""
    pods: dict[str, Any] = {}

    async def decided() -> bool:
        for name in names:
            pods[name] = await read_pod(api, NS, name)
        if not all(verdict(p) for p in pods.values()):
            return False
        pending = [n for n, p in pods.items() if verdict(p) == "unschedulable"]
        return not reason or all([await scheduling_failures(api, n, reason) for n in pending])

    try:
        await wait_for(decided, timeout=VERDICT_TIMEOUT_S, what=f"a verdict on each of {names}")
    except AssertionError as err:
        raise AssertionError(f"{err}; PodScheduled: {conditions(pods)}") from None
    return pods


def conditions(pods: dict[str, Any]) -> dict[str, Any]:
    """name -> the pod's PodScheduled condition (what a failed wait shows)."""
    return {name: scheduled(pod or {}) for name, pod in pods.items()}


async def wait_verdict(api: client.ApiClient, name: str, expected: str) -> dict[str, Any]:
    """The pod once its verdict is `expected` (a pending pod may still become Running)."""
    seen: dict[str, Any] = {}

    async def reached() -> bool:
        seen["pod"] = await read_pod(api, NS, name)
        return verdict(seen["pod"]) == expected

    await wait_for(reached, timeout=VERDICT_TIMEOUT_S, what=f"{name} {expected}")
    pod: dict[str, Any] = seen["pod"]
    return pod


async def claim_of(
    api: client.ApiClient, pod: dict[str, Any], entry: str = "gpus"
) -> dict[str, Any]:
    """The claim a pod's entry resolved to: a generated claim's name is in the pod's status
    (set by the resourceclaim controller); a shared claim is named in its spec."""
    for ref in pod["spec"].get("resourceClaims") or []:
        if ref["name"] == entry and ref.get("resourceClaimName"):
            return await read_claim(api, ref["resourceClaimName"])
    statuses = pod.get("status", {}).get("resourceClaimStatuses") or []
    return await read_claim(
        api, next(s["resourceClaimName"] for s in statuses if s["name"] == entry)
    )


async def read_claim(api: client.ApiClient, name: str) -> dict[str, Any]:
    return await request_json(api, "GET", f"{CLAIMS}/{name}")


def node_selector(node: str) -> dict[str, Any]:
    """The allocation's nodeSelector for devices local to `node`."""
    match = {"key": "metadata.name", "operator": "In", "values": [node]}
    return {"nodeSelectorTerms": [{"matchFields": [match]}]}


def consumers(claim: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (r.get("resource", ""), r.get("name", ""), r.get("uid", ""))
        for r in (claim.get("status") or {}).get("reservedFor") or []
    ]


def check_allocation(claim: dict[str, Any], pods: list[dict[str, Any]], devices: int) -> str:
    """The claim is allocated `devices` devices of the node its pods run on, reserved for
    exactly those pods, and protected by the scheduler's finalizer; the node."""
    nodes = {node_name(p) for p in pods}
    assert len(nodes) == 1, f"the pods sharing a claim run on one node, not {nodes}"
    node = nodes.pop()
    status = claim.get("status") or {}
    assert status.get("allocation"), f"claim {claim['metadata']['name']} unallocated: {status}"
    allocation = status["allocation"]
    results = allocation["devices"]["results"]
    assert len(results) == devices, results
    assert {(r["driver"], r["pool"]) for r in results} == {(DRIVER, node)}, results
    assert allocation["nodeSelector"] == node_selector(node), allocation
    expected = sorted(("pods", p["metadata"]["name"], p["metadata"]["uid"]) for p in pods)
    assert sorted(consumers(claim)) == expected, f"reservedFor {consumers(claim)}"
    assert CLAIM_FINALIZER in claim["metadata"].get("finalizers", []), claim["metadata"]
    return node


def shares_root(claim: dict[str, Any]) -> bool:
    return len({ROOT_OF[device] for device in claim_devices(claim)}) == 1


async def shared_claim_running(
    api: client.ApiClient, scheduler_name: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """ResourceClaim "shared" (2 H100s) and pods "a" and "b" using it, both Running, the claim
    allocated on the DGX node and reserved for both: the claim, and the pods."""
    spec = claim_spec(request(count=2, selectors=[product_is(H100_SXM.name)]))
    await create(api, resource_claim("shared", spec, NS))
    claims = [PodClaim("gpus", claim="shared")]
    for name in ("a", "b"):
        await create_pod(api, claim_pod(name, claims, scheduler_name, NS))
    pods = [await wait_verdict(api, name, "running") for name in ("a", "b")]
    claim = await claim_of(api, pods[0])
    assert check_allocation(claim, pods, 2) == DGX_NODE
    return claim, pods


@dataclass(frozen=True, slots=True)
class Handover:
    claim: dict[str, Any]  # the first pod's claim, as allocated
    second: dict[str, Any]  # the waiting pod, Running
    again: dict[str, Any]  # its claim, as allocated
    finished: float  # time.monotonic() just before the first pod was made to finish


async def hand_over_every_h100(api: client.ApiClient, scheduler_name: str, reason: str) -> Handover:
    """Pod "first" gets all 8 H100s (a claim from template "every-h100"); "second", alike,
    is unschedulable (a FailedScheduling Event naming `reason`) until "first" finishes, then
    runs on the same GPUs."""
    every_h100 = claim_spec(request(count=8, selectors=[product_is(H100_SXM.name)]))
    await create(api, resource_claim_template("every-h100", every_h100, NS))
    claims = [PodClaim("gpus", template="every-h100")]
    await create_pod(api, claim_pod("first", claims, scheduler_name, NS))
    first = await wait_verdict(api, "first", "running")
    claim = await claim_of(api, first)
    assert check_allocation(claim, [first], 8) == DGX_NODE
    await create_pod(api, claim_pod("second", claims, scheduler_name, NS))
    await wait_verdict(api, "second", "unschedulable")
    await failed_scheduling(api, "second", reason)
    finished = time.monotonic()
    await finish(api, "first")
    second = await wait_verdict(api, "second", "running")
    again = await claim_of(api, second)
    assert claim_devices(again) == claim_devices(claim)
    assert check_allocation(again, [second], 8) == DGX_NODE
    return Handover(claim, second, again, finished)


async def events_for(api: client.ApiClient, name: str) -> list[dict[str, Any]]:
    """The pod's Events (events.k8s.io, which kube-scheduler writes). Not live.py's: that
    module loads batchsched's runtime, which this file does not need."""
    query = [("fieldSelector", f"regarding.name={name}")]
    path = f"/apis/events.k8s.io/v1/namespaces/{NS}/events"
    found: dict[str, Any] = await request_json(api, "GET", path, query=query)
    return list(found.get("items") or [])


async def scheduling_failures(api: client.ApiClient, name: str, reason: str) -> list[str]:
    """The notes of the FailedScheduling Events posted for the pod that name `reason`."""
    events = await events_for(api, name)
    return [
        str(e.get("note"))
        for e in events
        if e.get("reason") == "FailedScheduling" and reason in str(e.get("note"))
    ]


async def failed_scheduling(api: client.ApiClient, name: str, reason: str) -> str:
    """The note of a FailedScheduling Event posted for the pod that names `reason`."""
    notes: list[str] = []

    async def posted() -> bool:
        notes[:] = await scheduling_failures(api, name, reason)
        return bool(notes)

    await wait_for(posted, timeout=30, what=f"a FailedScheduling event for {name}: {reason}")
    return notes[-1]


async def finish(api: client.ApiClient, name: str) -> None:
    """KWOK makes a running pod Succeeded as soon as it carries this annotation."""
    patch = {"metadata": {"annotations": {COMPLETE_AFTER: "0s"}}}
    await request_json(api, "PATCH", f"{PODS}/{name}", body=patch, content_type=MERGE_PATCH)


async def check_verdicts(
    api: client.ApiClient, case: VerdictScenario, pods: dict[str, Any], reason: str
) -> None:
    """`pods` (name -> pod, each decided) got the scenario's verdict: `case.bound` of them
    Running, each with a claim of `case.devices` devices on one of `case.nodes` (under one
    PCIe root where the claim asks so), no device in two claims; the others unbound, their
    claims unallocated, with a FailedScheduling Event and a PodScheduled=False condition
    naming `reason`."""
    running = [p for p in pods.values() if verdict(p) == "running"]
    assert len(running) == case.bound, {n: verdict(p) for n, p in pods.items()}
    held: list[tuple[str, str]] = []
    for pod in running:
        claim = await claim_of(api, pod)
        assert check_allocation(claim, [pod], case.devices) in case.nodes
        if PCIE_ROOT in json.dumps(case.claim):
            assert shares_root(claim), claim_devices(claim)
        held += claim_devices(claim)
    assert len(held) == len(set(held)), f"a device allocated twice: {held}"
    for name, pod in pods.items():
        if verdict(pod) != "running":
            assert not claim_devices(await claim_of(api, pod))
            await failed_scheduling(api, name, reason)
            await wait_condition(api, name, reason)


async def wait_condition(api: client.ApiClient, name: str, reason: str) -> None:
    """The pod, unbound, has a PodScheduled=False condition naming `reason`. A pod whose
    condition was written less than 5 s before gets the newer message up to about 6 s later
    (kube/pod_status.py), so it is waited for, not read once."""
    seen: dict[str, Any] = {}

    async def named() -> bool:
        now = await read_pod(api, NS, name) or {}
        assert not node_name(now)
        seen.update(scheduled(now) or {})
        return reason in str(seen.get("message"))

    await wait_for(named, timeout=30, what=f"{name}'s PodScheduled naming {reason}: {seen}")


# Recording what happens, when


@dataclass(frozen=True, slots=True)
class Seen:
    at: float  # time.monotonic() when the event arrived
    resource: str  # "pods" | "resourceclaims"
    type: str  # ADDED | MODIFIED | DELETED
    obj: dict[str, Any]

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def uid(self) -> str:
        return str(self.obj["metadata"]["uid"])


def step(seen: Seen) -> str:
    """What a claim event shows, in the words of RELEASE_STEPS."""
    if seen.type == "DELETED":
        return "DELETED"
    finalizers = seen.obj["metadata"].get("finalizers") or []
    if claim_devices(seen.obj) or consumers(seen.obj):
        held = "allocated" if claim_devices(seen.obj) else "unallocated"
        return f"{seen.type}: {held}, reserved for {len(consumers(seen.obj))}"
    if CLAIM_FINALIZER in finalizers:
        return f"{seen.type}: unreserved and deallocated"
    return f"{seen.type}: finalizer removed"


@dataclass
class Recorder:
    """Every watch event on pods and ResourceClaims of NS, stamped on arrival."""

    seen: list[Seen] = field(default_factory=list)

    def first(
        self, resource: str, name: str, test: Callable[[Seen], bool], after: float = 0.0
    ) -> Seen:
        """The first event of that object, arrived at `after` or later, that passes `test`."""
        found = [
            s
            for s in self.seen
            if s.resource == resource and s.name == name and s.at >= after and test(s)
        ]
        assert found, f"no {resource} event of {name} matched"
        return found[0]

    def deleted(self, claim: dict[str, Any]) -> bool:
        return any(s.type == "DELETED" for s in self._of(claim))

    def unprotected(self, claim: dict[str, Any]) -> bool:
        """The claim was deallocated and its finalizer dropped, and still exists."""
        last = self._of(claim)[-1:]
        return bool(last) and last[0].type != "DELETED" and step(last[0]) == RELEASE_STEPS[1]

    def claim_history(self, claim: dict[str, Any], since: float) -> list[tuple[float, str]]:
        """(arrival, step) of each change of the claim from `since` on."""
        return [(s.at, step(s)) for s in self._of(claim) if s.at >= since]

    def _of(self, claim: dict[str, Any]) -> list[Seen]:
        uid = claim["metadata"]["uid"]
        return [s for s in self.seen if s.resource == "resourceclaims" and s.uid == uid]

    async def follow(self, api: client.ApiClient, resource: str, started: asyncio.Event) -> None:
        path = CLAIMS if resource == "resourceclaims" else PODS
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None, sock_connect=10)
        resp = await open_stream(api, path, [("watch", "true")], timeout)
        started.set()
        try:
            async for line in resp.content:
                if line.strip():
                    event = json.loads(line)
                    self.seen.append(
                        Seen(time.monotonic(), resource, event["type"], event["object"])
                    )
        finally:
            resp.release()


@contextlib.asynccontextmanager
async def recording(api: client.ApiClient) -> AsyncIterator[Recorder]:
    recorder = Recorder()
    streams = {r: asyncio.Event() for r in ("pods", "resourceclaims")}
    tasks = [asyncio.create_task(recorder.follow(api, r, e)) for r, e in streams.items()]
    try:
        await wait_for(lambda: all(e.is_set() for e in streams.values()), what="watches open")
        yield recorder
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# What a generated claim goes through once its pod is done or gone.
RELEASE_STEPS = [
    "MODIFIED: unreserved and deallocated",
    "MODIFIED: finalizer removed",
    "DELETED",
]


async def delete_now(api: client.ApiClient, name: str) -> None:
    await ignore_gone(
        request_json(api, "DELETE", f"{PODS}/{name}", query=[("gracePeriodSeconds", "0")])
    )

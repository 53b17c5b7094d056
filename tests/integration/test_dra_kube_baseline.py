"""The DRA fixtures (tests/integration/dra_objects.py) against the real thing: the v1.34 API
server stores them, and kube-scheduler v1.34 (default-scheduler), with kube-controller-manager's
resourceclaim controller and KWOK's kubelets, gives each scenario of VERDICT_SCENARIOS its
verdict: bound and Running with the claim allocated, or Pending with FailedScheduling.

What it pins down for batchsched's own DRA allocator: the shape of an allocated claim
(status.allocation.devices.results, nodeSelector, reservedFor), the finalizer the scheduler
adds, and who frees devices: when the last pod using a claim finishes or goes,
kube-controller-manager clears reservedFor and the allocation in one status update, and
deletes a claim generated from a template; the scheduler does neither.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, get_args

import aiohttp
import pytest
from kubernetes_asyncio import client

from batchsched.kube.client import MERGE_PATCH, open_stream, request_json
from gpu.nrt import parse_nrt
from tests.integration.conftest import delete_pods, ignore_gone
from tests.integration.control_plane import ControlPlane
from tests.integration.dra_objects import (
    CLAIM_FINALIZER,
    DGX_NODE,
    DRIVER,
    GPU_CLASS,
    H100_SXM,
    NRT_PATH,
    PCI_BUS_ID,
    PCIE_NODE,
    PCIE_ROOT,
    RESOURCE_PATH,
    VERDICT_SCENARIOS,
    DriverRelease,
    PodClaim,
    VerdictScenario,
    baseline_cluster,
    baseline_nodes,
    claim_devices,
    claim_pod,
    claim_spec,
    collection_path,
    dgx_gpus,
    dgx_h100_slice,
    dgx_nrt,
    gpu_device_class,
    nvml_bus_id,
    pcie_gpus,
    pcie_server_slice,
    product_is,
    request,
    resource_claim,
    resource_claim_template,
)
from tests.integration.helpers import create_node, create_pod, wait_for
from tests.integration.kwok import COMPLETE_AFTER, read_pod, wait_nodes_ready

log = logging.getLogger(__name__)

NS = "default"
KUBE_SCHEDULER = "default-scheduler"
CLAIMS = f"{RESOURCE_PATH}/namespaces/{NS}/resourceclaims"
TEMPLATES = f"{RESOURCE_PATH}/namespaces/{NS}/resourceclaimtemplates"
PODS = f"/api/v1/namespaces/{NS}/pods"
VERDICT_TIMEOUT_S = 60.0
# kube-scheduler's message for a pod whose claims no node's devices can satisfy.
CANNOT_ALLOCATE = "cannot allocate all claims"

ROOT_OF = {
    (node, gpu.device): gpu.pcie_root
    for node, gpus in ((DGX_NODE, dgx_gpus(DGX_NODE)), (PCIE_NODE, pcie_gpus(PCIE_NODE, 4)))
    for gpu in gpus
}


# Fixtures


@pytest.fixture(scope="module")
def kube_scheduler(kwok_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The real kube-scheduler (scripts/control-plane.sh scheduler-up) for this module only:
    it binds every pod whose schedulerName is default-scheduler."""
    kwok_plane.script("scheduler-up")
    try:
        yield kwok_plane
    finally:
        kwok_plane.script("scheduler-down")


@pytest.fixture
async def dra_cluster(
    kube_scheduler: ControlPlane, kwok_api: client.ApiClient
) -> AsyncIterator[client.ApiClient]:
    """The DGX-like and the L40S KWOK nodes, Ready, with baseline_cluster(): every DRA object
    removed again afterwards (the `api` fixture removes only Nodes, Pods and PodGroups)."""
    api = kwok_api
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


async def wait_verdicts(api: client.ApiClient, names: tuple[str, ...]) -> dict[str, Any]:
    """name -> the pod, once each is Running or unschedulable."""
    pods: dict[str, Any] = {}

    async def decided() -> bool:
        for name in names:
            pods[name] = await read_pod(api, NS, name)
        return all(verdict(p) for p in pods.values())

    await wait_for(decided, timeout=VERDICT_TIMEOUT_S, what=f"a verdict on each of {names}")
    return pods


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
    allocation = claim["status"]["allocation"]
    results = allocation["devices"]["results"]
    assert len(results) == devices
    assert {(r["driver"], r["pool"]) for r in results} == {(DRIVER, node)}
    assert allocation["nodeSelector"] == node_selector(node)
    assert sorted(consumers(claim)) == sorted(
        ("pods", p["metadata"]["name"], p["metadata"]["uid"]) for p in pods
    )
    assert CLAIM_FINALIZER in claim["metadata"].get("finalizers", [])
    return node


def shares_root(claim: dict[str, Any]) -> bool:
    return len({ROOT_OF[device] for device in claim_devices(claim)}) == 1


async def events_for(api: client.ApiClient, name: str) -> list[dict[str, Any]]:
    """The pod's Events (events.k8s.io, which kube-scheduler writes). Not live.py's: that
    module loads batchsched's runtime, which this file does not need."""
    query = [("fieldSelector", f"regarding.name={name}")]
    path = f"/apis/events.k8s.io/v1/namespaces/{NS}/events"
    found: dict[str, Any] = await request_json(api, "GET", path, query=query)
    return list(found.get("items") or [])


async def failed_scheduling(api: client.ApiClient, name: str) -> str:
    """The note of the FailedScheduling Event kube-scheduler posts for the pod."""
    notes: list[str] = []

    async def posted() -> bool:
        events = await events_for(api, name)
        notes[:] = [str(e.get("note")) for e in events if e.get("reason") == "FailedScheduling"]
        return bool(notes)

    await wait_for(posted, timeout=30, what=f"a FailedScheduling event for {name}")
    return notes[-1]


async def finish(api: client.ApiClient, name: str) -> None:
    """KWOK makes a running pod Succeeded as soon as it carries this annotation."""
    patch = {"metadata": {"annotations": {COMPLETE_AFTER: "0s"}}}
    await request_json(api, "PATCH", f"{PODS}/{name}", body=patch, content_type=MERGE_PATCH)


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


# The objects as the API server stores them


@pytest.mark.parametrize("release", get_args(DriverRelease))
async def test_the_api_server_stores_the_driver_objects_as_published(
    api: client.ApiClient, release: DriverRelease
) -> None:
    await delete_dra_objects(api)
    try:
        stored_class = await create(api, gpu_device_class())
        sent = [dgx_h100_slice(DGX_NODE, release), pcie_server_slice(PCIE_NODE, 4, release=release)]
        stored = [await create(api, s) for s in sent]
        nrt = await create(api, dgx_nrt(DGX_NODE))
    finally:
        await delete_dra_objects(api)
    # DRAExtendedResource is alpha and off in 1.34: the field is dropped, the selector kept.
    assert stored_class["spec"] == {"selectors": gpu_device_class()["spec"]["selectors"]}
    assert [s["spec"] for s in stored] == [s["spec"] for s in sent]
    assert [s["metadata"]["name"] for s in stored] == [s["metadata"]["name"] for s in sent]
    topology = parse_nrt(nrt).topology
    assert topology is not None and topology.islands == ((0, 1, 2, 3), (4, 5, 6, 7))


def test_the_topology_and_the_slice_name_the_same_gpus() -> None:
    """The join batchsched makes: a slice device and an NRT GPU are one GPU when their uuids
    are equal, and their bus ids are one in two spellings."""
    topology = parse_nrt(dgx_nrt(DGX_NODE)).topology
    assert topology is not None
    devices = dgx_h100_slice(DGX_NODE)["spec"]["devices"]
    by_uuid = {d["attributes"]["uuid"]["string"]: d for d in devices}
    for gpu in topology.gpus:
        device = by_uuid[gpu.uuid]
        assert device["name"] == f"gpu-{gpu.index}"
        assert nvml_bus_id(device["attributes"][PCI_BUS_ID]["string"]) == gpu.pci_bus_id
    roots = [
        {by_uuid[topology.gpus[i].uuid]["attributes"][PCIE_ROOT]["string"] for i in island}
        for island in topology.islands
    ]
    assert [len(r) for r in roots] == [1, 1] and roots[0] != roots[1]


# kube-scheduler's verdicts


@pytest.mark.parametrize("case", VERDICT_SCENARIOS, ids=lambda s: s.name)
async def test_kube_scheduler_gives_the_scenario_its_verdict(
    dra_cluster: client.ApiClient, case: VerdictScenario
) -> None:
    api = dra_cluster
    await create(api, case.template(NS))
    for builder in case.pod_builders(KUBE_SCHEDULER, NS):
        await create_pod(api, builder)
    pods = await wait_verdicts(api, case.pod_names())
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
    for pod in pods.values():
        if verdict(pod) == "unschedulable":
            assert not claim_devices(await claim_of(api, pod))
            assert CANNOT_ALLOCATE in await failed_scheduling(api, pod["metadata"]["name"])
            assert not node_name(await read_pod(api, NS, pod["metadata"]["name"]) or {})


# Lifecycle: allocation, release, reuse


async def test_a_finished_pod_frees_its_gpus_for_the_pod_waiting_on_them(
    dra_cluster: client.ApiClient,
) -> None:
    """Its generated claim is released and deallocated in one status update, loses the
    scheduler's finalizer, and is deleted (kube-controller-manager: the pod is done); the
    waiting pod gets the same GPUs. A deleted pod's claim goes the same way."""
    api = dra_cluster
    every_h100 = claim_spec(request(count=8, selectors=[product_is(H100_SXM.name)]))
    await create(api, resource_claim_template("every-h100", every_h100, NS))
    claims = [PodClaim("gpus", template="every-h100")]
    async with recording(api) as rec:
        await create_pod(api, claim_pod("first", claims, KUBE_SCHEDULER, NS))
        first = await wait_verdict(api, "first", "running")
        claim = await claim_of(api, first)
        assert check_allocation(claim, [first], 8) == DGX_NODE
        await create_pod(api, claim_pod("second", claims, KUBE_SCHEDULER, NS))
        await wait_verdict(api, "second", "unschedulable")
        finished = time.monotonic()
        await finish(api, "first")
        second = await wait_verdict(api, "second", "running")
        await wait_for(lambda: rec.deleted(claim), timeout=30, what="the first claim deleted")
        again = await claim_of(api, second)
        assert claim_devices(again) == claim_devices(claim)
        removed = time.monotonic()
        await delete_now(api, "second")
        await wait_for(lambda: rec.deleted(again), timeout=30, what="the second claim deleted")
    assert node_name(second) == DGX_NODE
    done = rec.first("pods", "first", lambda s: s.obj["status"].get("phase") == "Succeeded")
    bound = rec.first("pods", "second", lambda s: bool(node_name(s.obj)))
    after_done = rec.claim_history(claim, finished)
    after_delete = rec.claim_history(again, removed)
    for history in (after_done, after_delete):
        assert [step for _, step in history] == RELEASE_STEPS, history
    # The record (pytest -o log_cli=true -o log_cli_level=INFO shows it).
    log.info("allocated claim status: %s", json.dumps(claim["status"]))
    log.info("pod Succeeded seen %.3fs after the patch; from then on:", done.at - finished)
    for at, what in after_done:
        log.info("  claim %s +%.3fs", what, at - done.at)
    log.info("  waiting pod bound +%.3fs", bound.at - done.at)
    log.info("pod deleted (grace 0); from the DELETE on:")
    for at, what in after_delete:
        log.info("  claim %s +%.3fs", what, at - removed)


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


async def test_a_shared_claim_serves_two_pods_and_is_deallocated_after_the_last(
    dra_cluster: client.ApiClient,
    kube_scheduler: ControlPlane,
) -> None:
    """Both pods run on the node of the claim's devices; one gone, the other keeps them; the
    last one done, kube-controller-manager deallocates the claim (with kube-scheduler
    stopped, so it is not the scheduler) and keeps it for the next user."""
    api = dra_cluster
    spec = claim_spec(request(count=2, selectors=[product_is(H100_SXM.name)]))
    await create(api, resource_claim("shared", spec, NS))
    claims = [PodClaim("gpus", claim="shared")]
    async with recording(api) as rec:
        for name in ("a", "b"):
            await create_pod(api, claim_pod(name, claims, KUBE_SCHEDULER, NS))
        pods = [await wait_verdict(api, name, "running") for name in ("a", "b")]
        claim = await claim_of(api, pods[0])
        assert check_allocation(claim, pods, 2) == DGX_NODE
        await delete_now(api, "a")

        async def only_b() -> bool:
            return [n for _, n, _ in consumers(await read_claim(api, "shared"))] == ["b"]

        await wait_for(only_b, timeout=30, what="the claim reserved for b alone")
        assert claim_devices(await read_claim(api, "shared")) == claim_devices(claim)
        await asyncio.to_thread(kube_scheduler.script, "scheduler-down")
        try:
            finished = time.monotonic()
            await finish(api, "b")
            await wait_for(lambda: rec.unprotected(claim), timeout=30, what="claim deallocated")
        finally:
            await asyncio.to_thread(kube_scheduler.script, "scheduler-up")
    final = await read_claim(api, "shared")
    assert not consumers(final) and not claim_devices(final)
    assert "deletionTimestamp" not in final["metadata"]
    gone = rec.first("pods", "a", lambda s: s.type == "DELETED")
    both = rec.first("resourceclaims", "shared", lambda s: len(consumers(s.obj)) == 2)
    released = rec.first("resourceclaims", "shared", lambda s: len(consumers(s.obj)) == 1, both.at)
    done = rec.first("pods", "b", lambda s: s.obj["status"].get("phase") == "Succeeded")
    history = rec.claim_history(claim, finished)
    assert [step for _, step in history] == RELEASE_STEPS[:2], history
    log.info("shared claim: pod a deleted -> b alone reserved +%.3fs", released.at - gone.at)
    log.info("pod b Succeeded (kube-scheduler stopped); from then on:")
    for at, what in history:
        log.info("  claim %s +%.3fs", what, at - done.at)


def test_the_scenarios_name_their_objects_uniquely() -> None:
    keys = [s.key for s in VERDICT_SCENARIOS]
    assert len(keys) == len(set(keys))
    assert all(s.claim["devices"]["requests"] for s in VERDICT_SCENARIOS)
    assert GPU_CLASS in json.dumps([s.claim for s in VERDICT_SCENARIOS])

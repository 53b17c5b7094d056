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
import json
import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import get_args

import pytest
from kubernetes_asyncio import client

from gpu.nrt import parse_nrt
from tests.integration.control_plane import ControlPlane
from tests.integration.dra_live_helpers import (
    NS,
    RELEASE_STEPS,
    check_verdicts,
    consumers,
    create,
    delete_dra_objects,
    delete_now,
    finish,
    fixture_cluster,
    hand_over_every_h100,
    node_name,
    read_claim,
    recording,
    shared_claim_running,
    wait_verdicts,
)
from tests.integration.dra_objects import (
    DGX_NODE,
    GPU_CLASS,
    PCI_BUS_ID,
    PCIE_NODE,
    PCIE_ROOT,
    VERDICT_SCENARIOS,
    DriverRelease,
    VerdictScenario,
    claim_devices,
    dgx_h100_slice,
    dgx_nrt,
    gpu_device_class,
    nvml_bus_id,
    pcie_server_slice,
)
from tests.integration.helpers import create_pod, wait_for

log = logging.getLogger(__name__)

KUBE_SCHEDULER = "default-scheduler"
# kube-scheduler's message for a pod whose claims no node's devices can satisfy.
CANNOT_ALLOCATE = "cannot allocate all claims"


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
    """dra_live_helpers.fixture_cluster, with kube-scheduler running."""
    async with fixture_cluster(kwok_api) as api:
        yield api


# The objects as the API server stores them


@pytest.mark.parametrize("release", get_args(DriverRelease))
async def test_the_api_server_stores_the_driver_objects_as_published(
    api: client.ApiClient, control_plane: ControlPlane, release: DriverRelease
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
    # Beta and on from 1.36: the class is stored as sent.
    sent_class = gpu_device_class()["spec"]
    if control_plane.minor < 36:
        sent_class = {"selectors": sent_class["selectors"]}
    assert stored_class["spec"] == sent_class
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
    await check_verdicts(api, case, pods, CANNOT_ALLOCATE)


# Lifecycle: allocation, release, reuse


async def test_a_finished_pod_frees_its_gpus_for_the_pod_waiting_on_them(
    dra_cluster: client.ApiClient,
) -> None:
    """Its generated claim is released and deallocated in one status update, loses the
    scheduler's finalizer, and is deleted (kube-controller-manager: the pod is done); the
    waiting pod gets the same GPUs. A deleted pod's claim goes the same way."""
    api = dra_cluster
    async with recording(api) as rec:
        handed = await hand_over_every_h100(api, KUBE_SCHEDULER, CANNOT_ALLOCATE)
        claim, again = handed.claim, handed.again
        await wait_for(lambda: rec.deleted(claim), timeout=30, what="the first claim deleted")
        removed = time.monotonic()
        await delete_now(api, "second")
        await wait_for(lambda: rec.deleted(again), timeout=30, what="the second claim deleted")
    assert node_name(handed.second) == DGX_NODE
    done = rec.first("pods", "first", lambda s: s.obj["status"].get("phase") == "Succeeded")
    bound = rec.first("pods", "second", lambda s: bool(node_name(s.obj)))
    after_done = rec.claim_history(claim, handed.finished)
    after_delete = rec.claim_history(again, removed)
    for history in (after_done, after_delete):
        # A change made before the DELETE may arrive on the watch after it (the waiting pod's
        # allocation, moments earlier): leading "allocated" steps are the claim before it.
        steps = [step for _, step in history]
        while steps and steps[0].startswith("MODIFIED: allocated"):
            steps.pop(0)
        # Deallocated first and deleted last; the controller may set deletionTimestamp
        # before it removes its finalizer (an update that reads as deallocated again).
        assert steps[0] == RELEASE_STEPS[0] and steps[-1] == RELEASE_STEPS[-1], history
        assert set(steps[1:-1]) <= set(RELEASE_STEPS[:2]), history
    # The record (pytest -o log_cli=true -o log_cli_level=INFO shows it).
    log.info("allocated claim status: %s", json.dumps(claim["status"]))
    log.info("pod Succeeded seen %.3fs after the patch; from then on:", done.at - handed.finished)
    for at, what in after_done:
        log.info("  claim %s +%.3fs", what, at - done.at)
    log.info("  waiting pod bound +%.3fs", bound.at - done.at)
    log.info("pod deleted (grace 0); from the DELETE on:")
    for at, what in after_delete:
        log.info("  claim %s +%.3fs", what, at - removed)


async def test_a_shared_claim_serves_two_pods_and_is_deallocated_after_the_last(
    dra_cluster: client.ApiClient,
    kube_scheduler: ControlPlane,
) -> None:
    """Both pods run on the node of the claim's devices; one gone, the other keeps them; the
    last one done, kube-controller-manager deallocates the claim (with kube-scheduler
    stopped, so it is not the scheduler) and keeps it for the next user."""
    api = dra_cluster
    async with recording(api) as rec:
        claim, _ = await shared_claim_running(api, KUBE_SCHEDULER)
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

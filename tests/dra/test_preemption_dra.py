"""Preemption frees devices: a pod whose claim needs GPUs that lower-priority pods' claims hold
evicts those pods (the resourceclaim controller then deallocates their claims), and a claim
shared with a pod that stays frees nothing."""

from __future__ import annotations

from typing import Any

from batchsched.dra.parse import parse_device_class, parse_resource_claim, parse_resource_slice
from batchsched.model.pod import PodView
from tests.builders import make_node, make_pod
from tests.dra.builders import claim, claiming, device_class, dgx_slice, exact
from tests.runtime.test_preempting import World, world


def allocated(name: str, devices: range, users: list[PodView]) -> dict[str, Any]:
    """A claim allocated GPUs `devices` of n1 and reserved for `users`."""
    body = claim(name, exact("gpu", len(devices)))
    body["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": "gpu.nvidia.com",
                        "pool": "n1",
                        "device": f"gpu-{i}",
                    }
                    for i in devices
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": u.name, "uid": u.uid} for u in users],
    }
    return body


def dra_world(victims: list[tuple[str, range, list[PodView]]]) -> World:
    w = world()
    dra = w.scheduler.cache.snapshot.dra
    dra.set_class(parse_device_class(device_class()))
    w.nodes.on_add(make_node("n1").cpu("64").view())
    dra.set_slice(parse_resource_slice(dgx_slice("n1")))
    for name, devices, users in victims:
        dra.set_claim(parse_resource_claim(allocated(name, devices, users)))
        for user in users:
            w.pods.on_add(user)
    dra.set_claim(parse_resource_claim(claim("big", exact("gpu", 8))))
    return w


def running(name: str, claim_name: str) -> PodView:
    return claiming(make_pod(name).cpu("1").priority(0).node("n1"), claim_name).view()


async def test_a_pod_needing_every_gpu_evicts_the_pods_whose_claims_hold_them() -> None:
    v1, v2 = running("v1", "c1"), running("v2", "c2")
    w = dra_world([("c1", range(0, 4), [v1]), ("c2", range(4, 8), [v2])])
    w.pods.on_add(claiming(make_pod("p").cpu("1").priority(1000), "big").view())
    await w.settle()
    assert sorted(w.evictions.evicted) == ["default/v1", "default/v2"]


async def test_only_the_pods_holding_what_is_missing_are_evicted() -> None:
    v1, v2 = running("v1", "c1"), running("v2", "c2")
    w = dra_world([("c1", range(0, 4), [v1]), ("c2", range(4, 6), [v2])])
    w.scheduler.cache.snapshot.dra.set_claim(parse_resource_claim(claim("big", exact("gpu", 6))))
    w.pods.on_add(claiming(make_pod("p").cpu("1").priority(1000), "big").view())
    await w.settle()
    assert w.evictions.evicted == ["default/v1"]  # frees 4, with 2 free: 6


async def test_a_claim_shared_with_a_pod_that_stays_frees_nothing() -> None:
    v1, keeper = running("v1", "c1"), make_pod("keeper").cpu("1").priority(5000).node("n1")
    keeper_view = claiming(keeper, "c1").view()
    w = dra_world([("c1", range(0, 8), [v1, keeper_view])])
    w.pods.on_add(claiming(make_pod("p").cpu("1").priority(1000), "big").view())
    await w.settle()
    assert w.evictions.evicted == []
    assert w.scheduler.cache.snapshot.dra.in_use  # the what-ifs gave everything back
    assert len(w.scheduler.cache.snapshot.dra.in_use) == 8

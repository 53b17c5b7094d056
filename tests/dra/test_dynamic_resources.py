"""DynamicResources in the default profile: claims allocated on the snapshot, kube's verdicts,
the best NVLink/PCIe set, gangs whole or not at all."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.config import default_config
from batchsched.dra.parse import parse_resource_claim
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.status import Code
from batchsched.snapshot import Snapshot
from gpu.topology import GpuDevice, Link, LinkLevel, NodeTopology, NumaNode, link_matrix
from tests.builders import make_node, make_pod
from tests.dra.builders import (
    claim,
    claiming,
    dgx_slice,
    dra_snapshot,
    exact,
    gpu,
    gpu_uuid,
    node_slice,
)

PROFILE = default_config().build_profiles()["gpu-scheduler"]


def runner() -> ProfileRunner:
    return ProfileRunner(PROFILE)


def devices_of(snapshot: Snapshot, key: str) -> list[str]:
    found = snapshot.dra.claim(key)
    assert found is not None and found.allocation is not None
    return sorted(d.device for d in found.allocation.devices)


def test_a_pod_gets_devices_for_its_claim_and_the_claim_is_pinned_to_the_node() -> None:
    snapshot = dra_snapshot(
        [make_node("n1").cpu("8")], [dgx_slice("n1")], [claim("c", exact("gpu", 2))]
    )
    result = runner().schedule_one(claiming(make_pod("p").cpu("1"), "c").view(), snapshot)
    assert result.node_name == "n1"
    assert len(devices_of(snapshot, "default/c")) == 2
    found = snapshot.dra.claim("default/c")
    assert found is not None and found.allocation is not None
    assert found.allocation.allows("n1") and not found.allocation.allows("n2")


@pytest.mark.parametrize(
    ("requests", "placed", "why"),
    [
        ([exact("gpu", 8)], True, ""),
        (
            [exact("gpu", 9)],
            False,
            "0/1 nodes are available: 1 node(s) did not have enough free devices",
        ),
        (
            [
                exact(
                    "gpu",
                    1,
                    "gpu.nvidia.com",
                    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'",
                )
            ],
            False,
            "did not have enough free devices",
        ),
        ([exact("gpu", 1, "no-such-class")], False, "device class no-such-class does not exist"),
        (
            [
                {
                    "name": "gpu",
                    "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"},
                }
            ],
            True,
            "",
        ),
        (
            [
                {
                    "name": "gpu",
                    "firstAvailable": [
                        {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 16},
                        {"name": "small", "deviceClassName": "gpu.nvidia.com", "count": 4},
                    ],
                }
            ],
            True,
            "",
        ),
    ],
    ids=[
        "all eight GPUs of the node fit",
        "nine GPUs fit nowhere",
        "a selector for a product no node has fits nowhere",
        "an unknown device class is unresolvable",
        "allocation mode All takes every GPU",
        "firstAvailable falls back to the alternative that fits",
    ],
)
def test_verdicts(requests: list[dict[str, Any]], placed: bool, why: str) -> None:
    snapshot = dra_snapshot([make_node("n1").cpu("8")], [dgx_slice("n1")], [claim("c", *requests)])
    result = runner().schedule_one(claiming(make_pod("p").cpu("1"), "c").view(), snapshot)
    assert (result.node_name is not None) == placed
    if not placed:
        assert why in result.message()


def test_all_mode_takes_every_gpu_and_first_available_names_the_alternative() -> None:
    alternatives = {
        "name": "gpu",
        "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 16},
            {"name": "small", "deviceClassName": "gpu.nvidia.com", "count": 4},
        ],
    }
    snapshot = dra_snapshot(
        [make_node("n1").cpu("8")], [dgx_slice("n1")], [claim("c", alternatives)]
    )
    runner().schedule_one(claiming(make_pod("p").cpu("1"), "c").view(), snapshot)
    found = snapshot.dra.claim("default/c")
    assert found is not None and found.allocation is not None
    assert {d.request for d in found.allocation.devices} == {"gpu/small"}


def test_devices_in_use_are_not_given_twice() -> None:
    claims = [claim(f"c{i}", exact("gpu", 3)) for i in range(3)]
    snapshot = dra_snapshot([make_node("n1").cpu("8")], [dgx_slice("n1")], claims)
    placed = [
        runner().schedule_one(claiming(make_pod(f"p{i}").cpu("1"), f"c{i}").view(), snapshot)
        for i in range(3)
    ]
    assert [r.node_name for r in placed] == ["n1", "n1", None]
    assert not set(devices_of(snapshot, "default/c0")) & set(devices_of(snapshot, "default/c1"))


def test_a_four_gpu_claim_gets_one_pcie_root_without_agent_data() -> None:
    snapshot = dra_snapshot(
        [make_node("n1").cpu("8")],
        [dgx_slice("n1")],
        [claim("a", exact("gpu", 2)), claim("b", exact("gpu", 4))],
    )
    runner().schedule_one(claiming(make_pod("pa").cpu("1"), "a").view(), snapshot)
    runner().schedule_one(claiming(make_pod("pb").cpu("1"), "b").view(), snapshot)
    first, second = devices_of(snapshot, "default/a"), devices_of(snapshot, "default/b")
    roots = {int(d.split("-")[1]) // 4 for d in second}
    assert len(roots) == 1, second  # 4 GPUs under one root, not 2+2 around the first claim
    assert {int(d.split("-")[1]) // 4 for d in first} != roots


def test_the_agents_nvlink_islands_decide_where_its_topology_joins_the_slice() -> None:
    """The agent says islands are {0,1,6,7} and {2,3,4,5}: against the PCIe roots' grouping."""
    snapshot = dra_snapshot(
        [make_node("n1").cpu("8")], [dgx_slice("n1")], [claim("c", exact("gpu", 4))]
    )
    snapshot.set_measured_topology("n1", crossed_islands("n1"))
    runner().schedule_one(claiming(make_pod("p").cpu("1"), "c").view(), snapshot)
    assert devices_of(snapshot, "default/c") in (
        ["gpu-0", "gpu-1", "gpu-6", "gpu-7"],
        ["gpu-2", "gpu-3", "gpu-4", "gpu-5"],
    )


def crossed_islands(node: str) -> NodeTopology:
    islands = ({0, 1, 6, 7}, {2, 3, 4, 5})
    pairs = {
        (i, j): Link(LinkLevel.NVLINK, 18, 900)
        for group in islands
        for i in group
        for j in group
        if i < j
    }
    gpus = tuple(
        GpuDevice(
            i, gpu_uuid(node, i), "NVIDIA H100 80GB HBM3", 81920, i // 4, f"0000:{i:02x}:00.0"
        )
        for i in range(8)
    )
    numa = (NumaNode(0, 0, (), 0), NumaNode(1, 1, (), 0))
    return NodeTopology(
        "NVIDIA H100 80GB HBM3", gpus, numa, link_matrix(8, pairs, Link(LinkLevel.SYS))
    )


def test_match_attribute_keeps_a_claims_devices_under_one_root() -> None:
    constraint = [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    devices = [gpu("n1", 0, root="r0"), gpu("n1", 1, root="r1"), gpu("n1", 2, root="r1")]
    snapshot = dra_snapshot(
        [make_node("n1").cpu("8")],
        [node_slice("n1", devices)],
        [claim("c", exact("a"), exact("b"), constraints=constraint)],
    )
    result = runner().schedule_one(claiming(make_pod("p").cpu("1"), "c").view(), snapshot)
    assert result.node_name == "n1"
    assert devices_of(snapshot, "default/c") == ["gpu-1", "gpu-2"]


def test_a_shared_claim_sends_its_second_consumer_to_the_node_of_its_allocation() -> None:
    nodes = [make_node("n1").cpu("8"), make_node("n2").cpu("8")]
    snapshot = dra_snapshot(nodes, [dgx_slice("n1"), dgx_slice("n2")], [claim("shared")])
    first = runner().schedule_one(claiming(make_pod("p1").cpu("1"), "shared").view(), snapshot)
    second = runner().schedule_one(claiming(make_pod("p2").cpu("1"), "shared").view(), snapshot)
    assert first.node_name is not None and second.node_name == first.node_name


def test_a_claim_from_a_template_waits_for_the_controller() -> None:
    snapshot = dra_snapshot([make_node("n1").cpu("8")], [dgx_slice("n1")])
    pod = (
        make_pod("p")
        .cpu("1")
        .set("spec.resourceClaims", [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}])
    )
    result = runner().schedule_one(pod.view(), snapshot)
    assert result.node_name is None
    assert result.status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert (
        "waiting for the ResourceClaim of gpu (ResourceClaimTemplate one-gpu)" in result.message()
    )
    made = claim("p-gpu-x", exact("gpu"))
    made["metadata"]["ownerReferences"] = [
        {"uid": "uid-p", "controller": True, "kind": "Pod", "name": "p"}
    ]
    snapshot.dra.set_claim(parse_resource_claim(made))
    ready = pod.set("metadata.uid", "uid-p").set(
        "status.resourceClaimStatuses", [{"name": "gpu", "resourceClaimName": "p-gpu-x"}]
    )
    assert runner().schedule_one(ready.view(), snapshot).node_name == "n1"


def test_a_discarded_trial_gives_back_the_devices_it_allocated() -> None:
    snapshot = dra_snapshot(
        [make_node("n1").cpu("8")], [dgx_slice("n1")], [claim("c", exact("gpu", 8))]
    )
    with snapshot.begin_trial():
        assert runner().schedule_one(claiming(make_pod("p").cpu("1"), "c").view(), snapshot).placed
        assert len(snapshot.dra.in_use) == 8
    assert not snapshot.dra.in_use
    claim_now = snapshot.dra.claim("default/c")
    assert claim_now is not None and claim_now.allocation is None


def test_an_incomplete_pool_offers_no_devices() -> None:
    half = node_slice("n1", [gpu("n1", 0)], generation=2, slices=2, name="n1-a")
    snapshot = dra_snapshot([make_node("n1").cpu("8")], [half], [claim("c")])
    assert (
        runner().schedule_one(claiming(make_pod("p").cpu("1"), "c").view(), snapshot).node_name
        is None
    )

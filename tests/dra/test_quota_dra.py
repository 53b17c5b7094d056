"""Tenant quotas count devices allocated through DRA claims, by the quota file's
`deviceClasses`: usage, admission and capacity."""

from __future__ import annotations

from dataclasses import replace

from batchsched.dra.parse import parse_device_class, parse_resource_claim, parse_resource_slice
from queues.config import parse_quota_config
from queues.demand import device_demand
from queues.model import GPU
from tests.builders import make_node, make_pod
from tests.dra.builders import claim, claiming, device_class, dgx_slice, exact
from tests.runtime.test_tenants import ORG, TEAM_A, Harness, harness, policy

MAPPED = replace(policy(max_a=8), device_classes={"gpu.nvidia.com": GPU})


def dra_harness() -> Harness:
    h = harness(MAPPED, node_gpus=0)
    dra = h.cache.snapshot.dra
    dra.set_class(parse_device_class(device_class()))
    h.cache.add_node(make_node("dgx").cpu("64").view())
    dra.set_slice(parse_resource_slice(dgx_slice("dgx")))
    for name, count in (("four", 4), ("six", 6), ("two", 2)):
        dra.set_claim(parse_resource_claim(claim(name, exact("gpu", count), namespace="ns-a")))
    return h


def test_a_pod_counts_the_gpus_its_claim_asks_for_toward_its_team_and_organisation() -> None:
    h = dra_harness()
    h.cache.assume(claiming(make_pod("a", "ns-a").cpu("1"), "four").view(), "dgx")
    assert (h.gpus(TEAM_A), h.gpus(ORG)) == (4000, 4000)


def test_admission_refuses_a_claim_that_would_take_the_team_past_its_max() -> None:
    h = dra_harness()
    h.cache.assume(claiming(make_pod("a", "ns-a").cpu("1"), "four").view(), "dgx")
    assert h.layer.admit([claiming(make_pod("b", "ns-a").cpu("1"), "two").view()]).admitted
    refused = h.layer.admit([claiming(make_pod("c", "ns-a").cpu("1"), "six").view()])
    assert not refused.admitted
    assert "would exceed its max 8 nvidia.com/gpu" in refused.reason


def test_capacity_counts_the_devices_of_mapped_classes() -> None:
    h = dra_harness()
    assert h.layer.capacity().get(GPU) == 8000


def test_unmapped_classes_count_nothing() -> None:
    assert device_demand({"gpu.nvidia.com": 4}, {}) == {}
    assert device_demand({"gpu.nvidia.com": 4, "nic": 1}, {"nic": "example.com/nic"}) == {
        "example.com/nic": 1
    }


def test_the_quota_file_maps_device_classes_and_refuses_a_bad_name() -> None:
    good = parse_quota_config(QUOTA.format(cls="gpu.nvidia.com"))
    assert good.device_classes == {"gpu.nvidia.com": GPU}
    try:
        parse_quota_config(QUOTA.format(cls="Not_A_Class"))
    except ValueError as err:
        assert "deviceClasses" in str(err)
    else:
        raise AssertionError("a bad DeviceClass name was accepted")


QUOTA = """\
apiVersion: batchsched.io/v1alpha1
kind: QuotaConfig
deviceClasses:
  {cls}: nvidia.com/gpu
tenants:
- name: research
  namespaces: [ns-a]
"""

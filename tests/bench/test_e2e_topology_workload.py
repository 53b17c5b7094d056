"""topology-e2e's workload (bench/e2e_topology_workload.py): the seeded gangs, the Nodes, and
each scheduler's encoding of a gang, read back by batchsched's own parsers."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import pytest

from batchsched.bench.e2e_cluster import BENCH_LABEL
from batchsched.bench.e2e_topology_workload import (
    GPU,
    PLUGINS_API,
    UPSTREAM_API,
    Cluster,
    Encoding,
    Gang,
    demanded_gpus,
    gangs,
    group_objects,
    member_body,
    member_offsets,
    node_body,
)
from batchsched.gang.encodings import parse_k8s_pod_group
from batchsched.gang.podgroup import POD_GROUP_LABEL, parse_pod_group
from batchsched.gang.topology import (
    BLOCK_LABEL,
    CLIQUE_LABEL,
    PREFERRED_ANNOTATION,
    RACK_LABEL,
    ZONE_LABEL,
    TopologyRequest,
)
from batchsched.model.pod import parse_pod
from batchsched.model.resources import Resources

FULL = Cluster(racks=64)
SMALL = Cluster(racks=4)


def gang(request: TopologyRequest | None, members: int = 2, gpus: int = 4) -> Gang:
    requests = Resources.parse({"cpu": str(8 * gpus), "memory": "64Gi", GPU: str(gpus)}, "r")
    return Gang("g-0003", members, requests, request, at=0.5)


REQUIRED_RACK = gang(TopologyRequest(RACK_LABEL, required=True))
PREFERRED_CLIQUE = gang(TopologyRequest(CLIQUE_LABEL, required=False))


def with_namespace(body: dict[str, object]) -> dict[str, object]:
    meta = cast(dict[str, object], body["metadata"])
    return {**body, "metadata": {**meta, "namespace": "bench", "uid": "u"}}


def test_the_same_seed_draws_the_same_gangs_and_another_seed_others() -> None:
    assert gangs(FULL, 1) == gangs(FULL, 1)
    assert gangs(FULL, 1) != gangs(FULL, 2)


def test_the_default_takes_gangs_up_to_the_fill_and_no_further() -> None:
    drawn = gangs(FULL, 1, fill=0.9)
    longer = gangs(FULL, 1, count=len(drawn) + 1)
    assert demanded_gpus(drawn) <= 0.9 * FULL.gpus < demanded_gpus(longer)


def test_a_count_takes_a_prefix_of_the_same_stream() -> None:
    assert gangs(FULL, 1, count=20) == gangs(FULL, 1)[:20]
    assert len(gangs(SMALL, 1, count=500)) == 500  # a count is not held to the fill


def test_gangs_are_2_to_64_gpus_of_whole_nodes_from_16_and_small_pods_below() -> None:
    for g in gangs(FULL, 1):
        per_pod = g.member_requests.get(GPU)
        assert 2 <= g.gpus <= 64
        if g.gpus >= 16:
            assert per_pod == 8
        else:
            assert per_pod in (1, 2, 4) and g.members >= 2


def test_a_clique_is_required_only_by_gangs_that_fit_one() -> None:
    required = [g for g in gangs(FULL, 1) if g.request is not None and g.request.required]
    assert {g.request.level for g in required if g.request} == {RACK_LABEL, CLIQUE_LABEL}
    assert all(g.gpus <= 16 for g in required if g.request and g.request.level == CLIQUE_LABEL)


def test_gangs_arrive_in_order_and_members_member_gap_apart() -> None:
    drawn = gangs(FULL, 1, interval=0.025)
    assert [g.at for g in drawn] == sorted(g.at for g in drawn)
    assert 0.01 < drawn[-1].at / len(drawn) < 0.05
    assert member_offsets(REQUIRED_RACK, 0.01) == (0.5, 0.51)


def test_nodes_carry_every_level_and_their_resources_as_capacity_and_allocatable() -> None:
    nodes = FULL.nodes()
    body: dict[str, Any] = node_body(nodes[9])
    labels = body["metadata"]["labels"]
    assert len(nodes) == 512 and FULL.gpus == 4096
    assert body["metadata"]["name"] == "r001-n01"
    assert {k: labels[k] for k in (CLIQUE_LABEL, RACK_LABEL, BLOCK_LABEL, ZONE_LABEL)} == {
        CLIQUE_LABEL: "r001-c0",
        RACK_LABEL: "r001",
        BLOCK_LABEL: "b00",
        ZONE_LABEL: "z0",
    }
    assert labels[BENCH_LABEL] == "true"
    assert body["status"]["capacity"] == body["status"]["allocatable"]
    assert body["status"]["allocatable"][GPU] == "8"


def test_upstream_a_workload_comes_before_its_pod_group_which_names_its_template() -> None:
    objects = group_objects(REQUIRED_RACK, Encoding.UPSTREAM)
    assert [(r, b["kind"], b["apiVersion"]) for r, b in objects] == [
        ("workloads", "Workload", UPSTREAM_API),
        ("podgroups", "PodGroup", UPSTREAM_API),
    ]
    workload: dict[str, Any] = objects[0][1]
    group: dict[str, Any] = objects[1][1]
    template = workload["spec"]["podGroupTemplates"][0]
    assert group["spec"]["podGroupTemplateRef"] == {
        "workload": {"workloadName": "g-0003", "podGroupTemplateName": template["name"]}
    }
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}


@pytest.mark.parametrize(
    ("g", "constraints", "annotations"),
    [
        pytest.param(
            REQUIRED_RACK,
            {"topology": [{"key": RACK_LABEL}]},
            None,
            id="a required level is schedulingConstraints in the template and the PodGroup",
        ),
        pytest.param(
            PREFERRED_CLIQUE,
            None,
            {PREFERRED_ANNOTATION: CLIQUE_LABEL},
            id="a preferred level is only our annotation on the PodGroup",
        ),
    ],
)
def test_upstream_topology(
    g: Gang, constraints: dict[str, object] | None, annotations: dict[str, str] | None
) -> None:
    objects = group_objects(g, Encoding.UPSTREAM)
    workload: dict[str, Any] = objects[0][1]
    group: dict[str, Any] = objects[1][1]
    assert workload["spec"]["podGroupTemplates"][0].get("schedulingConstraints") == constraints
    assert group["spec"].get("schedulingConstraints") == constraints
    assert group["metadata"].get("annotations") == annotations


@pytest.mark.parametrize("g", [REQUIRED_RACK, PREFERRED_CLIQUE], ids=["required", "preferred"])
def test_batchsched_reads_the_upstream_pod_group_as_the_gang_meant(g: Gang) -> None:
    view = parse_k8s_pod_group(with_namespace(group_objects(g, Encoding.UPSTREAM)[1][1]))
    assert view.min_member == g.members
    assert view.topology == g.request


def test_coscheduling_gets_a_scheduler_plugins_pod_group_without_topology() -> None:
    [(resource, body)] = group_objects(REQUIRED_RACK, Encoding.PLUGINS)
    assert (resource, body["apiVersion"]) == ("podgroups", PLUGINS_API)
    view = parse_pod_group(with_namespace(body))
    assert view.min_member == 2 and view.topology is None


def test_an_upstream_member_names_its_group_in_scheduling_group() -> None:
    body: dict[str, Any] = member_body(REQUIRED_RACK, 1, Encoding.UPSTREAM, "default-scheduler")
    assert body["metadata"] == {"name": "g-0003-1"}
    assert body["spec"]["schedulingGroup"] == {"podGroupName": "g-0003"}
    assert body["spec"]["schedulerName"] == "default-scheduler"


def test_a_coscheduling_member_carries_the_pod_group_label() -> None:
    body: dict[str, Any] = member_body(REQUIRED_RACK, 0, Encoding.PLUGINS, "sp")
    assert body["metadata"]["labels"] == {POD_GROUP_LABEL: "g-0003"}
    assert "schedulingGroup" not in body["spec"]


def test_a_member_asks_what_its_gang_says_with_gpu_limits_equal_to_requests() -> None:
    body: dict[str, Any] = member_body(REQUIRED_RACK, 0, Encoding.UPSTREAM, "gpu-scheduler")
    resources = body["spec"]["containers"][0]["resources"]
    assert resources["limits"] == {GPU: "4"}
    view = parse_pod(with_namespace(body))
    assert view.requests == REQUIRED_RACK.member_requests


def test_a_gang_counts_its_gpus_and_names_its_members() -> None:
    big = dataclasses.replace(REQUIRED_RACK, members=3)
    assert big.gpus == 12 and big.member_names == ("g-0003-0", "g-0003-1", "g-0003-2")

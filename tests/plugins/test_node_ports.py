from __future__ import annotations

import pytest

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.profile import Profile
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.status import OK, SKIP, Code
from batchsched.plugins.node_ports import NodePorts
from batchsched.plugins.priority_sort import PrioritySort
from tests.builders import PodBuilder, make_node, make_pod, snapshot_of

REASON = "node(s) didn't have free ports for the requested pod ports"


def _fits(running: PodBuilder, wanted: PodBuilder) -> bool:
    plugin = NodePorts()
    snapshot = snapshot_of([make_node("n1")], [running.node("n1")])
    state = CycleState()
    pod = wanted.view()
    _, status = plugin.pre_filter(state, pod, snapshot)
    assert status is OK
    status = plugin.filter(state, pod, snapshot.nodes[0])
    if status is OK:
        return True
    assert status.code is Code.UNSCHEDULABLE  # preemption can free the port
    assert status.message() == REASON
    return False


CASES = [
    (make_pod("r"), make_pod().host_port(8080), True),
    (make_pod("r").host_port(8080), make_pod().host_port(8080), False),
    (make_pod("r").host_port(8080), make_pod().host_port(8081), True),
    (make_pod("r").host_port(53, "UDP"), make_pod().host_port(53, "TCP"), True),
    (make_pod("r").host_port(53, "UDP"), make_pod().host_port(53, "UDP"), False),
    (make_pod("r").host_port(80, ip="10.0.0.1"), make_pod().host_port(80), False),
    (make_pod("r").host_port(80), make_pod().host_port(80, ip="10.0.0.1"), False),
    (make_pod("r").host_port(80, ip="10.0.0.1"), make_pod().host_port(80, ip="10.0.0.2"), True),
    (make_pod("r").host_port(80, ip="10.0.0.1"), make_pod().host_port(80, ip="10.0.0.1"), False),
    (make_pod("r").host_port(80, ip="0.0.0.0"), make_pod().host_port(80, ip="10.0.0.9"), False),
    (make_pod("r").host_port(80).host_port(443), make_pod().host_port(9).host_port(443), False),
]


@pytest.mark.parametrize(
    ("running", "wanted", "fits"),
    CASES,
    ids=[
        "node whose pods use no host ports fits",
        "same TCP port on every address conflicts",
        "a different port does not conflict",
        "UDP and TCP on the same port do not conflict",
        "same UDP port conflicts",
        "wanting every address conflicts with a port bound to one address",
        "wanting one address conflicts with a port bound to every address",
        "two different addresses on the same port do not conflict",
        "the same address and port conflicts",
        "an explicit 0.0.0.0 is the wildcard too",
        "one conflicting port among several is enough to reject",
    ],
)
def test_filter(running: PodBuilder, wanted: PodBuilder, fits: bool) -> None:
    assert _fits(running, wanted) is fits


def test_pre_filter_skips_a_pod_without_host_ports() -> None:
    _, status = NodePorts().pre_filter(CycleState(), make_pod().view(), snapshot_of([]))
    assert status is SKIP


def test_container_ports_without_host_port_are_not_host_ports() -> None:
    pod = make_pod().set("spec.containers", [{"name": "c", "ports": [{"containerPort": 80}]}])
    _, status = NodePorts().pre_filter(CycleState(), pod.view(), snapshot_of([]))
    assert status is SKIP


def _runner() -> ProfileRunner:
    plugin = NodePorts()
    return ProfileRunner(
        Profile(
            scheduler_name="gpu-scheduler",
            queue_sort=PrioritySort(),
            pre_filter=(plugin,),
            filter=(plugin,),
        )
    )


def test_runner_places_the_pod_where_its_port_is_free_then_reports_none_left() -> None:
    snapshot = snapshot_of(
        [make_node("n1"), make_node("n2"), make_node("n3")],
        [make_pod("r1").host_port(8080).node("n1"), make_pod("r2").host_port(8080).node("n3")],
    )
    runner = _runner()
    first = runner.schedule_one(make_pod("p1").host_port(8080).view(), snapshot)
    assert first.node_name == "n2"
    second = runner.schedule_one(make_pod("p2").host_port(8080).view(), snapshot)
    assert second.node_name is None
    assert second.message() == f"0/3 nodes are available: 3 {REASON}."

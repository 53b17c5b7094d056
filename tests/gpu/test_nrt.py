"""The NodeResourceTopology object: built from a reading, parsed back, and used by the snapshot."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.cache import SchedulerCache
from batchsched.clock import FakeClock
from batchsched.runtime.handlers import TopologyEvents
from batchsched.snapshot import Snapshot
from gpu.fake_nvml import FakeNvml, Faults, host_numa
from gpu.machines import DGX_H100, PCIE_SERVER, Machine
from gpu.nrt import (
    GPU_TOPOLOGY_ANNOTATION,
    MeasuredTopology,
    detail_json,
    nrt_object,
    parse_nrt,
    topology_from_detail,
)
from gpu.nvml import NodeReading, NvmlReader
from gpu.topology import NodeTopology
from tests.builders import make_node, make_pod, snapshot_of


def read(machine: Machine, faults: Faults | None = None) -> tuple[NodeReading, NvmlReader]:
    reader = NvmlReader(FakeNvml(machine, faults), host_numa(machine))
    reader.open()
    return reader.read(), reader


def published(
    machine: Machine, faults: Faults | None = None, name: str = "n1", **kw: Any
) -> dict[str, Any]:
    reading, reader = read(machine, faults)
    detail = detail_json(
        reading.topology, [h.reasons for h in reading.health], "fake:test", reading.driver
    )
    return nrt_object(
        name, reading.topology, detail, heartbeat="2025-01-01T00:00:00Z", host=reader.host, **kw
    )


def measured(machine: Machine, faults: Faults | None = None) -> NodeTopology:
    topology = parse_nrt(published(machine, faults)).topology
    assert topology is not None
    return topology


@pytest.mark.parametrize(
    "machine", [DGX_H100, PCIE_SERVER], ids=["DGX H100 round-trips", "PCIe server round-trips"]
)
def test_a_published_object_parses_back_to_the_reading(machine: Machine) -> None:
    reading, _ = read(machine, Faults(lost={2}))
    parsed = parse_nrt(published(machine, Faults(lost={2})))
    assert parsed.node == "n1" and parsed.heartbeat == "2025-01-01T00:00:00Z"
    assert parsed.topology is not None
    assert parsed.topology.links == reading.topology.links
    assert parsed.topology.gpus == reading.topology.gpus
    assert parsed.topology.numa_nodes == reading.topology.numa_nodes
    assert parsed.topology.healthy_indices() == (0, 1, 3, 4, 5, 6, 7)


def test_zones_are_numa_nodes_with_their_cpus_gpus_and_distances() -> None:
    obj = published(PCIE_SERVER, Faults(lost={1}), gpus_in_use=frozenset({0, 4}))
    zones = {z["name"]: z for z in obj["zones"]}
    assert set(zones) == {"node-0", "node-1"}
    gpu0 = next(r for r in zones["node-0"]["resources"] if r["name"] == "nvidia.com/gpu")
    assert (gpu0["capacity"], gpu0["allocatable"], gpu0["available"]) == (4, 3, 2)
    cpu1 = next(r for r in zones["node-1"]["resources"] if r["name"] == "cpu")
    assert cpu1["capacity"] == 64
    assert zones["node-1"]["costs"] == [
        {"name": "node-0", "value": 20},
        {"name": "node-1", "value": 10},
    ]
    assert zones["node-0"]["type"] == "Node"


@pytest.mark.parametrize(
    ("policy", "scope", "legacy"),
    [
        ("none", "container", "None"),
        ("single-numa-node", "container", "SingleNUMANodeContainerLevel"),
        ("single-numa-node", "pod", "SingleNUMANodePodLevel"),
        ("best-effort", "pod", "BestEffortPodLevel"),
    ],
    ids=["no policy", "single NUMA node per container", "single NUMA node per pod", "best effort"],
)
def test_the_topology_manager_policy_is_reported_both_ways(
    policy: str, scope: str, legacy: str
) -> None:
    obj = published(DGX_H100, policy=policy, scope=scope)
    assert obj["topologyPolicies"] == [legacy]
    assert {"name": "topologyManagerPolicy", "value": policy} in obj["attributes"]


def test_an_object_without_gpu_detail_leaves_the_node_on_its_labels() -> None:
    raw = {"metadata": {"name": "n1"}, "zones": []}
    assert parse_nrt(raw) == MeasuredTopology("n1", None, "")


def test_the_same_detail_parses_to_the_same_topology_object() -> None:
    text = published(DGX_H100)["metadata"]["annotations"][GPU_TOPOLOGY_ANNOTATION]
    assert topology_from_detail(text) is topology_from_detail(text)


def _detail(**change: Any) -> str:
    doc = json.loads(published(PCIE_SERVER)["metadata"]["annotations"][GPU_TOPOLOGY_ANNOTATION])
    for key, value in change.items():
        if callable(value):
            value(doc)
        else:
            doc[key] = value
    return json.dumps(doc)


def _drop_pair(doc: dict[str, Any]) -> None:
    doc["links"].pop()


def _repeat_pair(doc: dict[str, Any]) -> None:
    doc["links"][-1] = doc["links"][0]


def _unknown_numa(doc: dict[str, Any]) -> None:
    doc["gpus"][3]["numaNode"] = 7


def _index_gap(doc: dict[str, Any]) -> None:
    doc["gpus"][2]["index"] = 9


def _bad_level(doc: dict[str, Any]) -> None:
    doc["links"][0]["level"] = "WARP"


def _bad_cpus(doc: dict[str, Any]) -> None:
    doc["numaNodes"][0]["cpus"] = "7-3"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("{not json", "gpu-topology"),
        (_detail(version=2), "version"),
        (_detail(extra=1), "extra"),
        (_detail(links=_drop_pair), "links cover 27 of the 28 GPU pairs"),
        (_detail(links=_repeat_pair), "given twice"),
        (_detail(gpus=_unknown_numa), "unknown NUMA node 7"),
        (_detail(gpus=_index_gap), "GPU indices must be 0..n-1"),
        (_detail(links=_bad_level), "level"),
        (_detail(numaNodes=_bad_cpus), "bad CPU range"),
    ],
    ids=[
        "text that is not JSON is refused",
        "an unknown format version is refused",
        "an unknown field is refused",
        "a missing GPU pair is refused",
        "a pair given twice is refused",
        "a GPU on an unknown NUMA node is refused",
        "GPU indices with a gap are refused",
        "an unknown link level is refused",
        "a bad CPU list is refused",
    ],
)
def test_malformed_gpu_detail_is_refused_with_the_reason(text: str, error: str) -> None:
    raw = {"metadata": {"name": "n1", "annotations": {GPU_TOPOLOGY_ANNOTATION: text}}}
    with pytest.raises(ValueError, match=error):
        parse_nrt(raw)


def test_an_object_without_a_name_is_refused() -> None:
    with pytest.raises(ValueError, match=r"metadata\.name"):
        parse_nrt({"metadata": {}})


# The snapshot: a measured topology replaces the label-derived one.


def l40s_node(name: str = "n1") -> Any:
    return (
        make_node(name)
        .cpu("128")
        .memory("1Ti")
        .gpus(8)
        .label("nvidia.com/gpu.product", "NVIDIA-L40S")
    )


def best4(snap: Snapshot, node: str = "n1") -> tuple[int, ...] | None:
    info = snap.get(node)
    assert info is not None and info.gpu is not None
    choice = info.gpu.best_set(4)
    return None if choice is None else choice.indices


def test_a_measured_topology_replaces_the_label_derived_one() -> None:
    snap = snapshot_of([l40s_node()])
    assert best4(snap) == (0, 1, 2, 3)  # the reference PCIe server, as the labels say
    snap.set_measured_topology("n1", measured(PCIE_SERVER, Faults(lost={1})))
    assert best4(snap) == (4, 5, 6, 7)  # GPU 1 fell off the bus: the other socket
    snap.set_measured_topology("n1", None)
    assert best4(snap) == (0, 1, 2, 3)


def test_a_topology_that_arrives_before_its_node_applies_when_the_node_does() -> None:
    snap = snapshot_of([])
    snap.set_measured_topology("n1", measured(PCIE_SERVER, Faults(lost={0})))
    snap.add_node(l40s_node().view())
    assert best4(snap) == (4, 5, 6, 7)


def test_pods_keep_their_gpus_when_the_measured_topology_arrives() -> None:
    snap = snapshot_of([l40s_node()], [make_pod("p").gpus(2).node("n1")])
    assert snap.gpu_grants("uid-default-p") == ((0, 1000), (1, 1000))
    snap.set_measured_topology("n1", measured(PCIE_SERVER, Faults(lost={1})))
    assert snap.gpu_grants("uid-default-p") == ((0, 1000), (1, 1000))
    info = snap.get("n1")
    assert info is not None and info.gpu is not None
    assert info.gpu.free[1] == -1000  # still held on the lost GPU: counted, never handed out


def test_an_unchanged_topology_does_not_rebuild_the_node() -> None:
    cache = SchedulerCache(FakeClock())
    cache.add_node(l40s_node().view())

    class Queue:
        def __init__(self) -> None:
            self.moves: list[str] = []

        def move_all(self, event: str) -> None:
            self.moves.append(event)

    queue = Queue()
    events = TopologyEvents(cache, queue)  # type: ignore[arg-type]
    first = parse_nrt(published(PCIE_SERVER))
    events.on_add(first)
    info = cache.snapshot.get("n1")
    assert info is not None
    generation = info.generation
    again = parse_nrt(published(PCIE_SERVER))  # a new heartbeat, the same GPUs
    events.on_update(first, again)
    assert info.generation == generation
    events.on_delete(again)
    assert info.generation != generation
    assert queue.moves == ["NodeResourceTopologyAdd", "NodeResourceTopologyDelete"]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(1, 4), max_size=4),
    st.sets(st.integers(0, 7)),
    st.booleans(),
)
def test_measured_topologies_come_and_go_without_losing_a_pods_gpus(
    sizes: list[int], lost: set[int], back_to_labels: bool
) -> None:
    pods = [make_pod(f"p{i}").gpus(n).node("n1") for i, n in enumerate(sizes)]
    snap = snapshot_of([l40s_node()], pods)
    before = {f"uid-default-p{i}": snap.gpu_grants(f"uid-default-p{i}") for i in range(len(sizes))}
    snap.set_measured_topology("n1", measured(PCIE_SERVER, Faults(lost=lost)))
    if back_to_labels:
        snap.set_measured_topology("n1", None)
    info = snap.get("n1")
    assert info is not None and info.gpu is not None
    assert {uid: snap.gpu_grants(uid) for uid in before} == before
    held = sum(milli for grants in before.values() for _, milli in grants)
    assert info.gpu.allocated_milli == held
    healthy = set(range(8)) if back_to_labels else set(range(8)) - lost
    assert info.gpu.capacity_milli == 1000 * len(healthy)

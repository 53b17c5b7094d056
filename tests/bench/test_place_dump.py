"""bench place-dump's generated dump is what `batchsched place` reads: its nodes, its pods
(bound and pending) and the Services and Deployments that `get all` adds, skipped."""

from __future__ import annotations

from pathlib import Path

import yaml

from batchsched.bench.place_dump import read_yaml, write_dump
from batchsched.cluster_file import load_cluster
from batchsched.model.resources import Resources

GPU = "nvidia.com/gpu"


def test_the_dump_holds_the_nodes_and_pods_asked_for_and_kinds_place_skips(
    tmp_path: Path,
) -> None:
    path = tmp_path / "dump.yaml"
    with path.open("w") as out:
        write_dump(out, nodes=8, pods=200, pending=10)
    state = load_cluster([path], devices=True)
    assert len(state.nodes) == 8
    assert len(state.pods) == 200
    assert sum(1 for p in state.pods if not p.node_name) == 10
    assert {n.name for n in state.nodes} >= {p.node_name for p in state.pods if p.node_name}
    assert state.skipped == {"Service": 2, "Deployment": 2}


def test_the_json_variant_holds_what_pyyaml_reads_from_the_yaml_one(tmp_path: Path) -> None:
    path = tmp_path / "dump.yaml"
    with path.open("w") as out:
        write_dump(out, nodes=4, pods=40, pending=4)
    assert read_yaml(path) == list(yaml.safe_load_all(path.read_text()))


def test_the_dump_is_a_state_a_cluster_could_be_in_and_some_pending_pods_fit(
    tmp_path: Path,
) -> None:
    """No node holds more than it offers, a Job's pods share a namespace (owner references
    never cross one), and the pending pods are a mix of ones that fit and ones that cannot."""
    path = tmp_path / "dump.yaml"
    with path.open("w") as out:
        write_dump(out, nodes=40, pods=1600, pending=64)  # the 60 000-pod ratio
    state = load_cluster([path], devices=True)
    used: dict[str, Resources] = {}
    for pod in state.pods:
        if pod.node_name:
            used[pod.node_name] = used.get(pod.node_name, Resources()) + pod.requests
    for node in state.nodes:
        assert not used.get(node.name, Resources()).insufficient(node.allocatable), node.name
    namespaces: dict[str, set[str]] = {}
    for pod in state.pods:
        job = pod.labels["job-name"]
        namespaces.setdefault(job, set()).add(pod.namespace)
    assert all(len(spaces) == 1 for spaces in namespaces.values())
    free = {
        n.name: n.allocatable.get(GPU) - used.get(n.name, Resources()).get(GPU) for n in state.nodes
    }
    asks = [p.requests.get(GPU) for p in state.pods if not p.node_name]
    assert any(ask <= max(free.values()) for ask in asks)
    assert any(ask > max(free.values()) for ask in asks)

"""bench place-dump's generated dump is what `batchsched place` reads: its nodes, its pods
(bound and pending) and the Services and Deployments that `get all` adds, skipped."""

from __future__ import annotations

from pathlib import Path

import yaml

from batchsched.bench.place_dump import read_yaml, write_dump
from batchsched.cluster_file import load_cluster


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

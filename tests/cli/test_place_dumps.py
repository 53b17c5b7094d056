"""`batchsched place` on whole `kubectl get -o yaml` dumps: kinds it does not read are skipped
with one line, NodeResourceTopology and every PodGroup encoding are read, progress goes to
stderr (not with --quiet), and each error names file, object and field once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from batchsched.bench.dra_e2e_objects import dgx_nrt
from batchsched.cli import main
from batchsched.cluster_file import load_cluster
from batchsched.configfile import kube_dump
from tests.builders import make_node, make_pod


def dump(path: Path, *items: object) -> Path:
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(items)}))
    return path


def other(kind: str, name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "default"}}


def place(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["place", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_kinds_it_does_not_read_are_skipped_with_one_line_counting_them_by_kind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = dump(
        tmp_path / "all.yaml",
        make_node("n1").cpu("2").obj(),
        other("Service", "web"),
        other("Service", "api"),
        {**other("Deployment", "web"), "apiVersion": "apps/v1"},
        make_pod("p").cpu("1").obj(),
    )
    rc, out, err = place(capsys, "--cluster", str(path), "--output", "json")
    assert rc == 0
    assert json.loads(out)["placements"] == {"default/p": "n1"}
    skipped = [line for line in err.splitlines() if "skipped" in line]
    assert skipped == [
        "batchsched place: skipped 3 objects of kinds it does not read: Service 2, Deployment 1"
    ]


def test_progress_lines_go_to_stderr_and_quiet_silences_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = dump(
        tmp_path / "all.yaml", make_node("n1").obj(), other("Service", "web"), make_pod().obj()
    )
    rc, _, err = place(capsys, "--cluster", str(path))
    assert rc == 0
    assert f"batchsched place: read {path}: 3 objects" in err
    assert "parsed 1 nodes, 1 pods" in err
    rc, _, err = place(capsys, "--cluster", str(path), "--quiet")
    assert rc == 0 and err == ""


def test_the_faster_libyaml_loader_is_used_when_pyyaml_has_it() -> None:
    if not yaml.__with_libyaml__:
        pytest.skip("PyYAML was built without libyaml here; the pure-Python loader is used")
    assert kube_dump.LOADER is yaml.CSafeLoader


def test_a_node_resource_topology_is_read_and_its_node_gets_placements(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = make_node("dgx-0").cpu("64").gpus(8).obj()
    pod = make_pod("p").gpus(8).obj()
    path = dump(tmp_path / "c.yaml", node, dgx_nrt("dgx-0"), pod)
    rc, out, err = place(capsys, "--cluster", str(path), "--output", "json")
    assert rc == 0, err
    assert json.loads(out)["placements"] == {"default/p": "dgx-0"}
    assert "NodeResourceTopology" not in err  # read, not skipped


def test_a_bad_node_resource_topology_names_the_file_and_the_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nrt = dgx_nrt("dgx-0")
    annotations = nrt["metadata"]["annotations"]
    key = next(k for k in annotations if "topology" in k and "load" not in k)
    annotations[key] = "{not json"
    path = dump(tmp_path / "c.yaml", make_node("dgx-0").gpus(8).obj(), nrt)
    rc, out, err = place(capsys, "--cluster", str(path), "--quiet")
    assert rc == 2 and out == ""
    assert err.startswith(f"batchsched place: {path}#0.items[1]: NodeResourceTopology dgx-0: ")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("group", "min_member"),
    [
        (
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": "g", "namespace": "default"},
                "spec": {"minMember": 3},
            },
            3,
        ),
        (
            {
                "apiVersion": "scheduling.k8s.io/v1alpha2",
                "kind": "PodGroup",
                "metadata": {"name": "g", "namespace": "default"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}},
            },
            4,
        ),
        (
            {
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "g", "namespace": "default"},
                "spec": {"minMember": 5},
            },
            5,
        ),
    ],
    ids=["coscheduling", "kubernetes scheduling.k8s.io", "volcano"],
)
def test_a_pod_group_of_every_encoding_is_read_by_its_own_reader(
    tmp_path: Path, group: dict[str, object], min_member: int
) -> None:
    state = load_cluster([dump(tmp_path / "c.yaml", group)], devices=True)
    assert [g.min_member for g in state.pod_groups] == [min_member]


def test_a_bad_node_quantity_prints_the_field_once_with_file_and_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = make_node("n1").obj()
    node["status"]["allocatable"]["cpu"] = "abc"
    path = dump(tmp_path / "c.yaml", node)
    rc, _, err = place(capsys, "--cluster", str(path), "--quiet")
    assert rc == 2
    assert err.startswith(
        f"batchsched place: {path}#0.items[0]: Node n1: status.allocatable.cpu: "
        "invalid quantity 'abc': "
    )
    assert err.count("status.allocatable.cpu") == 1


def test_a_pod_twice_names_both_places_it_appears(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = dump(tmp_path / "c.yaml", make_node("n1").obj(), make_pod("p").obj())
    pods = dump(tmp_path / "p.yaml", make_pod("p").obj())
    rc, _, err = place(capsys, "--cluster", str(cluster), "--pods", str(pods), "--quiet")
    assert rc == 2
    assert err == (
        "batchsched place: Pod default/p appears twice: "
        f"{cluster}#0.items[1] and {pods}#0.items[0]\n"
    )


def test_a_json_dump_is_read_like_the_yaml_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    items = [make_node("n1").cpu("2").obj(), other("Service", "web"), make_pod("p").obj()]
    path = tmp_path / "all.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=4))
    rc, out, err = place(capsys, "--cluster", str(path), "--output", "json")
    assert rc == 0, err
    assert json.loads(out)["placements"] == {"default/p": "n1"}
    assert "skipped 1 object of kinds it does not read: Service 1" in err


def test_broken_json_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "all.json"
    path.write_text('{"kind": "List", "items": [')
    rc, _, err = place(capsys, "--cluster", str(path), "--quiet")
    assert rc == 2 and err.startswith(f"batchsched place: {path}: not valid JSON: ")

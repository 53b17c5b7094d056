"""`batchsched place`: output shapes, the bundled example, and bad input exiting 2 cleanly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from batchsched.cli import main
from tests.builders import make_node, make_pod


def write(path: Path, *objects: object) -> Path:
    path.write_text(yaml.safe_dump_all(list(objects)))
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["place", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_output_has_a_placement_for_every_pending_pod_and_reasons_for_the_unplaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = write(
        tmp_path / "c.yaml",
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                make_node("n1").cpu("2").obj(),
                make_pod("running").cpu("1").node("n1").obj(),
            ],
        },
    )
    pods = write(
        tmp_path / "p.yaml", make_pod("fits").cpu("1").obj(), make_pod("big").cpu("3").obj()
    )
    rc, out, _ = run(capsys, "--cluster", str(cluster), "--pods", str(pods), "--output", "json")
    assert rc == 0
    assert json.loads(out) == {
        "placements": {"default/fits": "n1", "default/big": None},
        "reasons": {"default/big": "0/1 nodes are available: 1 Insufficient cpu."},
    }


def test_the_bundled_example_runs_without_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys)
    assert rc == 0
    assert "ml/finetune-8gpu" in out and "pending pods placed" in out


def test_the_bundled_example_is_placed_as_the_plugins_dictate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out, _ = run(capsys, "--output", "json")
    result = json.loads(out)
    assert rc == 0
    assert result["placements"]["ml/finetune-4gpu-h100"] == "h100-0"  # the only schedulable H100
    assert result["placements"]["ml/eval-16gpu"] is None  # no node has 16 GPUs
    assert (
        "untolerated taint {nvidia.com/gpu: present}" in result["reasons"]["ml/no-toleration-gpu"]
    )


def test_a_config_file_selects_the_profiles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "sched.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- schedulerName: other\n"
    )
    cluster = write(tmp_path / "c.yaml", make_node("n1").obj())
    pods = write(tmp_path / "p.yaml", make_pod("a").obj(), make_pod("b").scheduler("other").obj())
    rc, out, _ = run(
        capsys,
        "--cluster",
        str(cluster),
        "--pods",
        str(pods),
        "--config",
        str(config),
        "--output",
        "json",
    )
    result = json.loads(out)
    assert rc == 0 and result["placements"] == {"default/a": None, "default/b": "n1"}
    assert "not a profile of this scheduler (other)" in result["reasons"]["default/a"]


@pytest.mark.parametrize(
    ("cluster_text", "pods_text", "fragments"),
    [
        ("kind: Node\nmetadata: {name: n1\n", "", ["not valid YAML"]),
        (
            "",
            "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n"
            "    resources: {requests: {cpu: 2x}}\n",
            ["Pod default/p", "spec.containers[0].resources.requests.cpu", "2x"],
        ),
        (
            "kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {memory: lots}}\n",
            "",
            ["c.yaml#0: Node n1: status.allocatable.memory: invalid quantity 'lots'"],
        ),
        ("- just\n- a list\n", "", ["expected a Kubernetes object"]),
    ],
    ids=[
        "unparseable YAML names the file",
        "a bad pod quantity names the pod, the field and the value",
        "a bad node quantity names the node and the field",
        "a document that is not an object is refused",
    ],
)
def test_bad_input_exits_2_with_a_message_and_prints_nothing_else(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    cluster_text: str,
    pods_text: str,
    fragments: list[str],
) -> None:
    cluster = tmp_path / "c.yaml"
    cluster.write_text(cluster_text)
    pods = tmp_path / "p.yaml"
    pods.write_text(pods_text)
    rc, out, err = run(capsys, "--cluster", str(cluster), "--pods", str(pods), "--output", "json")
    assert rc == 2 and out == ""
    for fragment in fragments:
        assert fragment in err


def test_an_unknown_plugin_in_the_config_exits_2_listing_known_plugins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "sched.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- schedulerName: gpu-scheduler\n  plugins:\n"
        "    score: {enabled: [{name: GPUPriorityPlugin}]}\n"
    )
    rc, out, err = run(capsys, "--config", str(config))
    assert rc == 2 and out == ""
    assert "GPUPriorityPlugin" in err and "NodeResourcesFit" in err


def test_a_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys, "--cluster", str(tmp_path / "nope.yaml"))
    assert rc == 2 and out == "" and "cannot read" in err

"""`batchsched place` with PodGroups in its input files: gangs placed whole or reported whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.cli import main
from tests.builders import make_node, make_pod


def pod_group(name: str, min_member: int, namespace: str = "ml", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"minMember": min_member, **spec},
    }


def member(gang: str, i: int, gpus: int = 8) -> dict[str, Any]:
    return (
        make_pod(f"{gang}-{i}", "ml").gpus(gpus).label("scheduling.x-k8s.io/pod-group", gang).obj()
    )


def place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cluster: list[Any], pods: list[Any]
) -> dict[str, Any]:
    (tmp_path / "c.yaml").write_text(yaml.safe_dump_all(cluster))
    (tmp_path / "p.yaml").write_text(yaml.safe_dump_all(pods))
    rc = main(
        [
            "place",
            "--cluster",
            str(tmp_path / "c.yaml"),
            "--pods",
            str(tmp_path / "p.yaml"),
            "--output",
            "json",
        ]
    )
    out, err = capsys.readouterr()
    assert rc == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def gpu_nodes(count: int) -> list[dict[str, Any]]:
    return [make_node(f"g{i}").gpus(8).cpu("64").obj() for i in range(count)]


def test_a_gang_that_fits_is_placed_whole_and_the_podgroup_may_sit_in_either_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = place(
        tmp_path,
        capsys,
        gpu_nodes(3),
        [pod_group("train", 3), *(member("train", i) for i in range(3))],
    )
    assert sorted(result["placements"].values()) == ["g0", "g1", "g2"]
    again = place(
        tmp_path,
        capsys,
        [*gpu_nodes(3), pod_group("train", 3)],
        [member("train", i) for i in range(3)],
    )
    assert sorted(again["placements"].values()) == ["g0", "g1", "g2"]


def test_a_gang_that_cannot_be_placed_whole_has_every_member_unplaced_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = place(
        tmp_path, capsys, gpu_nodes(2), [pod_group("big", 3), *(member("big", i) for i in range(3))]
    )
    assert set(result["placements"].values()) == {None}
    reasons = set(result["reasons"].values())
    assert len(reasons) == 1
    assert next(iter(reasons)).startswith(
        "gang ml/big needs 3 more pod(s) placed together (minMember 3, 24 nvidia.com/gpu); "
        "16 nvidia.com/gpu free on 2 node(s) that pass its filters; 2 of 3 fit."
    )


def test_a_gang_whose_quorum_is_not_present_is_reported_waiting_and_holds_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pods = [
        pod_group("late", 4),
        member("late", 0, gpus=4),
        member("late", 1, gpus=4),
        make_pod("after", "ml").gpus(8).created("2026-01-02T00:00:00Z").obj(),
    ]
    result = place(tmp_path, capsys, gpu_nodes(1), pods)
    assert result["placements"]["ml/late-0"] is None and result["placements"]["ml/late-1"] is None
    assert "waits for members: 2 of minMember 4 exist" in result["reasons"]["ml/late-0"]
    # the waiting gang held nothing: a later pod uses the node
    assert result["placements"]["ml/after"] == "g0"


def test_a_member_whose_podgroup_is_missing_waits_for_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = place(tmp_path, capsys, gpu_nodes(1), [member("ghost", 0)])
    assert result["reasons"]["ml/ghost-0"] == "PodGroup ml/ghost not found; the pod waits for it"


def test_two_gangs_of_60_percent_one_is_placed_and_the_other_reported_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pods = [
        pod_group("a", 6),
        pod_group("b", 6),
        *(member("a", i) for i in range(6)),
        *(member("b", i) for i in range(6)),
    ]
    result = place(tmp_path, capsys, gpu_nodes(10), pods)
    placed = {k.split("-")[0] for k, v in result["placements"].items() if v}
    assert placed in ({"ml/a"}, {"ml/b"})
    assert sum(1 for v in result["placements"].values() if v) == 6


def test_a_malformed_podgroup_exits_2_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "c.yaml").write_text(yaml.safe_dump_all([*gpu_nodes(1), pod_group("bad", 0)]))
    rc = main(["place", "--cluster", str(tmp_path / "c.yaml"), "--output", "json"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == "" and "PodGroup ml/bad" in err and "spec.minMember" in err

"""`batchsched place --quota`: tenant quotas and fair share take part in the what-if, with the
bound pods of our profiles counted as the live scheduler counts them; and the progress lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from batchsched.cli import main
from tests.builders import make_node, make_pod

QUOTA = """
apiVersion: batchsched.io/v1alpha1
kind: QuotaConfig
tenants:
  - name: heavy
    namespaces: [heavy]
    guaranteed: {nvidia.com/gpu: 2}
    max: {nvidia.com/gpu: 4}
  - name: light
    namespaces: [light]
    guaranteed: {nvidia.com/gpu: 2}
    max: {nvidia.com/gpu: 8}
"""


def dump(path: Path, *items: object) -> Path:
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": list(items)}))
    return path


def place(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["place", *args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    """16 free GPUs; tenant heavy already holds 4 (its max), light none."""
    return dump(
        tmp_path / "cluster.yaml",
        make_node("n1").cpu("64").memory("512Gi").gpus(8).obj(),
        make_node("n2").cpu("64").memory("512Gi").gpus(16).obj(),
        make_pod("running", "heavy").gpus(4).node("n1").obj(),
        make_pod("more", "heavy").gpus(2).obj(),
        make_pod("first", "light").gpus(2).obj(),
    )


def test_a_tenant_at_its_max_gets_no_placement_and_the_reason_is_printed(
    tmp_path: Path, cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quota = tmp_path / "quota.yaml"
    quota.write_text(QUOTA)
    rc, out, err = place(capsys, "--cluster", str(cluster), "--quota", str(quota), "--quiet")
    assert rc == 0, err
    rows = {
        line.split()[0]: line for line in out.splitlines() if line.startswith(("heavy", "light"))
    }
    assert rows["heavy/more"].split()[1] == "<none>"
    assert "quota:" in rows["heavy/more"] and "heavy" in rows["heavy/more"]
    assert rows["light/first"].split()[1] in ("n1", "n2")


def test_without_the_quota_file_the_same_pods_all_fit(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, _ = place(capsys, "--cluster", str(cluster), "--quiet", "--output", "json")
    assert rc == 0
    placements = json.loads(out)["placements"]
    assert placements["heavy/more"] is not None and placements["light/first"] is not None


def test_fair_share_tries_the_tenant_holding_less_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """heavy's pod is older, so the plain queue tries it first; with the quota file the
    tenant further below its share (light, holding nothing) goes first."""
    cluster = dump(
        tmp_path / "cluster.yaml",
        make_node("n1").cpu("64").memory("512Gi").gpus(8).obj(),
        make_pod("running", "heavy").gpus(2).node("n1").obj(),
        make_pod("old", "heavy").gpus(1).created("2026-01-01T00:00:00Z").obj(),
        make_pod("new", "light").gpus(1).created("2026-01-02T00:00:00Z").obj(),
    )
    quota = tmp_path / "quota.yaml"
    quota.write_text(QUOTA)
    _, plain, _ = place(capsys, "--cluster", str(cluster), "--quiet")
    _, fair, _ = place(capsys, "--cluster", str(cluster), "--quota", str(quota), "--quiet")

    def order(out: str) -> list[str]:
        return [
            line.split()[0] for line in out.splitlines() if line.startswith(("heavy/", "light/"))
        ]

    assert order(plain) == ["heavy/old", "light/new"]
    assert order(fair) == ["light/new", "heavy/old"]


def test_a_bad_quota_file_is_named_and_nothing_is_placed(
    tmp_path: Path, cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quota = tmp_path / "quota.yaml"
    quota.write_text("apiVersion: batchsched.io/v1alpha1\nkind: QuotaConfig\ntenants: 3\n")
    rc, out, err = place(capsys, "--cluster", str(cluster), "--quota", str(quota))
    assert (rc, out) == (2, "")
    assert err.startswith(f"batchsched place: {quota}")
    assert "Traceback" not in err


def test_progress_says_what_is_placed_and_how_many_fit(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = place(capsys, "--cluster", str(cluster))
    assert rc == 0
    lines = err.splitlines()
    assert "batchsched place: placing 2 pending pods on 2 nodes" in lines
    assert any(line.startswith("batchsched place: placed 2 of 2 pending pods (") for line in lines)
    # Read, parse and place in that order, each once.
    steps = [
        next(i for i, line in enumerate(lines) if word in line)
        for word in ("read ", "parsed ", "placing ")
    ]
    assert steps == sorted(steps)

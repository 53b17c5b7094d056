"""`batchsched simulate --quota`: tenant results on stdout and in the JSON, the same for the
same seed, and a bad quota file exiting 2 with the file named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from batchsched.cli import main
from tests.builders import make_node, make_pod

QUOTA = """\
apiVersion: batchsched.io/v1alpha1
kind: QuotaConfig
tenants:
- name: capped
  max: {nvidia.com/gpu: 1}
  namespaces: [capped]
- name: free
  namespaces: [free]
"""


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["simulate", "--quiet", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def job(name: str, namespace: str, arrival: int) -> dict[str, object]:
    return (
        make_pod(name, namespace=namespace)
        .cpu("1")
        .gpus(1)
        .annotation("batchsched.io/sim-arrival", str(arrival))
        .annotation("batchsched.io/sim-runtime", "100")
        .obj()
    )


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path, Path]:
    cluster, pods, quota = tmp_path / "cluster.yaml", tmp_path / "pods.yaml", tmp_path / "q.yaml"
    cluster.write_text(yaml.safe_dump_all([make_node("n1").cpu("16").gpus(4).obj()]))
    jobs = [job(f"c{i}", "capped", i) for i in range(3)] + [job("f0", "free", 0)]
    pods.write_text(yaml.safe_dump_all(jobs))
    quota.write_text(QUOTA)
    return cluster, pods, quota


def test_the_summary_shows_each_tenants_pods_held_by_its_quota(
    inputs: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster, pods, quota = inputs
    out_file = tmp_path / "out.json"
    args = ["--cluster", str(cluster), "--pods", str(pods), "--quota", str(quota)]
    rc, out, err = run(capsys, *args, "--json", str(out_file))
    assert rc == 0, err
    assert "quota q.yaml" in out.splitlines()[0]
    assert "tenants: 2 pods held by their quota at least once" in out
    capped = next(line.split() for line in out.splitlines() if line.split()[:1] == ["capped"])
    assert capped[1:5] == ["3", "3", "2", "(3)"]  # arrived, placed, held (refusals)
    tenants = json.loads(out_file.read_text())["summary"]["tenants"]
    # One GPU at a time for "capped": c1 starts when c0 ends at 100, c2 at 200.
    assert tenants["capped"]["wait_max_s"] == 198 and tenants["capped"]["gpus_peak"] == 1.0
    assert tenants["free"]["pods_held_by_quota"] == 0 and tenants["free"]["wait_max_s"] == 0


def test_the_same_seed_gives_the_same_tenant_results(
    inputs: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster, pods, quota = inputs
    summaries = []
    for name in ("one.json", "two.json"):
        args = ["--cluster", str(cluster), "--pods", str(pods), "--quota", str(quota)]
        rc, _, err = run(capsys, *args, "--seed", "5", "--json", str(tmp_path / name))
        assert rc == 0, err
        document = json.loads((tmp_path / name).read_text())
        for key in ("sim_s", "pods_per_s", "wall_s"):  # how long it took, not what happened
            document["summary"].pop(key)
        summaries.append(document)
    assert summaries[0] == summaries[1]


def test_without_quota_the_summary_has_no_tenant_lines(
    inputs: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cluster, pods, _ = inputs
    rc, out, err = run(capsys, "--cluster", str(cluster), "--pods", str(pods))
    assert rc == 0, err
    assert "tenants:" not in out


def test_a_bad_quota_file_exits_2_naming_the_file_and_field(
    inputs: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster, pods, _ = inputs
    bad = tmp_path / "bad-quota.yaml"
    bad.write_text(QUOTA.replace("max: {nvidia.com/gpu: 1}", "max: {nvidia.com/gpu: lots}"))
    args = ["--cluster", str(cluster), "--pods", str(pods), "--quota", str(bad)]
    rc, out, err = run(capsys, *args)
    assert rc == 2 and out == ""
    assert err.startswith("batchsched simulate: ") and "bad-quota.yaml" in err
    assert "tenants[0].max" in err and "Traceback" not in err


def test_the_html_report_has_a_table_per_tenant(
    inputs: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster, pods, quota = inputs
    args = ["--cluster", str(cluster), "--pods", str(pods), "--quota", str(quota)]
    rc, _, err = run(capsys, *args, "--report", str(tmp_path / "report"))
    assert rc == 0, err
    page = (tmp_path / "report" / "index.html").read_text()
    assert "<th>tenants</th><td><table>" in page
    assert "<th>capped</th><td><table>" in page and "<th>pods_held_by_quota</th><td>2</td>" in page

"""`batchsched simulate`: the paper's JSON, the report files, replays, and bad input exiting 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from batchsched.cli import main
from tests.builders import make_node, make_pod

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn-0,64000,262144,4,T4\nn-1,64000,262144,4,T4\n"
PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
    "p-0,4000,8192,1,1000,,LS,Running,0,100,0\n"
    "p-1,4000,8192,1,1000,,LS,Running,10,50,10\n"
)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["simulate", "--quiet", *args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def small_trace(tmp_path: Path) -> tuple[Path, Path]:
    nodes, pods = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    nodes.write_text(NODES)
    pods.write_text(PODS)
    return nodes, pods


def test_the_papers_method_writes_the_allocation_curve_at_every_arrived_percent(
    small_trace: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes, pods = small_trace
    out_file = tmp_path / "out.json"
    rc, out, _ = run(
        capsys, "--nodes", str(nodes), "--pods", str(pods), "--seed", "3", "--json", str(out_file)
    )
    assert rc == 0, out
    result = json.loads(out_file.read_text())
    assert result["gpu_total"] == 8
    assert [p["arrived_pct"] for p in result["curve"]] == list(range(131))
    assert all(set(p) == {"arrived_pct", "gpu_alloc_pct", "frag_gpu_pct"} for p in result["curve"])
    # Eleven one-GPU pods arrive (12.5 % each); eight fit, then the cluster is full.
    assert result["curve"][100]["gpu_alloc_pct"] == 100.0
    assert result["curve"][130]["gpu_alloc_pct"] == 100.0
    assert result["curve"][13]["gpu_alloc_pct"] == 12.5  # between arrivals: the state so far
    assert result["summary"]["pods_arrived"] == 11
    assert "GPU allocation: 100.0% at 100% arrived, 100.0% at 130% arrived" in out


def test_the_paper_report_is_an_html_page_with_two_plots_and_no_empty_wait_plot(
    small_trace: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes, pods = small_trace
    report = tmp_path / "report"
    rc, out, _ = run(capsys, "--nodes", str(nodes), "--pods", str(pods), "--report", str(report))
    assert rc == 0
    names = sorted(p.name for p in report.iterdir())
    assert names == ["allocation_vs_arrived.png", "index.html", "utilisation_over_time.png"]
    for png in report.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (report / "index.html").read_text()
    assert all(f'src="{name}"' in page for name in names if name.endswith(".png"))
    assert f"report: {report / 'index.html'}" in out


def test_a_trace_replay_uses_creation_and_deletion_times(
    small_trace: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes, pods = small_trace
    out_file = tmp_path / "out.json"
    rc, _, _ = run(
        capsys,
        "--nodes",
        str(nodes),
        "--pods",
        str(pods),
        "--method",
        "replay",
        "--json",
        str(out_file),
    )
    assert rc == 0
    result = json.loads(out_file.read_text())
    assert result["summary"]["pods_placed"] == 2
    assert result["summary"]["gpu_alloc_pct_end"] == 0.0  # both left
    assert [row["running"] for row in result["timeline"]] == [1, 2, 1, 0]
    assert [row["t"] for row in result["timeline"]] == [0, 10, 50, 100]


def test_a_yaml_cluster_with_a_generated_workload_replays_with_waits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        yaml.safe_dump_all(
            [
                make_node("a").cpu("64").memory("512Gi").gpus(8).obj(),
                make_pod("resident").cpu("1").gpus(2).node("a").obj(),
            ]
        )
    )
    out_file = tmp_path / "out.json"
    spec = "jobs=30,gang=1-2,gpus=2|4,share=0.3,tenants=2,runtime=100-500,interval=20"
    rc, out, err = run(
        capsys, "--cluster", str(cluster), "--generate", spec, "--json", str(out_file)
    )
    assert rc == 0, err
    summary = json.loads(out_file.read_text())["summary"]
    assert summary["method"] == "replay"
    assert summary["pods_placed"] == summary["pods_arrived"] > 30
    assert summary["wait_s"]["max"] > 0  # an 8-GPU node is not enough for all at once
    assert "replay on a virtual clock" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pods", "missing.csv"], "missing.csv: cannot read"),
        (["--generate", "jobs=two"], "generator: jobs: invalid literal"),
        (["--generate", "gpus=1", "--method", "paper"], "the paper's method samples a trace"),
    ],
    ids=[
        "a missing pod file is named",
        "a bad generator value is named",
        "the paper's method needs a trace to sample",
    ],
)
def test_bad_input_exits_2_with_one_message(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    rc, out, err = run(capsys, *args)
    assert rc == 2 and out == ""
    assert err.startswith("batchsched simulate: ") and message in err


def test_the_embedded_trace_runs_with_defaults_at_a_tenth_of_the_load(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, out, _ = run(capsys, "--inflation", "0.1")
    assert rc == 0
    assert out.startswith("trace openb_pod_list_default.csv, paper's method")
    assert "cluster: 1213 nodes, 6212 GPUs" in out


def test_yaml_pods_arrive_and_leave_as_their_annotations_say(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all([make_node("a").cpu("8").gpus(1).obj()]))
    pods = tmp_path / "pods.yaml"
    pods.write_text(
        yaml.safe_dump_all(
            [
                make_pod("first")
                .cpu("1")
                .gpus(1)
                .annotation("batchsched.io/sim-runtime", "60")
                .obj(),
                make_pod("second")
                .cpu("1")
                .gpus(1)
                .annotation("batchsched.io/sim-arrival", "10")
                .annotation("batchsched.io/sim-runtime", "5")
                .obj(),
            ]
        )
    )
    out_file = tmp_path / "out.json"
    rc, _, err = run(
        capsys, "--cluster", str(cluster), "--pods", str(pods), "--json", str(out_file)
    )
    assert rc == 0, err
    result = json.loads(out_file.read_text())
    assert result["summary"]["wait_s"]["max"] == 50.0  # arrived at 10, placed at 60
    assert [row["t"] for row in result["timeline"]] == [0, 10, 60, 65]

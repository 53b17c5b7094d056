"""The simulator's HTML report: tables, not raw JSON; a wait-time plot only where pods wait."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchsched.cli import main

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn-0,64000,262144,4,T4\n"
PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
    "p-0,4000,8192,4,1000,,LS,Running,0,100,0\n"
    "p-1,4000,8192,4,1000,,LS,Running,10,150,10\n"
)


def report(tmp_path: Path, capsys: pytest.CaptureFixture[str], method: str) -> Path:
    nodes, pods, out = tmp_path / "nodes.csv", tmp_path / "pods.csv", tmp_path / method
    nodes.write_text(NODES)
    pods.write_text(PODS)
    args = ["--nodes", str(nodes), "--pods", str(pods), "--method", method]
    assert main(["simulate", "--quiet", *args, "--report", str(out)]) == 0
    capsys.readouterr()
    return out


@pytest.mark.parametrize("method", ["paper", "replay"])
def test_the_summary_is_tables_without_raw_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], method: str
) -> None:
    page = (report(tmp_path, capsys, method) / "index.html").read_text()
    assert "{&quot;" not in page and '{"' not in page
    assert "<th>wait_s</th><td><table>" in page


def test_the_paper_report_says_why_it_has_no_wait_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = report(tmp_path, capsys, "paper")
    assert not (out / "wait_time_cdf.png").exists()
    assert "No wait-time plot" in (out / "index.html").read_text()


def test_a_replay_where_a_pod_waits_has_the_wait_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = report(tmp_path, capsys, "replay")
    assert (out / "wait_time_cdf.png").read_bytes()[:4] == b"\x89PNG"
    assert 'src="wait_time_cdf.png"' in (out / "index.html").read_text()

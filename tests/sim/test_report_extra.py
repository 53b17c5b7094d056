"""`batchsched simulate --report` without the `report` extra (matplotlib, left out of the
scheduler's image): one line saying how to install it, exit 2, before any simulating."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from batchsched.cli import main

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn-0,64000,262144,4,T4\n"
PODS = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
    "p-0,4000,8192,1,1000,,LS,Running,0,100,0\n"
)


def test_report_without_matplotlib_says_how_to_install_it_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    nodes, pods, report = tmp_path / "nodes.csv", tmp_path / "pods.csv", tmp_path / "report"
    nodes.write_text(NODES)
    pods.write_text(PODS)
    # None in sys.modules makes `import matplotlib` raise ImportError, as when not installed.
    monkeypatch.setitem(sys.modules, "matplotlib", None)

    rc = main(["simulate", "--quiet", "--nodes", str(nodes), "--pods", str(pods),
               "--report", str(report)])  # fmt: skip

    out, err = capsys.readouterr()
    assert rc == 2
    assert err.count("\n") == 1
    assert "pip install 'batchsched[report]'" in err
    assert out == ""  # refused before the run, not after it
    assert not report.exists()

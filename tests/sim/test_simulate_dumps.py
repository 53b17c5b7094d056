"""`batchsched simulate --cluster` on a whole `kubectl get -o yaml` dump: kinds it does not
read are skipped with one stderr line (a Service used to abort the run with exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from batchsched.cli import main
from tests.builders import make_node, make_pod


def test_a_dump_with_services_simulates_and_says_once_what_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}}
    items = [make_node("n1").cpu("8").gpus(4).obj(), service, make_pod("p").gpus(1).obj()]
    path = tmp_path / "all.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    rc = main(["simulate", "--cluster", str(path), "--method", "replay"])
    _, err = capsys.readouterr()
    assert rc == 0, err
    skipped = [line for line in err.splitlines() if "skipped" in line]
    assert skipped == ["batchsched simulate: skipped 1 object of kinds it does not read: Service 1"]
    rc = main(["simulate", "--quiet", "--cluster", str(path), "--method", "replay"])
    _, err = capsys.readouterr()
    assert rc == 0 and "skipped" not in err

"""`batchsched simulate` with Dynamic Resource Allocation: a YAML cluster of DeviceClasses,
ResourceSlices, claims and templates, and generated pods asking for GPUs through claims."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchsched.cli import main
from batchsched.dra.nvidia import DRIVER, basic_gpu, device_class, resource_slice
from tests.builders import make_node, make_pod
from tests.dra.builders import claim, claim_template, exact

Obj = dict[str, Any]


def gpu_slice(node: str, gpus: int) -> Obj:
    devices = [basic_gpu(i, f"GPU-{node}-{i}", pcie_root=f"pci0000:{i // 4}") for i in range(gpus)]
    return resource_slice(node, devices, f"{node}-{DRIVER}")


def template(name: str, count: int) -> Obj:
    return claim_template(name, exact("gpus", count))


def shared_claim(name: str, count: int) -> Obj:
    return claim(name, exact("gpus", count))


def pod(name: str, arrival: float, runtime: float, **source: str) -> Obj:
    """A pending pod with one claim entry: `template=` or `claim=`."""
    entry = {"name": "gpu"}
    if "template" in source:
        entry["resourceClaimTemplateName"] = source["template"]
    else:
        entry["resourceClaimName"] = source["claim"]
    return (
        make_pod(name).cpu("1").set("metadata.uid", f"uid-{name}")
        .annotation("batchsched.io/sim-arrival", str(arrival))
        .annotation("batchsched.io/sim-runtime", str(runtime))
        .set("spec.resourceClaims", [entry]).obj()
    )  # fmt: skip


def simulate(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, objects: list[Obj], *args: str
) -> tuple[int, str, str, dict[str, Any]]:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all(objects))
    out_file = tmp_path / "out.json"
    rc = main(["simulate", "--quiet", "--cluster", str(cluster), "--json", str(out_file), *args])
    out, err = capsys.readouterr()
    result = json.loads(out_file.read_text()) if rc == 0 else {}
    return rc, out, err, result


def dgx() -> list[Obj]:
    return [make_node("dgx-0").cpu("64").obj(), device_class(), gpu_slice("dgx-0", 8)]


def test_a_yaml_dra_cluster_replays_with_claims_released_at_departure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = [
        *dgx(),
        template("gpu-4", 4),
        pod("a", 0, 100, template="gpu-4"),
        pod("b", 0, 50, template="gpu-4"),
        pod("c", 10, 30, template="gpu-4"),  # waits for b's GPUs
        pod("d", 20, 10, template="gpu-4"),  # then for a's
    ]
    rc, out, err, result = simulate(capsys, tmp_path, objects)
    assert rc == 0, err
    summary = result["summary"]
    assert (summary["gpus"], summary["dra_gpus"], summary["pods_placed"]) == (8, 8, 4)
    assert "cluster: 1 nodes, 8 GPUs (8 as DRA devices of DeviceClass gpu.nvidia.com)" in out
    assert summary["arrived_gpu_pct"] == 200.0
    alloc = {row["t"]: (row["gpu_alloc_pct"], row["waiting"]) for row in result["timeline"]}
    assert alloc == {
        0: (100.0, 0),
        10: (100.0, 1),
        20: (100.0, 2),
        50: (100.0, 1),  # b left: c takes its GPUs
        80: (100.0, 0),  # c left: d takes them again
        90: (50.0, 0),
        100: (0.0, 0),
    }
    assert summary["wait_s"]["max"] == 60.0  # d: arrived at 20, started at 80


def test_pods_sharing_a_claim_hold_its_devices_until_the_last_one_leaves(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objects = [
        *dgx(),
        template("gpu-8", 8),
        shared_claim("shared", 2),
        pod("first", 0, 10, claim="shared"),
        pod("second", 5, 100, claim="shared"),
        pod("whole", 1, 10, template="gpu-8"),  # needs every GPU: waits for both sharers
    ]
    rc, _, err, result = simulate(capsys, tmp_path, objects)
    assert rc == 0, err
    summary = result["summary"]
    assert summary["pods_placed"] == 3
    # The shared claim counts once toward arrived load: 2 + 8 of 8 GPUs.
    assert summary["arrived_gpu_pct"] == 125.0
    alloc = {row["t"]: row["gpu_alloc_pct"] for row in result["timeline"]}
    assert alloc[10] == 25.0  # first left; second still uses the claim's two GPUs
    assert alloc[105] == 100.0  # second left at 105: the claim let go, whole took all eight
    assert summary["wait_s"]["max"] == 104.0


def test_a_generated_workload_runs_on_a_csv_cluster_as_dra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn-0,64000,262144,4,T4\ncpu,8000,1024,0,\n")
    out_file = tmp_path / "out.json"
    spec = "jobs=20,gang=1-2,gpus=1|2,share=0,runtime=100-500,interval=20,gpus_as=dra"
    args = ["--nodes", str(nodes), "--generate", spec, "--json", str(out_file)]
    rc = main(["simulate", "--quiet", *args])
    out, err = capsys.readouterr()
    assert rc == 0, err
    summary = json.loads(out_file.read_text())["summary"]
    assert summary["pods_placed"] == summary["pods_arrived"] > 20
    assert summary["wait_s"]["max"] > 0
    assert "cluster: 2 nodes, 4 GPUs (4 as DRA devices of DeviceClass gpu.nvidia.com)" in out


def test_generated_claims_on_a_yaml_cluster_get_nvidias_device_class(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    node = make_node("dgx-0").cpu("64").memory("1Ti").obj()
    objects = [node, gpu_slice("dgx-0", 8)]  # no DeviceClass in the files
    spec = "jobs=10,gang=1-1,gpus=2,share=0,runtime=100,interval=10,gpus_as=dra"
    rc, _, err, result = simulate(capsys, tmp_path, objects, "--generate", spec)
    assert rc == 0, err
    assert result["summary"]["pods_placed"] == 10 and result["summary"]["dra_gpus"] == 8


def test_a_pod_whose_template_is_missing_waits_with_the_controllers_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err, result = simulate(capsys, tmp_path, [*dgx(), pod("p", 0, 10, template="none")])
    assert rc == 0, err
    assert result["summary"]["pods_waiting"] == 1
    assert "waiting at the end: 1" in out

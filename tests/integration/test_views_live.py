"""`batchsched queue`, `explain` and `gpus` against a real kube-apiserver: the command lists
the objects, and what it prints is what a running scheduler then does."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from batchsched.cli import main
from batchsched.kube.client import request_json
from batchsched.runtime.app import RunOptions
from tests.builders import PodBuilder, make_node, make_pod
from tests.integration.conftest import ignore_gone
from tests.integration.control_plane import ROOT, ControlPlane
from tests.integration.helpers import create_node, create_pod, wait_for
from tests.integration.live import node_of, running_scheduler

NS = "default"
GROUPS = f"/apis/scheduling.x-k8s.io/v1alpha1/namespaces/{NS}/podgroups"
QUEUE = "batchsched.io/queue"
QUOTA = """apiVersion: batchsched.io/v1alpha1
kind: QuotaConfig
tenants:
- {name: team-a, queues: [a], max: {nvidia.com/gpu: 12}}
- {name: team-b, queues: [b], guaranteed: {nvidia.com/gpu: 4}, max: {nvidia.com/gpu: 6}}
"""


async def run_command(
    capsys: pytest.CaptureFixture[str], plane: ControlPlane, *args: str
) -> tuple[int, str, str]:
    """The CLI as a user runs it (its own event loop, in a thread), with the test kubeconfig."""
    argv = [*args, "--kubeconfig", str(plane.kubeconfig)]
    code = await asyncio.to_thread(main, argv)
    out, err = capsys.readouterr()
    return code, out, err


def tenant(builder: PodBuilder, queue: str) -> PodBuilder:
    return builder.label(QUEUE, queue).cpu("1")


async def cluster(api: client.ApiClient) -> None:
    """One 8-GPU node; team-a runs 4 GPUs on it; a pod of each tenant asks for the other 4
    (team-a's first); a gang of team-b has 2 of its 3 members."""
    await create_node(api, make_node("gpu-0").gpus(8).cpu("64").memory("256Gi"))
    await create_pod(api, tenant(make_pod("busy").gpus(4), "a").node("gpu-0"))
    await create_pod(api, tenant(make_pod("a-first").gpus(4), "a"))
    await create_pod(api, tenant(make_pod("b-second").gpus(4), "b"))
    body = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": NS},
        "spec": {"minMember": 3},
    }
    await request_json(api, "POST", GROUPS, body=body)
    for i in range(2):
        member = tenant(make_pod(f"train-{i}").gpus(1), "b")
        await create_pod(api, member.label("scheduling.x-k8s.io/pod-group", "train"))


async def test_the_queue_order_is_the_order_the_scheduler_then_binds_in(
    api: client.ApiClient,
    control_plane: ControlPlane,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    quota = tmp_path / "quotas.yaml"
    quota.write_text(QUOTA)
    await cluster(api)
    code, out, err = await run_command(
        capsys, control_plane, "queue", "--quota", str(quota), "-o", "json"
    )
    assert code == 0, err
    view: dict[str, Any] = json.loads(out)
    rows = {r["workload"]: r for r in view["rows"]}
    # team-b uses nothing, team-a 4 GPUs: b's pod goes first although a's is older.
    assert rows["default/b-second"]["position"] < rows["default/a-first"]["position"]
    assert rows["default/train"]["reason"] == "waiting for members: 2/3 exist"
    assert (rows["default/train"]["gang"], rows["default/train"]["pending"]) == (True, 2)
    tenants = {t["tenant"]: t for t in view["tenants"]}
    assert (tenants["team-a"]["used_gpus"], tenants["team-a"]["max_gpus"]) == (4.0, 12.0)
    assert (tenants["team-b"]["guaranteed_gpus"], tenants["team-b"]["pending"]) == (4.0, 2)

    options = RunOptions(leader_elect=False, http_host="127.0.0.1", http_port=0, quota=quota)
    async with running_scheduler(control_plane, options):
        await wait_for(lambda: node_of(api, NS, "b-second"), what="b-second bound")
        assert await node_of(api, NS, "a-first") == ""  # the 4 GPUs left went to team-b

        async def reason_written() -> bool:
            code, out, _ = await run_command(
                capsys, control_plane, "queue", "--quota", str(quota), "-o", "json"
            )
            rows = {r["workload"]: r for r in json.loads(out)["rows"]}
            return code == 0 and "Insufficient nvidia.com/gpu" in rows["default/a-first"]["reason"]

        await wait_for(reason_written, timeout=20, what="the scheduler's reason in the queue")


async def test_explain_says_which_nodes_fail_and_how_many_gpus_are_missing(
    api: client.ApiClient, control_plane: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    await cluster(api)
    await create_pod(api, tenant(make_pod("wide").gpus(8), "a"))
    code, out, err = await run_command(capsys, control_plane, "explain", "pod/wide", "-n", NS)
    assert code == 0, err
    assert "Nodes:        0/1 nodes are available: 1 Insufficient nvidia.com/gpu." in out
    assert "needs 4 more GPU(s) free on one node" in out
    code, out, err = await run_command(capsys, control_plane, "explain", "podgroup/train")
    assert code == 0, err
    assert "Gang:         minMember 3, 0 bound, 2 pending (train-0, train-1)" in out
    assert "1 more member pod(s) must be created (minMember 3)" in out
    code, _, err = await run_command(capsys, control_plane, "explain", "pod/nothing")
    assert (code, err.strip()) == (
        2,
        "batchsched explain: no pending pod or gang 'pod/nothing' in namespace 'default'",
    )


async def test_the_gpu_view_counts_what_pods_hold_per_node_and_in_total(
    api: client.ApiClient, control_plane: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    await cluster(api)
    await create_node(api, make_node("gpu-1").gpus(4).cpu("64").memory("256Gi"))
    code, out, err = await run_command(capsys, control_plane, "gpus", "-o", "json")
    assert code == 0, err
    view = json.loads(out)
    nodes = {n["node"]: n for n in view["nodes"]}
    assert (nodes["gpu-0"]["allocatable"], nodes["gpu-0"]["used"], nodes["gpu-0"]["free"]) == (
        8,
        4.0,
        4,
    )
    assert (nodes["gpu-1"]["used"], nodes["gpu-1"]["free"]) == (0.0, 4)
    assert (view["allocatable"], view["used"], view["free"]) == (12, 4.0, 8)
    code, out, _ = await run_command(capsys, control_plane, "gpus")
    assert code == 0 and out.splitlines()[-1].split()[:4] == ["TOTAL", "12", "4", "8"]


def plugin_shim(directory: Path) -> Path:
    """What pip installs for pyproject's `kubectl-batchsched` entry point: an executable of
    that name on PATH that calls it."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, function = scripts["kubectl-batchsched"].partition(":")
    shim = directory / "kubectl-batchsched"
    shim.write_text(
        f"#!{sys.executable}\nimport sys\nfrom {module} import {function}\nsys.exit({function}())\n"
    )
    shim.chmod(0o755)
    return shim


async def test_kubectl_runs_the_views_as_its_batchsched_plugin(
    api: client.ApiClient, control_plane: ControlPlane, tmp_path: Path
) -> None:
    await cluster(api)
    plugin_shim(tmp_path)
    path = f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}"
    # This checkout's batchsched, not whichever the interpreter may have installed.
    env = {**os.environ, "PATH": path, "PYTHONPATH": str(ROOT)}
    kubectl = str(control_plane.bin_dir / "kubectl")
    listed = await asyncio.to_thread(
        subprocess.run, [kubectl, "plugin", "list"], env=env, capture_output=True, text=True
    )
    assert str(tmp_path / "kubectl-batchsched") in listed.stdout, listed.stderr
    argv = [
        kubectl,
        "batchsched",
        "gpus",
        "-o",
        "json",
        "--kubeconfig",
        str(control_plane.kubeconfig),
    ]
    done = await asyncio.to_thread(
        subprocess.run, argv, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["used"] == 4.0


async def test_the_quota_is_read_from_a_configmap_and_a_bad_one_is_named_in_the_error(
    api: client.ApiClient, control_plane: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    await cluster(api)
    configmaps = f"/api/v1/namespaces/{NS}/configmaps"
    for name, text in (("views-quota", QUOTA), ("views-bad-quota", "tenants: [")):
        await ignore_gone(request_json(api, "DELETE", f"{configmaps}/{name}"))
        body = {"metadata": {"name": name}, "data": {"quotas.yaml": text}}
        await request_json(api, "POST", configmaps, body=body)
    code, out, err = await run_command(
        capsys, control_plane, "queue", "--quota-configmap", f"{NS}/views-quota", "-o", "json"
    )
    assert code == 0, err
    assert [t["tenant"] for t in json.loads(out)["tenants"]] == ["team-a", "team-b"]
    code, out, err = await run_command(
        capsys, control_plane, "queue", "--quota-configmap", f"{NS}/views-bad-quota"
    )
    assert (code, out) == (2, "")
    assert err.startswith("batchsched queue: ConfigMap default/views-bad-quota quotas.yaml")

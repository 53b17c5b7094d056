"""batchsched calling a real HTTP extender process (an aiohttp server in the test that returns
fixed verdicts) while it schedules on the real API server."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from batchsched.config import SchedulerConfig, config_from_mapping, load_config
from batchsched.kube.client import request_json
from batchsched.runtime.app import App, RunOptions
from tests.builders import make_node, make_pod
from tests.extenders.fake_extender import Verdicts, keeping, serving
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import create_node, create_pod, wait_for
from tests.integration.live import node_of, pod, running_scheduler
from tests.integration.test_preemption_live import (
    HIGH,
    all_bound,
    bound,
    exists,
    gpu_pod,
    kubelet,
    notes,
    priority_classes,
)

NS = "default"


def _config(url: str, **extender: Any) -> SchedulerConfig:
    return config_from_mapping(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "gpu-scheduler"}],
            "extenders": [
                {
                    "urlPrefix": url,
                    "filterVerb": "filter",
                    "prioritizeVerb": "prioritize",
                    "weight": 5,
                    "httpTimeout": "2s",
                    **extender,
                }
            ],
        }
    )


def _closed_port_url() -> str:
    with socket.socket() as s:  # bound then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def _nodes(api: client.ApiClient) -> None:
    for name in ("n1", "n2", "n3"):
        await create_node(api, make_node(name).cpu("8").memory("16Gi").pods(20))


async def _scheduled_message(api: client.ApiClient, name: str) -> str:
    body = await pod(api, NS, name)
    for condition in body.get("status", {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message", ""))
    return ""


async def test_pods_land_only_where_the_extender_allows_and_follow_its_scores(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await _nodes(api)
    verdicts = Verdicts(
        refuse={"n1": "n1 is drained by the extender"},
        unresolvable={"n2": "n2 is in the wrong rack"},
    )
    async with serving(verdicts) as url, running_scheduler(control_plane, config=_config(url)):
        for i in range(3):
            await create_pod(api, make_pod(f"p{i}").cpu("1"))
        for i in range(3):
            await wait_for(lambda i=i: node_of(api, NS, f"p{i}"), timeout=30, what=f"p{i} bound")
            assert await node_of(api, NS, f"p{i}") == "n3"
        # nothing fits n3 any more (8 cpu, 3 taken): the extender's reasons reach the user
        await create_pod(api, make_pod("big").cpu("6"))
        await wait_for(lambda: _scheduled_message(api, "big"), timeout=30, what="big rejected")
        message = await _scheduled_message(api, "big")
        assert "n1 is drained by the extender" in message
        assert "n2 is in the wrong rack" in message
        assert "Insufficient cpu" in message
    assert {c[0] for c in verdicts.calls} == {"filter", "prioritize"}


async def test_extender_scores_choose_among_nodes_it_allows(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await _nodes(api)
    # n2 half full: the in-process scorers (LeastAllocated) prefer n1 or n3; the extender's
    # 10 * weight 5 * 10 outweighs them.
    await create_pod(api, make_pod("filler").cpu("4").set("spec.nodeName", "n2"))
    verdicts = Verdicts(scores={"n1": 0, "n2": 10, "n3": 3})
    async with serving(verdicts) as url, running_scheduler(control_plane, config=_config(url)):
        await create_pod(api, make_pod("scored").cpu("1"))
        await wait_for(lambda: node_of(api, NS, "scored"), timeout=30, what="scored bound")
        assert await node_of(api, NS, "scored") == "n2"


async def test_an_ignorable_extender_that_is_down_does_not_block_scheduling(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await _nodes(api)
    config = _config(_closed_port_url(), ignorable=True)
    async with running_scheduler(control_plane, config=config):
        await create_pod(api, make_pod("goes").cpu("1"))
        await wait_for(lambda: node_of(api, NS, "goes"), timeout=30, what="goes bound")


async def test_a_non_ignorable_extender_that_is_down_keeps_pods_pending_saying_why(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await _nodes(api)
    url = _closed_port_url()
    async with running_scheduler(control_plane, config=_config(url)):
        await create_pod(api, make_pod("stays").cpu("1"))
        await wait_for(lambda: _scheduled_message(api, "stays"), timeout=30, what="stays failed")
        message = await _scheduled_message(api, "stays")
        assert f"extender {url} filter failed" in message
        assert await node_of(api, NS, "stays") == ""


async def test_a_binder_extender_binds_the_pods_it_manages_and_default_binder_the_rest(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await _nodes(api)

    async def bind(args: dict[str, object]) -> str:
        ns, name, node = args["PodNamespace"], args["PodName"], args["Node"]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": ns, "uid": args["PodUID"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        await request_json(api, "POST", f"/api/v1/namespaces/{ns}/pods/{name}/binding", body=body)
        return ""

    verdicts = Verdicts(bind=bind)
    async with serving(verdicts) as url:
        config = _config(url, bindVerb="bind", managedResources=[{"name": "example.com/fpga"}])
        async with running_scheduler(control_plane, config=config):
            await create_pod(api, make_pod("plain").cpu("1"))
            await wait_for(lambda: node_of(api, NS, "plain"), timeout=30, what="plain bound")
    assert not [c for c in verdicts.calls if c[0] == "bind"]  # not managed: DefaultBinder
    await create_node(api, make_node("fpga").cpu("8").pods(20).res("example.com/fpga", "2"))
    async with serving(verdicts) as url:
        config = _config(url, bindVerb="bind", managedResources=[{"name": "example.com/fpga"}])
        async with running_scheduler(control_plane, config=config):
            fpga = make_pod("fpga-pod").cpu("1").req("example.com/fpga", 1).obj()
            fpga["spec"]["containers"][0]["resources"]["limits"] = {"example.com/fpga": 1}
            await request_json(api, "POST", f"/api/v1/namespaces/{NS}/pods", body=fpga)
            await wait_for(lambda: node_of(api, NS, "fpga-pod"), timeout=30, what="fpga bound")
    binds = [c[1] for c in verdicts.calls if c[0] == "bind"]
    assert [(b["PodName"], b["Node"]) for b in binds] == [("fpga-pod", "fpga")]


def _config_file(url: str, lease: str) -> str:
    return f"""apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  resourceNamespace: {NS}
  resourceName: {lease}
profiles:
- schedulerName: gpu-scheduler
extenders:
- urlPrefix: {url}
  filterVerb: filter
  nodeCacheCapable: true
"""


def _write(path: Path, text: str) -> None:
    """Replace the file in one rename, as the kubelet's ConfigMap writer does."""
    staging = path.with_suffix(".tmp")
    staging.write_text(text)
    os.replace(staging, path)


def _reloads(app: App, result: str) -> float:
    value = app.metrics.registry.get_sample_value(
        "batchsched_config_reload_total", {"result": result}
    )
    return value or 0.0


async def test_an_edited_config_file_puts_a_new_extender_in_force_between_cycles(
    api: client.ApiClient, control_plane: ControlPlane, tmp_path: Path
) -> None:
    await _nodes(api)
    only_n3 = Verdicts(refuse={"n1": "not here", "n2": "not here"})
    only_n1 = Verdicts(refuse={"n2": "not here", "n3": "not here"})
    path = tmp_path / "scheduler-config.yaml"
    lease = "gpu-scheduler-extenders"
    async with serving(only_n3) as first, serving(only_n1) as second:
        _write(path, _config_file(first, lease))
        options = RunOptions(
            leader_elect=False,
            http_host="127.0.0.1",
            http_port=0,
            config=path,
            config_poll_interval=0.05,
        )
        async with running_scheduler(control_plane, options, load_config(path)) as app:
            await create_pod(api, make_pod("before").cpu("1"))
            await wait_for(lambda: node_of(api, NS, "before"), timeout=30, what="before bound")
            assert await node_of(api, NS, "before") == "n3"

            _write(path, _config_file(second, lease))
            await wait_for(lambda: _reloads(app, "success") == 1, timeout=20, what="reload")
            for i in range(3):
                await create_pod(api, make_pod(f"after-{i}").cpu("1"))
            for i in range(3):
                name = f"after-{i}"
                await wait_for(lambda n=name: node_of(api, NS, n), timeout=30, what=f"{name}")
                assert await node_of(api, NS, name) == "n1"

            # A bad extender entry (a prioritizer without weight) keeps the second one.
            bad = _config_file(second, lease) + "  prioritizeVerb: prioritize\n"
            _write(path, bad)
            await wait_for(lambda: _reloads(app, "error") == 1, timeout=20, what="rejection")
            await create_pod(api, make_pod("later").cpu("1"))
            await wait_for(lambda: node_of(api, NS, "later"), timeout=30, what="later bound")
            assert await node_of(api, NS, "later") == "n1"
    assert {args["Pod"]["metadata"]["name"] for _, args in only_n1.calls} == {  # type: ignore[index]
        "after-0",
        "after-1",
        "after-2",
        "later",
    }


def _spare_kept(args: dict[str, Any]) -> object:
    """A preempt verb that spares pods labelled keep=yes (it gets whole Pods)."""
    victims = args["NodeNameToVictims"] or {}
    return keeping(
        {
            node: [
                p["metadata"]["uid"]
                for p in found["Pods"]
                if p["metadata"].get("labels", {}).get("keep") != "yes"
            ]
            for node, found in victims.items()
        }
    )


async def test_a_preempt_verb_extender_spares_the_victims_it_leaves_out(
    api: client.ApiClient, control_plane: ControlPlane
) -> None:
    await priority_classes(api)
    await create_node(api, make_node("gpu-0").gpus(8).cpu("64"))
    verdicts = Verdicts(preempt=_spare_kept)
    async with serving(verdicts) as url:
        config = config_from_mapping(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [{"schedulerName": "gpu-scheduler"}],
                "extenders": [{"urlPrefix": url, "preemptVerb": "preempt"}],
            }
        )
        async with running_scheduler(control_plane, config=config), kubelet(api) as fake:
            await create_pod(api, gpu_pod("kept", 4).label("keep", "yes"))
            await create_pod(api, gpu_pod("taken", 4))
            await wait_for(lambda: all_bound(api, "kept", "taken"), timeout=30, what="low bound")
            await create_pod(api, gpu_pod("urgent", 8, HIGH))

            # The plan names both; the extender keeps only "taken": it alone is evicted. The
            # next plan names "kept" alone, which the extender keeps no victim of: refused.
            async def refused() -> bool:
                found = await notes(api, "urgent", "FailedScheduling")
                return any("preemption refused by the extenders" in n for n in found)

            await wait_for(refused, timeout=30, what="the second plan refused")
            assert fake.finalised == {"taken"}
            assert await exists(api, "kept")
            assert not await bound(api, "urgent")
    sent = [args["NodeNameToVictims"]["gpu-0"]["Pods"] for _, args in verdicts.calls]  # type: ignore[index]
    asked = [sorted(v["metadata"]["name"] for v in pods) for pods in sent]
    assert asked[:2] == [["kept", "taken"], ["kept"]]

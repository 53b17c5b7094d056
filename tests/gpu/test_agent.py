"""The node agent: when it writes, what it says when NVML or the API fails, pod-resources."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pynvml
import pytest
from aiohttp.test_utils import TestClient, TestServer

from gpu.agent import Agent, AgentConfig, PublishError, gpu_holders
from gpu.agent_cli import main, make_http_app, read_host_numa
from gpu.fake_nvml import FakeNvml, Faults, host_numa
from gpu.machines import DGX_H100, PCIE_SERVER
from gpu.nrt import GPU_PODS_ANNOTATION, parse_nrt
from gpu.nvml import NvmlReader
from gpu.podresources import (
    PodDevices,
    PodResourcesUnavailable,
    decode_list_response,
    open_pod_resources,
)


class Recorder:
    def __init__(self) -> None:
        self.objects: list[Mapping[str, Any]] = []
        self.failure: str | None = None
        self.written = asyncio.Event()

    async def apply(self, obj: Mapping[str, object]) -> None:
        if self.failure is not None:
            raise PublishError(self.failure)
        self.objects.append(obj)
        self.written.set()

    async def wait_written(self) -> Mapping[str, Any]:
        await asyncio.wait_for(self.written.wait(), timeout=10)
        self.written.clear()
        return self.objects[-1]


def agent_for(lib: FakeNvml, recorder: Recorder, pod_resources: Any = None) -> Agent:
    reader = NvmlReader(lib, host_numa(lib.machine))
    config = AgentConfig("n1", "fake:test", poll_s=10, heartbeat_s=60)
    return Agent(reader, recorder, config, pod_resources=pod_resources)


async def test_the_first_refresh_publishes_and_an_unchanged_one_does_not() -> None:
    recorder = Recorder()
    agent = agent_for(FakeNvml(DGX_H100), recorder)
    assert await agent.refresh(now=0.0)
    assert not await agent.refresh(now=10.0)
    assert len(recorder.objects) == 1
    assert agent.ready() == {"nvml": (True, "ok"), "published": (True, "ok")}
    parsed = parse_nrt(recorder.objects[0])
    assert parsed.node == "n1" and parsed.topology is not None


async def test_a_heartbeat_is_written_when_due_even_without_change() -> None:
    recorder = Recorder()
    agent = agent_for(FakeNvml(DGX_H100), recorder)
    await agent.refresh(now=0.0)
    assert await agent.refresh(now=60.0)
    assert len(recorder.objects) == 2


async def test_a_gpu_falling_off_the_bus_is_published_at_the_next_read() -> None:
    recorder = Recorder()
    lib = FakeNvml(PCIE_SERVER)
    agent = agent_for(lib, recorder)
    await agent.refresh(now=0.0)
    lib.lose(6)
    assert await agent.refresh(now=1.0)
    topology = parse_nrt(recorder.objects[-1]).topology
    assert topology is not None and 6 not in topology.healthy_indices()


async def test_the_loop_publishes_at_once_after_a_critical_xid() -> None:
    recorder = Recorder()
    lib = FakeNvml(DGX_H100)
    reader = NvmlReader(lib, host_numa(DGX_H100))
    config = AgentConfig("n1", poll_s=3600, heartbeat_s=3600, event_wait_ms=50)
    running = asyncio.create_task(Agent(reader, recorder, config).run())
    try:
        first = parse_nrt(await recorder.wait_written()).topology
        assert first is not None and first.healthy_indices() == tuple(range(8))
        lib.inject_event(3, pynvml.nvmlEventTypeXidCriticalError, 79)
        second = parse_nrt(await recorder.wait_written()).topology
        assert second is not None and 3 not in second.healthy_indices()
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


async def test_nvml_unavailable_is_not_ready_with_the_reason_and_recovers() -> None:
    recorder = Recorder()
    lib = FakeNvml(DGX_H100, Faults(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED))
    agent = agent_for(lib, recorder)
    assert not await agent.refresh(now=0.0)
    ok, reason = agent.ready()["nvml"]
    assert not ok and "Driver Not Loaded" in reason
    assert recorder.objects == []
    assert agent.metrics.nvml_up._value.get() == 0
    lib.faults.init_error = None  # the driver came back
    assert await agent.refresh(now=1.0)
    assert agent.ready()["nvml"] == (True, "ok")


async def test_a_failing_nvml_call_is_not_ready_and_counted() -> None:
    recorder = Recorder()
    lib = FakeNvml(DGX_H100, Faults(failing={"nvmlDeviceGetUUID": pynvml.NVML_ERROR_UNKNOWN}))
    agent = agent_for(lib, recorder)
    assert not await agent.refresh(now=0.0)
    assert not agent.ready()["nvml"][0]
    counted = agent.metrics.nvml_errors.labels(call="nvmlDeviceGetUUID")._value.get()
    assert counted == 1


async def test_a_refused_write_is_not_ready_and_retried_next_time() -> None:
    recorder = Recorder()
    recorder.failure = "403 Forbidden: not your node"
    agent = agent_for(FakeNvml(DGX_H100), recorder)
    assert not await agent.refresh(now=0.0)
    assert agent.ready()["published"] == (False, "403 Forbidden: not your node")
    recorder.failure = None
    assert await agent.refresh(now=1.0)  # nothing changed, but nothing was written yet
    assert agent.ready()["published"] == (True, "ok")


class Lister:
    def __init__(self, devices: tuple[PodDevices, ...] = (), fail: bool = False) -> None:
        self.devices = devices
        self.fail = fail

    def list_devices(self) -> tuple[PodDevices, ...]:
        if self.fail:
            raise PodResourcesUnavailable("kubelet restarting")
        return self.devices


async def test_pods_holding_gpus_are_published_and_their_gpus_not_available() -> None:
    lib = FakeNvml(PCIE_SERVER)
    devices = (
        PodDevices("ml", "train-0", "main", "nvidia.com/gpu", (lib.uuid_of(0), lib.uuid_of(1))),
        PodDevices("ml", "infer", "main", "nvidia.com/gpu", (f"{lib.uuid_of(5)}::2",)),
    )
    recorder = Recorder()
    agent = agent_for(lib, recorder, Lister(devices))
    await agent.refresh(now=0.0)
    obj = recorder.objects[0]
    pods = json.loads(obj["metadata"]["annotations"][GPU_PODS_ANNOTATION])
    assert pods == {
        "version": 1,
        "pods": [
            {"namespace": "ml", "name": "infer", "gpus": [5]},
            {"namespace": "ml", "name": "train-0", "gpus": [0, 1]},
        ],
    }
    zone0 = next(z for z in obj["zones"] if z["name"] == "node-0")
    gpus = next(r for r in zone0["resources"] if r["name"] == "nvidia.com/gpu")
    assert gpus["available"] == 2


async def test_a_failing_pod_resources_read_publishes_without_pods() -> None:
    recorder = Recorder()
    agent = agent_for(FakeNvml(PCIE_SERVER), recorder, Lister(fail=True))
    assert await agent.refresh(now=0.0)
    pods = json.loads(recorder.objects[0]["metadata"]["annotations"][GPU_PODS_ANNOTATION])
    assert pods["pods"] == []


def test_device_ids_map_to_gpu_indices_and_other_devices_are_left_out() -> None:
    devices = (
        PodDevices("a", "p", "c", "nvidia.com/gpu", ("GPU-b", "GPU-x")),
        PodDevices("a", "p", "d", "nvidia.com/gpu", ("GPU-a::3",)),
        PodDevices("a", "q", "c", "example.com/nic", ("GPU-a",)),
    )
    assert gpu_holders(devices, ["GPU-a", "GPU-b", ""]) == {("a", "p"): (0, 1)}


def _field(number: int, payload: bytes) -> bytes:
    return bytes([number << 3 | 2, len(payload)]) + payload


def test_the_pod_resources_list_response_is_decoded() -> None:
    device = _field(1, b"nvidia.com/gpu") + _field(2, b"GPU-1") + _field(2, b"GPU-2")
    container = _field(1, b"main") + _field(2, device) + bytes([3 << 3, 5])  # cpu_ids varint
    pod = _field(1, b"train") + _field(2, b"ml") + _field(3, container)
    assert decode_list_response(_field(1, pod)) == (
        PodDevices("ml", "train", "main", "nvidia.com/gpu", ("GPU-1", "GPU-2")),
    )


def test_truncated_pod_resources_bytes_are_refused() -> None:
    with pytest.raises(ValueError, match="truncated"):
        decode_list_response(_field(1, b"abc")[:-1])


def test_without_the_socket_there_is_a_reason_not_a_lister(tmp_path: Path) -> None:
    found = open_pod_resources(tmp_path / "kubelet.sock")
    assert isinstance(found, str) and "not mounted" in found


async def test_readyz_lists_what_is_wrong_and_metrics_are_served() -> None:
    lib = FakeNvml(DGX_H100, Faults(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))
    agent = agent_for(lib, Recorder())
    await agent.refresh(now=0.0)
    async with TestClient(TestServer(make_http_app(agent))) as client:
        ready = await client.get("/readyz")
        assert ready.status == 503
        assert "[-]nvml failed: nvmlInit: NVML Shared Library Not Found" in await ready.text()
        assert (await client.get("/healthz")).status == 200
        metrics = await (await client.get("/metrics")).text()
        assert "batchsched_agent_nvml_up 0.0" in metrics


def test_host_numa_is_read_from_sysfs(tmp_path: Path) -> None:
    nodes = tmp_path / "node"
    for i, (cpus, distance) in enumerate((("0-3", "10 21"), ("4-7", "21 10"))):
        node = nodes / f"node{i}"
        node.mkdir(parents=True)
        (node / "cpulist").write_text(cpus + "\n")
        (node / "meminfo").write_text(f"Node {i} MemTotal:       2097152 kB\n")
        (node / "distance").write_text(distance + "\n")
    package = tmp_path / "cpu" / "cpu4" / "topology"
    package.mkdir(parents=True)
    (package / "physical_package_id").write_text("1\n")
    host = read_host_numa(nodes)
    assert [(h.id, h.socket, h.cpus, h.memory_mib, dict(h.distances)) for h in host] == [
        (0, 0, (0, 1, 2, 3), 2048, {0: 10, 1: 21}),
        (1, 1, (4, 5, 6, 7), 2048, {0: 21, 1: 10}),
    ]


def test_print_mode_prints_the_object_for_a_fake_machine(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["--fake", "dgx-h100", "--node-name", "gpu-1", "--print"]) == 0
    obj = json.loads(capsys.readouterr().out)
    parsed = parse_nrt(obj)
    assert parsed.node == "gpu-1" and parsed.topology is not None
    assert parsed.topology.model == "NVIDIA-H100-80GB-HBM3"


def test_a_missing_node_name_is_a_clear_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NODE_NAME", raising=False)
    assert main(["--fake", "dgx-h100", "--print"]) == 2
    assert "--node-name or $NODE_NAME is required" in capsys.readouterr().err


async def test_gpu_load_rides_with_the_heartbeat_and_never_writes_on_its_own() -> None:
    recorder = Recorder()
    lib = FakeNvml(DGX_H100)
    agent = agent_for(lib, recorder)
    await agent.refresh(now=0.0)
    first = parse_nrt(recorder.objects[0]).load
    assert first is not None and [g.utilization_pct for g in first] == [0] * 8
    lib.set_load(2, 75, 40 * 1024)
    assert not await agent.refresh(now=10.0)  # a load change alone writes nothing
    assert await agent.refresh(now=60.0)
    load = parse_nrt(recorder.objects[-1]).load
    assert load is not None
    assert (load[2].utilization_pct, load[2].memory_used_mib) == (75, 40 * 1024)
    assert load[2].memory_total_mib == DGX_H100.gpu_memory_mib

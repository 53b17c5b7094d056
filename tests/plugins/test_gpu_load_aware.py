"""GpuLoadAware: scores by GPU load, table by table; and the load's whole way from the fake
NVML through the agent's reader, the NodeResourceTopology annotation and the cache's topology
handler to the plugin's score."""

from __future__ import annotations

import pytest

from batchsched.cache import SchedulerCache
from batchsched.clock import FakeClock
from batchsched.framework.cycle_state import CycleState
from batchsched.framework.status import OK, SKIP
from batchsched.plugins.gpu_load_aware import GpuLoadAware, GpuLoadAwareArgs
from batchsched.runtime.handlers import TopologyEvents
from batchsched.runtime.queue import SchedulingQueue
from gpu.fake_nvml import FakeNvml, host_numa
from gpu.machines import DGX_H100
from gpu.nrt import GPU_LOAD_ANNOTATION, detail_json, load_json, nrt_object, parse_nrt
from gpu.nvml import NvmlReader
from gpu.topology import GpuLoad
from tests.builders import make_node, make_pod, snapshot_of

MIB = 80 * 1024  # an H100's memory


def gpu(index: int, util: int, used_fraction: float = 0.0) -> GpuLoad:
    return GpuLoad(index, util, round(MIB * used_fraction), MIB)


TARGET_60: dict[str, object] = {"targetUtilization": 60, "memoryWeight": 0}
LOAD_CASES: list[tuple[str, dict[str, object], list[GpuLoad], int, int]] = [
    ("an idle GPU scores 100", {}, [gpu(0, 0)], 1, 100),
    ("utilisation and memory weigh alike by default", {}, [gpu(0, 60, 0.2)], 1, 60),
    ("memory weight 0 scores by utilisation alone", {"memoryWeight": 0}, [gpu(0, 60, 0.9)], 1, 40),
    ("one GPU asked: the least loaded one counts", {}, [gpu(0, 90), gpu(1, 10)], 1, 95),
    ("two GPUs asked: the two least loaded count", {}, [gpu(0, 90), gpu(1, 10), gpu(2, 30)], 2, 90),
    ("no published load counts as unknownLoad", {"unknownLoad": 80}, [], 1, 20),
    # TargetLoadPacking's curve, target 60: (100-60)*30/60+60 = 80; at 60 -> 100; 80 -> 30
    (
        "below the target: closer to it scores higher",
        {"targetUtilization": 60},
        [gpu(0, 60)],
        1,
        80,
    ),
    (
        "at the target the score is highest",
        {"targetUtilization": 60, "memoryWeight": 0},
        [gpu(0, 60)],
        1,
        100,
    ),
    (
        "above the target it falls off",
        {"targetUtilization": 60, "memoryWeight": 0},
        [gpu(0, 80)],
        1,
        30,
    ),
]


@pytest.mark.parametrize(
    ("args", "gpus", "wanted", "expected"),
    [case[1:] for case in LOAD_CASES],
    ids=[case[0] for case in LOAD_CASES],
)
def test_gpu_load_aware_scores(
    args: dict[str, object], gpus: list[GpuLoad], wanted: int, expected: int
) -> None:
    plugin = GpuLoadAware(GpuLoadAwareArgs.model_validate(args))
    assert plugin.score_of(plugin.node_load(gpus, wanted)) == expected


def test_a_pod_without_gpus_is_skipped() -> None:
    snapshot = snapshot_of([make_node("n").gpus(8)])
    status = GpuLoadAware().pre_score(CycleState(), make_pod().view(), snapshot, snapshot.nodes)
    assert status is SKIP


def test_a_target_of_100_is_refused() -> None:
    with pytest.raises(ValueError, match="targetUtilization"):
        GpuLoadAwareArgs.model_validate({"targetUtilization": 100})


def published(name: str, nvml: FakeNvml) -> dict[str, object]:
    reader = NvmlReader(nvml, host_numa(DGX_H100))
    reader.open()
    reading = reader.read()
    detail = detail_json(reading.topology, [h.reasons for h in reading.health], "fake", "1")
    obj = nrt_object(name, reading.topology, detail, heartbeat="2026-01-01T00:00:00Z")
    obj["metadata"]["annotations"][GPU_LOAD_ANNOTATION] = load_json(reading.load)  # type: ignore[index]
    return obj


def test_load_read_through_nvml_reaches_the_score_through_the_topology_object() -> None:
    busy, idle = FakeNvml(DGX_H100), FakeNvml(DGX_H100)
    for i in range(8):
        busy.set_load(i, 90, 60 * 1024)
    idle.set_load(0, 5, 1024)
    cache = SchedulerCache(FakeClock())
    for name in ("busy", "idle"):
        cache.add_node(make_node(name).gpus(8).view())
    events = TopologyEvents(cache, SchedulingQueue(lambda a, b: False, FakeClock()))
    events.on_add(parse_nrt(published("busy", busy)))
    events.on_add(parse_nrt(published("idle", idle)))
    snapshot = cache.snapshot
    assert snapshot.gpu_load["busy"][3] == GpuLoad(3, 90, 60 * 1024, DGX_H100.gpu_memory_mib)
    plugin, state, pod = GpuLoadAware(), CycleState(), make_pod().gpus(1).view()
    assert plugin.pre_score(state, pod, snapshot, snapshot.nodes) is OK
    scores = {info.name: plugin.score(state, pod, info) for info in snapshot.nodes}
    assert scores["idle"] == 100  # GPUs 1..7 are idle
    assert scores["busy"] < 30
    events.on_delete(parse_nrt(published("busy", busy)))
    assert "busy" not in cache.snapshot.gpu_load


def test_an_unreadable_load_document_counts_as_no_load() -> None:
    obj = published("n", FakeNvml(DGX_H100))
    obj["metadata"]["annotations"][GPU_LOAD_ANNOTATION] = '{"version": 1, "gpus": [{"index": -1}]}'  # type: ignore[index]
    measured = parse_nrt(obj)
    assert measured.load is None and measured.topology is not None

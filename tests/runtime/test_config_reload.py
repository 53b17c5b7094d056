"""Live reload of the KubeSchedulerConfiguration: a valid change is swapped in, a bad file keeps
the config in force and is reported (Event on the Lease, log line, metric) once; a ConfigMap
volume's symlink swap is followed. Driven by check_once: no sleeps."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from batchsched.config import SchedulerConfig, load_config
from batchsched.framework.profile import Profile
from batchsched.kube.binder import ObjectRef
from batchsched.metrics import SchedulerMetrics
from batchsched.model.pod import PodView
from batchsched.plugins.default_binder import DefaultBinder
from batchsched.plugins.gang_sort import GangSort
from batchsched.runtime.app_config import carry_wiring
from batchsched.runtime.config_reload import INVALID, RELOADED, ConfigReloader
from batchsched.runtime.quota_reload import lease_ref

LEASE = lease_ref("kube-system", "gpu-scheduler")


def document(weight: int, name: str = "gpu-scheduler", sort: str = "GangSort") -> str:
    return f"""apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: {name}
  plugins:
    queueSort:
      enabled: [{{name: {sort}}}]
    score:
      enabled: [{{name: ImageLocality, weight: {weight}}}]
"""


BAD = document(3).replace("weight: 3", "weight: heavy")


@dataclass
class FakeRecorder:
    events: list[tuple[ObjectRef, str, str, str]] = field(default_factory=list)

    async def record(
        self, regarding: PodView | ObjectRef, type_: str, reason: str, action: str, note: str
    ) -> None:
        assert isinstance(regarding, ObjectRef)
        self.events.append((regarding, type_, reason, note))

    def reasons(self) -> list[str]:
        return [reason for _, _, reason, _ in self.events]


@dataclass
class Harness:
    path: Path
    reloader: ConfigReloader
    recorder: FakeRecorder
    metrics: SchedulerMetrics
    applied: list[tuple[SchedulerConfig, Mapping[str, Profile]]]

    def reloads(self, result: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "batchsched_config_reload_total", {"result": result}
        )
        return value or 0.0

    def weight(self) -> int:
        plugins = self.reloader.current.profile("gpu-scheduler").plugins["score"]
        return next(p.weight for p in plugins if p.name == "ImageLocality")


def harness(path: Path) -> Harness:
    recorder, metrics = FakeRecorder(), SchedulerMetrics()
    applied: list[tuple[SchedulerConfig, Mapping[str, Profile]]] = []
    reloader = ConfigReloader(
        path,
        load_config(path),
        apply=lambda config, profiles: applied.append((config, profiles)),
        recorder=recorder,
        regarding=LEASE,
        metrics=metrics,
    )
    return Harness(path, reloader, recorder, metrics, applied)


async def test_a_changed_weight_is_swapped_in_and_reported_once(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(document(1))
    h = harness(path)
    assert await h.reloader.check_once() is False  # unchanged since start-up
    path.write_text(document(7))
    assert await h.reloader.check_once() is True
    assert await h.reloader.check_once() is False
    assert h.weight() == 7
    ((_config, profiles),) = h.applied
    scorer = next(s for s in profiles["gpu-scheduler"].score if s.plugin.name == "ImageLocality")
    assert scorer.weight == 7
    assert h.recorder.reasons() == [RELOADED]
    assert h.recorder.events[0][0] == LEASE
    assert "ImageLocality:7" in h.recorder.events[0][3]
    assert h.reloads("success") == 1


async def test_a_bad_file_keeps_the_config_in_force_and_is_reported_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(document(2))
    h = harness(path)
    path.write_text(BAD)
    with caplog.at_level(logging.ERROR):
        assert await h.reloader.check_once() is False
        assert await h.reloader.check_once() is False
    assert h.weight() == 2 and h.applied == []
    assert h.recorder.reasons() == [INVALID]
    note = h.recorder.events[0][3]
    assert note.startswith(f"kept the scheduler config in force: {path}: profiles[0].plugins")
    assert "weight" in note
    assert h.reloads("error") == 1
    assert [r.message for r in caplog.records if "rejected" in r.message]
    path.write_text(document(4))  # fixed: put in force
    assert await h.reloader.check_once() is True
    assert h.weight() == 4
    assert h.recorder.reasons() == [INVALID, RELOADED]


async def test_a_missing_file_is_reported_and_the_config_stays(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(document(2))
    h = harness(path)
    path.unlink()
    assert await h.reloader.check_once() is False
    assert await h.reloader.check_once() is False
    assert h.recorder.reasons() == [INVALID]
    assert "cannot read the file" in h.recorder.events[0][3]
    assert h.weight() == 2


@pytest.mark.parametrize(
    ("changed", "reason"),
    [
        (document(2, name="other-scheduler"), "the scheduler names changed"),
        (document(2, sort="PrioritySort"), "the queueSort plugin or its args changed"),
    ],
    ids=["a renamed profile", "another queueSort plugin"],
)
async def test_a_change_the_running_queue_cannot_take_needs_a_restart(
    tmp_path: Path, changed: str, reason: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(document(2))
    h = harness(path)
    path.write_text(changed)
    assert await h.reloader.check_once() is False
    assert h.applied == []
    assert f"needs a restart: {reason}" in h.recorder.events[0][3]


async def test_a_configmap_symlink_swap_is_followed(tmp_path: Path) -> None:
    # The kubelet's layout: config.yaml -> ..data/config.yaml, ..data -> ..<timestamp>.
    for stamp, weight in (("..2026_01", 1), ("..2026_02", 9)):
        (tmp_path / stamp).mkdir()
        (tmp_path / stamp / "config.yaml").write_text(document(weight))
    (tmp_path / "..data").symlink_to("..2026_01")
    path = tmp_path / "config.yaml"
    path.symlink_to("..data/config.yaml")
    h = harness(path)
    (tmp_path / "..data_tmp").symlink_to("..2026_02")
    os.replace(tmp_path / "..data_tmp", tmp_path / "..data")
    assert await h.reloader.check_once() is True
    assert h.weight() == 9


def test_reloaded_plugins_take_over_the_live_collaborators_of_the_ones_they_replace(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(document(1))
    old = load_config(path).build_profiles()
    client, ages = object(), object()
    binder = old["gpu-scheduler"].bind[0]
    assert isinstance(binder, DefaultBinder)
    binder.client = client  # type: ignore[assignment]
    assert isinstance(old["gpu-scheduler"].queue_sort, GangSort)
    old["gpu-scheduler"].queue_sort.groups = ages  # type: ignore[assignment]
    path.write_text(document(5))
    new = load_config(path).build_profiles()
    carry_wiring(old, new)
    assert new["gpu-scheduler"].bind[0].client is client  # type: ignore[attr-defined]
    assert new["gpu-scheduler"].queue_sort.groups is ages  # type: ignore[attr-defined]

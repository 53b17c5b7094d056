"""Hot reload of the quota file: good -> bad -> good keeps the last good policy, reports each
change once, and follows a ConfigMap volume's symlink swap. Driven by check_once: no sleeps."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from batchsched.clock import FakeClock
from batchsched.kube.binder import ObjectRef
from batchsched.metrics import SchedulerMetrics
from batchsched.model.pod import PodView
from batchsched.runtime.quota_reload import (
    ACTION,
    INVALID,
    RELOADED,
    QuotaReloader,
    Resolve,
    configmap_ref,
    parse_object_ref,
)
from queues.config import QuotaConfigError
from queues.model import QuotaPolicy

HEADER = "apiVersion: batchsched.io/v1alpha1\nkind: QuotaConfig\n"
GOOD_A = HEADER + "tenants: [{name: a, max: {nvidia.com/gpu: 8}}]\n"
GOOD_B = HEADER + "tenants: [{name: a, max: {nvidia.com/gpu: 16}}, {name: b}]\n"
BAD = HEADER + "tenants: [{name: a, max: {nvidia.com/gpu: lots}}]\n"
CONFIGMAP = configmap_ref("batchsched-system", "batchsched-tenant-quotas")


@dataclass
class FakeRecorder:
    events: list[tuple[ObjectRef, str, str, str, str]] = field(default_factory=list)

    async def record(
        self, regarding: PodView | ObjectRef, type_: str, reason: str, action: str, note: str
    ) -> None:
        assert isinstance(regarding, ObjectRef)
        self.events.append((regarding, type_, reason, action, note))

    def reasons(self) -> list[str]:
        return [reason for _, _, reason, _, _ in self.events]


@dataclass
class Harness:
    path: Path
    reloader: QuotaReloader
    recorder: FakeRecorder
    metrics: SchedulerMetrics
    clock: FakeClock
    changes: list[QuotaPolicy]

    def reloads(self, result: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "batchsched_quota_config_reloads_total", {"result": result}
        )
        return value or 0.0

    def last_success(self) -> float | None:
        return self.metrics.registry.get_sample_value(
            "batchsched_quota_config_last_reload_success_timestamp_seconds"
        )


def make_harness(
    path: Path,
    on_change: Callable[[QuotaPolicy], None] | None = None,
    resolve: Resolve | None = None,
) -> Harness:
    recorder, metrics, clock = FakeRecorder(), SchedulerMetrics(), FakeClock()
    changes: list[QuotaPolicy] = []
    reloader = QuotaReloader(
        path,
        on_change=on_change or changes.append,
        recorder=recorder,
        regarding=CONFIGMAP,
        metrics=metrics,
        clock=clock,
        resolve=resolve,
    )
    return Harness(path, reloader, recorder, metrics, clock, changes)


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    path = tmp_path / "quotas.yaml"
    path.write_text(GOOD_A)
    h = make_harness(path)
    h.reloader.load_initial()
    return h


def gpu_max(policy: QuotaPolicy | None) -> int:
    assert policy is not None
    return policy.tenants["a"].max["nvidia.com/gpu"]


async def test_an_unchanged_file_changes_nothing(harness: Harness) -> None:
    assert await harness.reloader.check_once() is False
    assert harness.changes == [] and harness.recorder.events == []
    assert harness.reloads("success") == 0 and harness.reloads("error") == 0


async def test_good_then_bad_then_good(harness: Harness) -> None:
    h = harness
    assert gpu_max(h.reloader.policy) == 8_000
    assert h.last_success() == h.clock.wall()

    h.path.write_text(GOOD_B)
    h.clock.advance(5)
    assert await h.reloader.check_once() is True
    assert [sorted(p.tenants) for p in h.changes] == [["a", "b"]]
    assert h.recorder.events[-1][:4] == (CONFIGMAP, "Normal", RELOADED, ACTION)
    assert h.reloads("success") == 1 and h.last_success() == h.clock.wall()
    good_at = h.clock.wall()

    h.path.write_text(BAD)
    h.clock.advance(5)
    assert await h.reloader.check_once() is False
    assert len(h.changes) == 1, "a bad file reaches no subscriber"
    assert gpu_max(h.reloader.policy) == 16_000, "the last good policy stays in force"
    regarding, type_, reason, _, note = h.recorder.events[-1]
    assert (regarding, type_, reason) == (CONFIGMAP, "Warning", INVALID)
    assert f"{h.path}: tenants[0].max.nvidia.com/gpu: not a quantity" in note
    assert h.reloads("error") == 1 and h.last_success() == good_at

    h.path.write_text(GOOD_A)
    assert await h.reloader.check_once() is True
    assert gpu_max(h.changes[-1]) == 8_000
    assert h.recorder.reasons() == [RELOADED, INVALID, RELOADED]
    assert h.reloads("success") == 2


async def test_the_same_bad_file_is_reported_once(harness: Harness) -> None:
    harness.path.write_text(BAD)
    for _ in range(3):
        await harness.reloader.check_once()
    assert harness.recorder.reasons() == [INVALID]
    assert harness.reloads("error") == 1


async def test_a_file_that_disappears_keeps_the_last_good_policy(harness: Harness) -> None:
    harness.path.unlink()
    assert await harness.reloader.check_once() is False
    assert await harness.reloader.check_once() is False
    assert harness.recorder.reasons() == [INVALID]
    assert "cannot read the file" in harness.recorder.events[0][4]
    assert gpu_max(harness.reloader.policy) == 8_000
    harness.path.write_text(GOOD_A)
    assert await harness.reloader.check_once() is True, "the same content, back after an error"


def mount_configmap(directory: Path, content: str, version: str) -> None:
    """What the kubelet's atomic writer does: a new timestamped directory, then `..data`
    swapped to it in one rename; the file itself is a symlink through `..data`."""
    (directory / version).mkdir()
    (directory / version / "quotas.yaml").write_text(content)
    (directory / "..data_tmp").symlink_to(version)
    os.replace(directory / "..data_tmp", directory / "..data")
    if not (directory / "quotas.yaml").is_symlink():
        (directory / "quotas.yaml").symlink_to("..data/quotas.yaml")


async def test_a_configmap_symlink_swap_is_seen(tmp_path: Path) -> None:
    mount_configmap(tmp_path, GOOD_A, "..2025_01_01_00_00_00.1")
    h = make_harness(tmp_path / "quotas.yaml")
    h.reloader.load_initial()
    mount_configmap(tmp_path, GOOD_B, "..2025_01_01_00_01_00.2")
    assert await h.reloader.check_once() is True
    assert gpu_max(h.reloader.policy) == 16_000
    mount_configmap(tmp_path, GOOD_B, "..2025_01_01_00_02_00.3")
    assert await h.reloader.check_once() is False, "a new directory with the same content"
    assert h.recorder.reasons() == [RELOADED]


@pytest.mark.parametrize(
    "content", [None, BAD], ids=["a missing file stops start-up", "a bad file stops start-up"]
)
def test_start_up_needs_a_good_file(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "quotas.yaml"
    if content is not None:
        path.write_text(content)
    h = make_harness(path)
    with pytest.raises(QuotaConfigError, match=str(path)):
        h.reloader.load_initial()
    assert h.reloader.policy is None


async def test_a_failing_subscriber_does_not_stop_the_reload(harness: Harness) -> None:
    def broken(policy: QuotaPolicy) -> None:
        raise RuntimeError("subscriber bug")

    h = make_harness(harness.path, on_change=broken)
    h.reloader.load_initial()
    h.path.write_text(GOOD_B)
    assert await h.reloader.check_once() is True
    assert h.recorder.reasons() == [RELOADED]
    assert gpu_max(h.reloader.policy) == 16_000


async def test_the_event_object_gets_its_uid_once(harness: Harness) -> None:
    looked_up: list[ObjectRef] = []

    async def resolve(ref: ObjectRef) -> ObjectRef:
        looked_up.append(ref)
        return replace(ref, uid="cm-uid")

    h = make_harness(harness.path, resolve=resolve)
    h.reloader.load_initial()
    for content in (GOOD_B, BAD):
        h.path.write_text(content)
        await h.reloader.check_once()
    assert looked_up == [CONFIGMAP]
    assert [ref.uid for ref, *_ in h.recorder.events] == ["cm-uid", "cm-uid"]


async def test_run_polls_on_its_interval(harness: Harness) -> None:
    slept: list[float] = []

    class Stop(Exception):
        pass

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 2:
            harness.path.write_text(GOOD_B)
        if len(slept) == 3:
            raise Stop

    reloader = harness.reloader
    reloader.interval = 7.0
    with pytest.raises(Stop):
        await reloader.run(sleep)
    assert slept == [7.0, 7.0, 7.0]
    assert len(harness.changes) == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ns/name", ("ns", "name")),
        ("name", None),
        ("/name", None),
        ("ns/", None),
        ("a/b/c", None),
    ],
    ids=[
        "namespace and name",
        "a name alone is refused",
        "an empty namespace is refused",
        "an empty name is refused",
        "a path is refused",
    ],
)
def test_parse_object_ref(text: str, expected: tuple[str, str] | None) -> None:
    if expected is None:
        with pytest.raises(ValueError, match="expected NAMESPACE/NAME"):
            parse_object_ref(text)
    else:
        assert parse_object_ref(text) == expected

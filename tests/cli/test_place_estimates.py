"""`batchsched place` says when the pods it cannot place could start, from running pods'
expected runtimes (the backfill planner on the what-if's snapshot)."""

from __future__ import annotations

import pytest

from batchsched.config import default_config
from batchsched.model.pod import PodView
from batchsched.whatif import place_pending
from tests.builders import make_node, make_pod

NOW = 1_800_000_000.0
RUNTIME = "batchsched.io/expected-runtime"


def running(name: str, node: str, gpus: int, runtime: str | None, started: float) -> PodView:
    builder = make_pod(name).gpus(gpus).node(node).set("status.startTime", _rfc3339(started))
    if runtime is not None:
        builder = builder.annotation(RUNTIME, runtime)
    return builder.view()


def _rfc3339(wall: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def place(pods: list[PodView]) -> dict[str, float | None]:
    nodes = [make_node(f"node-{i}").gpus(8).cpu("64").view() for i in range(2)]
    profiles = default_config().build_profiles()
    return place_pending(nodes, pods, profiles, now=NOW).estimates


@pytest.mark.parametrize(
    ("case", "pods", "expected"),
    [
        (
            "a pod waits for the running pod whose expected end comes first",
            [
                running("a", "node-0", 8, "2h", NOW - 3600),
                running("b", "node-1", 8, "90m", NOW - 600),
                make_pod("next").gpus(8).view(),
            ],
            {"default/next": 3600.0},
        ),
        (
            "pods of unknown runtime never free their GPUs",
            [
                running("a", "node-0", 8, None, NOW),
                running("b", "node-1", 8, "30m", NOW),
                make_pod("next").gpus(8).view(),
            ],
            {"default/next": 1800.0},
        ),
        (
            "a second waiting pod starts after the first one's reservation ends",
            [
                running("a", "node-0", 8, None, NOW),
                running("b", "node-1", 8, "10m", NOW),
                make_pod("first").gpus(8).annotation(RUNTIME, "1h").view(),
                make_pod("second").gpus(8).annotation(RUNTIME, "1h").view(),
            ],
            {"default/first": 600.0, "default/second": 4200.0},
        ),
        (
            "a pod that fits on no node at all never starts",
            [running("a", "node-0", 8, "10m", NOW), make_pod("huge").gpus(16).view()],
            {"default/huge": None},
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_estimated_start(case: str, pods: list[PodView], expected: dict[str, float | None]) -> None:
    assert place(pods) == pytest.approx(expected)


def test_no_estimates_when_no_running_pod_has_a_known_runtime() -> None:
    pods = [running("a", "node-0", 8, None, NOW), make_pod("next").gpus(16).view()]
    assert place(pods) == {}

"""Which waiting pods a ResourceClaim's watch event sends back to the active queue."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pytest

from batchsched.cache import SchedulerCache
from batchsched.clock import FakeClock
from batchsched.dra.objects import Consumer, ResourceClaim
from batchsched.dra.parse import parse_resource_claim
from batchsched.model.pod import PodView
from batchsched.runtime.dra_events import ResourceClaimEvents
from tests.builders import make_pod
from tests.dra.builders import claim, claiming, exact

OWNER = (
    make_pod("owner")
    .set("metadata.uid", "u-owner")
    .set("spec.resourceClaims", [{"name": "gpu", "resourceClaimTemplateName": "t"}])
    .view()
)
SHARER = claiming(make_pod("sharer"), "shared").view()
OTHER = claiming(make_pod("other"), "elsewhere").view()
PLAIN = make_pod("plain").view()
WAITING = (OWNER, SHARER, OTHER, PLAIN)


@dataclass
class Moves:
    moved: list[str] = field(default_factory=list)

    def move_where(self, event: str, helps: Callable[[PodView], bool]) -> int:
        self.moved = [p.name for p in WAITING if helps(p)]
        return len(self.moved)


def made(name: str, owner: str = "", allocated: bool = False) -> ResourceClaim:
    body = claim(name, exact("gpu"))
    if owner:
        body["metadata"]["ownerReferences"] = [{"uid": owner, "controller": True}]
    if allocated:
        result = {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}
        body["status"] = {"allocation": {"devices": {"results": [result]}}}
    return parse_resource_claim(body)


def events() -> tuple[ResourceClaimEvents, Moves]:
    moves = Moves()
    return ResourceClaimEvents(SchedulerCache(FakeClock()), moves), moves  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("new", "moved"),
    [
        (made("owner-gpu-x", owner="u-owner"), ["owner"]),
        (made("shared"), ["sharer"]),
        (made("nobodys"), []),
    ],
    ids=[
        "a claim made from a template wakes the pod it was made for",
        "a claim a pod names wakes that pod",
        "a claim no waiting pod uses wakes nobody",
    ],
)
def test_a_new_claim_wakes_only_its_pods(new: ResourceClaim, moved: list[str]) -> None:
    handler, moves = events()
    handler.on_add(new)
    assert moves.moved == moved


def test_devices_coming_free_wake_every_pod_with_claims() -> None:
    handler, moves = events()
    held = made("done", allocated=True)
    handler.on_add(held)
    handler.on_update(held, replace(held, allocation=None))
    assert moves.moved == ["owner", "sharer", "other"]
    handler.on_add(held)
    moves.moved = []
    handler.on_delete(held)
    assert moves.moved == ["owner", "sharer", "other"]


def test_a_reservation_change_of_a_claim_that_is_not_full_wakes_nobody() -> None:
    handler, moves = events()
    held = replace(made("shared", allocated=True), reserved_for=(Consumer("pods", "a", "ua"),))
    handler.on_add(held)
    moves.moved = []
    handler.on_update(held, replace(held, reserved_for=()))
    assert moves.moved == []
    full = replace(held, reserved_for=tuple(Consumer("pods", f"p{i}", f"u{i}") for i in range(256)))
    handler.on_update(held, full)
    handler.on_update(full, replace(full, reserved_for=full.reserved_for[1:]))
    assert moves.moved == ["sharer"]

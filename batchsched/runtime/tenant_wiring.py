"""The tenant queues of a running scheduler, and the estimated start times it publishes.

`tenant_queues` builds the tenant layer (usage fed by the cache, quota admission, fair-share
pick in the queue) and the backfill reservations the scheduler is then built with, and the
function to call when the quota file changes. `EstimatePublisher` writes each reserved
gang's planned start to its PodGroup (a single pod: to the pod) as the annotation
`batchsched.io/estimated-start-time` (RFC 3339, UTC), when it is new or moved by more than a
minute, and removes it when the gang no longer holds a reservation.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from batchsched.cache import SchedulerCache
from batchsched.clock import Clock
from batchsched.expected_runtime import ESTIMATED_START_ANNOTATION
from batchsched.framework.profile import Profile
from batchsched.kube.podgroups import gang_object_path
from batchsched.metrics import SchedulerMetrics
from batchsched.runtime.queue import SchedulingQueue
from batchsched.runtime.reservations import LiveBackfill
from batchsched.runtime.scheduler import Scheduler
from batchsched.tenants import TenantLayer
from queues.model import QuotaPolicy

logger = logging.getLogger(__name__)

MOVE_THRESHOLD_S: Final = 60.0

# (path, merge patch) -> awaitable; the app passes a function doing a JSON merge patch.
Patch = Callable[[str, Mapping[str, object]], Awaitable[object]]


def estimates_of(scheduler: Scheduler) -> Callable[[], Mapping[str, float]]:
    """The scheduler's reserved gangs and their planned starts (monotonic), freshly planned."""

    def current() -> Mapping[str, float]:
        backfill = scheduler.backfill
        if backfill is None:
            return {}
        waits = scheduler.waits
        return backfill.estimates(scheduler.cache.snapshot, waits.ends_at, waits.eligible)

    return current


@dataclass(frozen=True)
class TenantQueues:
    """The tenant layer (usage fed by the cache, quota admission, fair share) and the backfill
    reservations, built before the scheduler that takes them; `changed` is what to call
    when the quota file changes."""

    layer: TenantLayer
    backfill: LiveBackfill
    changed: Callable[[QuotaPolicy], None]


def tenant_queues(
    profiles: Mapping[str, Profile],
    cache: SchedulerCache,
    queue: SchedulingQueue,
    clock: Clock,
    metrics: SchedulerMetrics,
    policy: QuotaPolicy,
) -> TenantQueues:
    layer = TenantLayer(policy, clock, lambda p: p.scheduler_name in profiles, metrics)
    layer.attach(cache.snapshot)
    cache.watchers.append(layer)
    backfill = LiveBackfill(clock, policy.reservations, policy.starvation_s)

    def order(current: QuotaPolicy) -> None:
        several = len(current.tenants) > 1
        queue.set_tenants(layer.tenant_of, layer.rank if several else None)

    def changed(new: QuotaPolicy) -> None:
        layer.set_policy(new)
        backfill.set_limits(new.reservations, new.starvation_s)
        order(new)
        queue.move_all("QuotaChange")

    order(policy)
    return TenantQueues(layer, backfill, changed)


class EstimatePublisher:
    def __init__(
        self, estimates: Callable[[], Mapping[str, float]], clock: Clock, patch: Patch
    ) -> None:
        self.estimates = estimates  # planned start (monotonic) of each reserved gang
        self.clock = clock
        self.patch = patch
        self._published: dict[str, float] = {}  # key -> wall time written

    async def publish(self) -> int:
        """Write what changed; the number of gangs holding a reservation."""
        now_mono, now_wall = self.clock.now(), self.clock.wall()
        current = {key: now_wall + (start - now_mono) for key, start in self.estimates().items()}
        for key, at in current.items():
            before = self._published.get(key)
            moved = before is None or abs(before - at) > MOVE_THRESHOLD_S
            if moved and await self._write(key, _rfc3339(at)):
                self._published[key] = at
        for key in [k for k in self._published if k not in current]:
            if await self._write(key, None):
                del self._published[key]
        return len(current)

    async def _write(self, key: str, value: str | None) -> bool:
        path = _path_of(key)
        if path is None:
            return True  # a Kueue group: no object to annotate
        try:
            await self.patch(
                path, {"metadata": {"annotations": {ESTIMATED_START_ANNOTATION: value}}}
            )
        except Exception as err:  # a gone object or a failing API server: try again later
            logger.debug("estimated start not written object=%s error=%s", key, err)
            return False
        return True


def _path_of(key: str) -> str | None:
    if key.startswith("pod:"):
        namespace, name = key[4:].split("/", 1)
        return f"/api/v1/namespaces/{namespace}/pods/{name}"
    return gang_object_path(key)


def _rfc3339(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

"""The leader writes each pending gang's place in line on its PodGroup, so that
`kubectl describe podgroup` says where it stands and why.

Where it goes, per API (the schemas decide):
- every PodGroup (scheduler-plugins, upstream scheduling.k8s.io, Volcano): the annotations
  `batchsched.io/queue-status` (the line: reason, place, estimated start, the scheduler's
  last message) and `batchsched.io/queue-position` (the place, 1 = next). Metadata is the one
  place every schema keeps: scheduler-plugins' status schema (ours in deploy/crds and the
  upstream one Kubeflow installs) has no conditions, so the API server would prune them, and
  Volcano's single condition is the gang status writer's (gang/status.py).
- upstream scheduling.k8s.io PodGroups, as well: the condition `batchsched.io/Queued` beside
  kube-scheduler's PodGroupScheduled (a strategic merge keyed by type leaves that one alone).

Written only when it changed enough (`queue_status.differs`), at most once per
`min_interval` per group, at most `max_writes` per pass, the groups nearest the head first;
a gang that leaves the queue has the annotations removed (and the condition set False). A
gang is first written once two passes in a row found it pending (it has waited at least
`pass_interval`), and a gang not tried yet (Queued) only when its turn is more than
`QUEUED_HORIZON_S` away at the rate gangs left the line since the last pass: most gangs are
placed within seconds, and writing their line only to remove it a moment later cost two
PATCHes per gang and told nobody anything.
The three come from the scheduler config's `queueStatus` (docs/configuration.md).
The statuses are computed once per pass, every `pass_interval` seconds, never per event,
in steps: after `slice_s` of work the pass hands the event loop back (binding, watches, the
scheduling loop run) and goes on at its next turn, so ten thousand pending gangs never stall
the loop for the second their order takes. A pass that took long pushes the next one back,
so the passes use at most `MAX_DUTY` of the time. Each PATCH is counted in
`batchsched_queue_status_writes_total{outcome}`.
Only the leader calls `publish` (runtime/app_housekeeping.py); the client's write fence
refuses a standby's writes besides.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Awaitable, Callable, Container, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from kubernetes_asyncio.client import ApiClient

from batchsched.clock import Clock
from batchsched.config.documents import QueueStatusSettings
from batchsched.expected_runtime import ESTIMATED_START_ANNOTATION
from batchsched.framework.interfaces import QueuedPod
from batchsched.gang.podgroup import PodGroupView, pod_group_of
from batchsched.kube.client import MERGE_PATCH as MERGE
from batchsched.kube.client import STRATEGIC_MERGE_PATCH as STRATEGIC
from batchsched.kube.client import ApiError, request_json
from batchsched.kube.podgroups import gang_object_path, pod_group_path
from batchsched.metrics import SchedulerMetrics
from batchsched.model.gang_ref import GangApi
from batchsched.model.pod import PodView
from batchsched.runtime.queue_status import (
    QUEUED,
    STEP_ITEMS,
    QueueStatus,
    Steps,
    differs,
    message,
    queue_order_steps,
    queue_status_steps,
    run_steps,
)
from batchsched.runtime.scheduler import Scheduler

logger = logging.getLogger(__name__)

QUEUE_STATUS_ANNOTATION: Final = "batchsched.io/queue-status"
QUEUE_POSITION_ANNOTATION: Final = "batchsched.io/queue-position"
QUEUED_CONDITION: Final = "batchsched.io/Queued"
# The scheduler config's queueStatus defaults (config/documents.py).
PASS_INTERVAL_S: Final = QueueStatusSettings().pass_interval
MIN_INTERVAL_S: Final = QueueStatusSettings().min_interval_per_group
MAX_WRITES_PER_PASS: Final = QueueStatusSettings().max_groups_per_pass
MAX_DUTY: Final = 0.02
SLICE_S: Final = 0.01  # work between two turns given back to the event loop in a pass
QUEUED_HORIZON_S: Final = 60.0  # a Queued gang whose turn is nearer gets no line
# batchsched_queue_status_writes_total's outcomes
WRITTEN: Final = "written"
GONE: Final = "gone"  # 404 or 409: the PodGroup is gone, or a successor has its name
FAILED: Final = "failed"  # any other answer, or none (the next pass tries again)

# (path, body, content type) -> awaitable: a PATCH (tests may count or fail them).
Patch = Callable[[str, Mapping[str, object], str], Awaitable[object]]


@dataclass(frozen=True, slots=True)
class Write:
    key: str
    status: QueueStatus | None  # None: it left the queue, remove what was written


def live_statuses(scheduler: Scheduler) -> dict[str, QueueStatus]:
    """Every pending gang's status, from the scheduler's queue, tenant layer, rejections and
    the estimated starts its leader published."""
    return run_steps(live_status_steps(scheduler))


def live_status_steps(scheduler: Scheduler) -> Steps[dict[str, QueueStatus]]:
    """`live_statuses` in steps (queue_status.py): the queue's pods are copied at once, then
    sifted, ordered and given their statuses in pieces."""
    snapshot = scheduler.cache.snapshot
    pending = []
    for i, pod in enumerate(scheduler.queue.waiting()):
        if i % (4 * STEP_ITEMS) == 4 * STEP_ITEMS - 1:
            yield
        if snapshot.node_of(pod.uid) is None:
            pending.append(pod)
    if not any(pod_group_of(p) is not None for p in pending):
        # No gang waits (a backlog of lone pods): there is nothing to write on any PodGroup,
        # and ordering thousands of pods for nothing cost 0.24 s per pass at 5000.
        return {}
    yield
    tenants = scheduler.tenants
    # One tenant (the default quota file's): one line, and no tenant named in the status.
    several = tenants if tenants is not None and len(tenants.policy.tenants) > 1 else None
    order = yield from queue_order_steps(
        (QueuedPod(p, p.creation_time, 0) for p in pending),
        next(iter(scheduler.profiles.values())).queue_sort.less,
        _gang_of,
        several.tenant_of if several is not None else lambda pod: "",
        several.rank if several is not None else None,
    )
    groups = scheduler.gangs.groups
    estimates = {key: at for key, g in groups.items() if (at := _estimate(g)) is not None}
    return (
        yield from queue_status_steps(
            order,
            lambda key: key in groups and gang_object_path(key) is not None,
            scheduler.gangs.rejections,
            estimates,
        )
    )


def plan_writes(
    statuses: Mapping[str, QueueStatus],
    written: Mapping[str, QueueStatus],
    shown: Mapping[str, str],
    since_write: Callable[[str], float],
    limits: tuple[float, int],
    now: float,
    fresh: Container[str] = (),
    near: int = 0,
) -> list[Write]:
    """What to write this pass. Purely computational. `written`: what this leader wrote;
    `shown`: the status line each group carries now (from the informer: after a failover,
    what the last leader wrote); `since_write`: seconds since this leader wrote the group;
    `limits`: (min_interval, max_writes); `now`: wall seconds. No first line for a gang in
    `fresh` (the last pass did not find it pending: most are placed before the next one), nor
    for a Queued one at a place up to `near` (the line reaches it within QUEUED_HORIZON_S)."""
    min_interval, max_writes = limits
    # (urgency, place, arrival order, key): Writes are made for the chosen few only, since a
    # backlog of thousands of unwritten gangs is a candidate on every pass.
    wanted: list[tuple[int, int, int, str]] = []
    for key, new in statuses.items():
        before = written.get(key)
        # What this leader wrote, bucketed; else what the object shows, exactly. A line a
        # former leader wrote stays until this one has tried the gang itself.
        if before is not None:
            needed = differs(before, new)
        else:
            line = shown.get(key)  # None: nothing to compare, no message to format
            if line is None:
                soon = new.reason == QUEUED and new.position <= near
                needed = not soon and key not in fresh
            else:
                needed = new.reason != QUEUED and line != message(new, now)
        if needed and since_write(key) >= min_interval:
            urgent = before is None or before.reason != new.reason
            wanted.append((0 if urgent else 1, new.position, len(wanted), key))
    for key in shown:
        if key not in statuses and since_write(key) >= min_interval:
            wanted.append((0, 0, len(wanted), key))
    # The first few by urgency and place, without sorting the whole backlog each pass.
    return [Write(key, statuses.get(key)) for *_, key in heapq.nsmallest(max_writes, wanted)]


class QueueStatusWriter:
    def __init__(
        self,
        api: ApiClient | Patch,
        clock: Clock,
        *,
        pass_interval: float = PASS_INTERVAL_S,
        min_interval: float = MIN_INTERVAL_S,
        max_writes: int = MAX_WRITES_PER_PASS,
        timer: Callable[[], float] = time.perf_counter,
        metrics: SchedulerMetrics | None = None,
        slice_s: float = SLICE_S,
    ) -> None:
        self.patch: Patch = _patcher(api) if isinstance(api, ApiClient) else api
        self.clock = clock
        self.pass_interval = pass_interval
        self.min_interval = min_interval
        self.max_writes = max_writes
        self.timer = timer  # what a pass costs the event loop, in seconds
        self.metrics = metrics
        self.slice_s = slice_s
        self.passes = 0  # passes that computed the statuses
        self.slices = 0  # turns the passes gave back to the event loop
        self.longest_slice = 0.0  # seconds: the longest the loop waited for a pass
        self.writes = 0  # PATCH requests sent
        self._written: dict[str, QueueStatus] = {}
        self._wrote_at: dict[str, float] = {}  # key -> monotonic time of the last write
        self._seen: frozenset[str] = frozenset()  # the gangs the last pass found pending
        self._last_pass = float("-inf")  # monotonic
        self._next_pass = float("-inf")

    def due(self) -> bool:
        return self.clock.now() >= self._next_pass

    def forget(self) -> None:
        """Not leading: what this replica wrote may be overwritten by the next leader."""
        self._written.clear()
        self._wrote_at.clear()
        self._seen = frozenset()

    async def publish(
        self,
        statuses: Callable[[], Mapping[str, QueueStatus] | Steps[dict[str, QueueStatus]]],
        groups: Mapping[str, PodGroupView],
    ) -> int:
        """Compute the statuses (at once, or in steps with the loop handed back between
        slices), write what changed; the number of groups written."""
        current, cost = await self._compute(statuses)
        now = self.clock.now()
        self._next_pass = now + max(self.pass_interval, cost / MAX_DUTY)
        self.passes += 1
        for key in [k for k in self._written if k not in groups]:
            del self._written[key]  # the PodGroup is gone: nothing to write on
            self._wrote_at.pop(key, None)
        shown = {
            key: line
            for key, group in groups.items()
            if (line := group.annotations.get(QUEUE_STATUS_ANNOTATION)) is not None
        }
        seen, self._seen = self._seen, frozenset(current)
        # The pace of the line: gangs that left it since the last pass, per second.
        left = sum(1 for key in seen if key not in current)
        pace = left / max(now - self._last_pass, self.pass_interval)
        self._last_pass = now
        plan = plan_writes(
            current,
            self._written,
            shown,
            lambda key: now - self._wrote_at.get(key, float("-inf")),
            (self.min_interval, self.max_writes),
            self.clock.wall(),
            self._seen - seen,
            int(pace * QUEUED_HORIZON_S),
        )
        writes = [self._write(groups[w.key], w) for w in plan if w.key in groups]
        done = await asyncio.gather(*writes)
        return sum(done)

    async def _compute(
        self, statuses: Callable[[], Mapping[str, QueueStatus] | Steps[dict[str, QueueStatus]]]
    ) -> tuple[Mapping[str, QueueStatus], float]:
        """The statuses, and the seconds of work they took (not counting the turns given
        back to the loop in between)."""
        started = self.timer()
        produced = statuses()
        cost = 0.0
        while not isinstance(produced, Mapping):
            try:
                next(produced)
            except StopIteration as done:
                produced = done.value
                break
            ran = self.timer() - started
            if ran >= self.slice_s:
                cost += ran
                self.longest_slice = max(self.longest_slice, ran)
                self.slices += 1
                await asyncio.sleep(0)  # the loop's other work runs now
                started = self.timer()
        ran = self.timer() - started
        self.longest_slice = max(self.longest_slice, ran)
        return produced, cost + ran

    async def _write(self, group: PodGroupView, write: Write) -> bool:
        wall = self.clock.wall()
        line = message(write.status, wall) if write.status is not None else None
        position = str(write.status.position) if write.status is not None else None
        annotations = {QUEUE_STATUS_ANNOTATION: line, QUEUE_POSITION_ANNOTATION: position}
        path = pod_group_path(group.namespace, group.name, group.api)
        try:
            # The uid makes it a precondition: a same-named successor is refused the write.
            body = {"metadata": {"uid": group.uid, "annotations": annotations}}
            await self._patch(path, body, MERGE)
            if group.api is GangApi.KUBERNETES:
                await self._patch(f"{path}/status", self._condition(group, write, wall), STRATEGIC)
        except Exception as err:  # a gone object or a failing API server: a later pass
            logger.debug("queue status not written group=%s error=%s", group.key, err)
            return False
        self._wrote_at[group.key] = self.clock.now()
        if write.status is None:
            self._written.pop(group.key, None)
        else:
            self._written[group.key] = write.status
        return True

    async def _patch(self, path: str, body: Mapping[str, object], content_type: str) -> None:
        """One PATCH, counted by outcome (the caller handles a failure)."""
        self.writes += 1
        outcome = FAILED
        try:
            await self.patch(path, body, content_type)
            outcome = WRITTEN
        except ApiError as err:
            outcome = GONE if err.status in (404, 409) else FAILED
            raise
        finally:
            if self.metrics is not None:
                self.metrics.queue_status_writes.labels(outcome=outcome).inc()

    def _condition(self, group: PodGroupView, write: Write, wall: float) -> dict[str, object]:
        status = write.status
        condition: dict[str, object] = {"type": QUEUED_CONDITION}
        if status is None:
            condition |= {"status": "False", "reason": "NotQueued"}
            condition["message"] = "no member waits in the scheduler's queue"
        else:
            condition |= {"status": "True", "reason": status.reason}
            condition["message"] = message(status, wall)
        if write.status is None or group.key not in self._written:
            # The status flips (or this leader cannot know it did not): a new transition
            # time; a message-only change keeps the one the server has.
            condition["lastTransitionTime"] = _rfc3339(wall)
        return {"status": {"conditions": [condition]}}


def queue_status_writer(
    api: ApiClient | Patch,
    clock: Clock,
    settings: QueueStatusSettings,
    metrics: SchedulerMetrics | None = None,
) -> QueueStatusWriter | None:
    """The writer the scheduler config's `queueStatus` asks for; None when it says to write
    nothing (`maxGroupsPerPass: 0`)."""
    if settings.max_groups_per_pass == 0:
        return None
    return QueueStatusWriter(
        api,
        clock,
        pass_interval=settings.pass_interval,
        min_interval=settings.min_interval_per_group,
        max_writes=settings.max_groups_per_pass,
        metrics=metrics,
    )


def _patcher(api: ApiClient) -> Patch:
    async def patch(path: str, body: Mapping[str, object], content_type: str) -> object:
        return await request_json(api, "PATCH", path, body=body, content_type=content_type)

    return patch


def _gang_of(pod: PodView) -> str:
    group = pod_group_of(pod)
    return group if group is not None else f"pod:{pod.key}"


def _estimate(group: PodGroupView) -> float | None:
    text = group.annotations.get(ESTIMATED_START_ANNOTATION)
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _rfc3339(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

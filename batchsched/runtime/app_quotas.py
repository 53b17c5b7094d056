"""The tenant quota side of `batchsched run`: the quota file in force, its subscribers and its
reload, the tenant layer and backfill wired into the scheduler, the estimated starts written
to PodGroups, and the warning when guarantees exceed what the nodes offer."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from kubernetes_asyncio.client import ApiClient

from batchsched.clock import Clock
from batchsched.config import SchedulerConfig
from batchsched.metrics import SchedulerMetrics
from batchsched.runtime.live import Recorder
from batchsched.runtime.quota_reload import (
    QuotaReloader,
    configmap_ref,
    lease_ref,
    parse_object_ref,
    uid_resolver,
)
from batchsched.runtime.scheduler import Scheduler
from batchsched.runtime.tenant_wiring import EstimatePublisher, estimates_of
from queues.model import QuotaPolicy, single_tenant_policy

logger = logging.getLogger(__name__)

Patch = Callable[[str, Mapping[str, object]], Awaitable[object]]


class QuotaFile:
    """The quota file in force (read before the scheduler is built: its tenant queues need
    it), its reload, and its subscribers."""

    def __init__(
        self,
        api: ApiClient,
        clock: Clock,
        config: SchedulerConfig,
        file: tuple[Path | None, str | None, float],  # --quota, --quota-configmap, poll (s)
        events: Recorder,
        metrics: SchedulerMetrics,
    ) -> None:
        self.events = events
        self.metrics = metrics
        self.on_change: list[Callable[[QuotaPolicy], None]] = []
        self.policy: QuotaPolicy = single_tenant_policy()
        self.reloader: QuotaReloader | None = None
        path, configmap, interval = file
        if path is not None:
            self.reloader = self._reloader(api, clock, config, path, configmap, interval)
            self.policy = self.reloader.load_initial()  # QuotaConfigError: nothing to keep

    def _reloader(
        self,
        api: ApiClient,
        clock: Clock,
        config: SchedulerConfig,
        path: Path,
        configmap: str | None,
        interval: float,
    ) -> QuotaReloader:
        lease = config.leader_election
        regarding = (
            configmap_ref(*parse_object_ref(configmap))
            if configmap
            else lease_ref(lease.resource_namespace, lease.resource_name)
        )
        return QuotaReloader(
            path,
            on_change=self.changed,
            recorder=self.events,
            regarding=regarding,
            metrics=self.metrics,
            clock=clock,
            interval=interval,
            resolve=uid_resolver(api),
        )

    def changed(self, policy: QuotaPolicy) -> None:
        self.policy = policy
        for subscriber in self.on_change:
            try:
                subscriber(policy)
            except Exception:  # one subscriber's bug must not keep the policy from the others
                logger.exception("quota subscriber failed subscriber=%r", subscriber)


class Quotas:
    """What the tenant queues do each housekeeping round: the estimated starts written to
    PodGroups, and the warning when guarantees exceed what the nodes offer."""

    def __init__(self, file: QuotaFile, scheduler: Scheduler, clock: Clock, patch: Patch) -> None:
        self.file = file
        self.scheduler = scheduler
        self.estimates = EstimatePublisher(estimates_of(scheduler), clock, patch)

    def warn_capacity(self) -> None:
        """Guarantees above what the nodes offer: a WARNING line and an Event, once each
        (call once the node informer has synced)."""
        tenants = self.scheduler.tenants
        if tenants is None:
            return
        reloader = self.file.reloader
        for warning in tenants.capacity_warnings():
            if reloader is not None:
                self.scheduler.live.record(
                    reloader.regarding, "Warning", "GuaranteeExceedsCapacity", "Checking", warning
                )

    async def publish_estimates(self) -> None:
        self.scheduler.metrics.backfill_reservations.set(await self.estimates.publish())

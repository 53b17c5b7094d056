"""`batchsched run`: wire informers, cache, queue, scheduler, binder, leader election and HTTP.

Every task lives in one TaskGroup. Informers run in every replica, so a standby keeps a warm
cache and schedules at once after a failover; the scheduling loop runs only while leading.
Losing the lease ends the process (exit 1), as kube-scheduler does: the Deployment restarts
it as a standby. SIGTERM stops scheduling, waits for bindings in flight and releases the lease.

Its collaborators: tenant quotas (runtime/app_quotas.py), objects the informers cannot parse
(runtime/app_invalid.py) and the round every second (runtime/app_housekeeping.py).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from kubernetes_asyncio.client import ApiClient

from batchsched.cache import SchedulerCache
from batchsched.clock import SystemClock
from batchsched.config import SchedulerConfig
from batchsched.framework.profile import Profile
from batchsched.kube.binder import EventRecorder, KubeBinder, PodStatusWriter
from batchsched.kube.client import api_client, fence_writes, merge_patch
from batchsched.kube.disruption import PDBS, DisruptionBudgets, parse_disruption_budget
from batchsched.kube.eviction import KubeEvictor
from batchsched.kube.informer import (
    NODE_RESOURCE_TOPOLOGIES,
    NODES,
    PODS,
    PRIORITY_CLASSES,
    Informer,
    ResourceSpec,
)
from batchsched.kube.leader import LeaderElectionConfig, LeaderElector, LeadershipLost
from batchsched.kube.podgroups import PodGroupStatusWriter
from batchsched.metrics import SchedulerMetrics
from batchsched.model.node import parse_node
from batchsched.model.pod import parse_pod
from batchsched.model.priority_class import parse_priority_class
from batchsched.plugins.gang_sort import attach_group_ages
from batchsched.runtime.app_config import ConfigFile, attach_binding_client, profiles_with_extenders
from batchsched.runtime.app_devices import device_informers
from batchsched.runtime.app_gangs import gang_informers
from batchsched.runtime.app_housekeeping import Housekeeping
from batchsched.runtime.app_invalid import InvalidObjects
from batchsched.runtime.app_options import RunOptions
from batchsched.runtime.app_quotas import Patch, QuotaFile, Quotas
from batchsched.runtime.app_serving import start_serving, throttle_client
from batchsched.runtime.gangs import GangTracker
from batchsched.runtime.handlers import NodeEvents, PodEvents, PriorityClassEvents, TopologyEvents
from batchsched.runtime.heap import settle_heap
from batchsched.runtime.preempting import Preempting
from batchsched.runtime.preemption_notes import NotePublisher
from batchsched.runtime.queue import SchedulingQueue
from batchsched.runtime.queue_status_writer import queue_status_writer
from batchsched.runtime.quota_reload import QuotaReloader
from batchsched.runtime.scheduler import Scheduler
from batchsched.runtime.server import RunningServer
from batchsched.runtime.tenant_wiring import tenant_queues
from gpu.nrt import parse_nrt
from queues.model import QuotaPolicy

__all__ = ["App", "RunOptions", "run"]

logger = logging.getLogger(__name__)


class Watching(Protocol):
    """What the app needs of an informer, whatever it parses into."""

    resource: ResourceSpec
    synced: asyncio.Event

    async def run(self) -> None: ...

    async def wait_synced(self) -> None: ...

    async def resync(self) -> None: ...


class App:
    def __init__(self, options: RunOptions, config: SchedulerConfig, api: ApiClient) -> None:
        self.options = options
        self._stop = asyncio.Event()
        self._api = api
        self.servers: dict[str, RunningServer] = {}  # "http", "https": what is listening
        clock = SystemClock()
        self.metrics = SchedulerMetrics()
        throttle_client(api, config.client_connection, self.metrics)
        profiles = profiles_with_extenders(config, self.metrics)
        binder = KubeBinder(api)
        attach_binding_client(profiles, binder)
        self.cache = SchedulerCache(clock)
        self.queue = SchedulingQueue(
            next(iter(profiles.values())).queue_sort.less,
            clock,
            initial_backoff=config.pod_initial_backoff_seconds,
            max_backoff=config.pod_max_backoff_seconds,
        )
        self.gangs = GangTracker(on_group_added=lambda: self.queue.move_all("PodGroupAdd"))
        attach_group_ages(profiles, self.gangs)
        self.group_status = PodGroupStatusWriter(api)
        pod_status = PodStatusWriter(api)
        self.scheduler = self._build_scheduler(config, api, profiles, pod_status, clock)
        # The config in force, reloaded from --config (runtime/app_config.py), for /configz.
        self.config_file = ConfigFile(config, options, api, self.scheduler, self.metrics)
        self._init_informers(api)
        self._init_topology(api)
        self._init_devices(api, profiles)
        self._init_preemption(api, pod_status)
        self.elector = self._init_leader_election(config, api, clock)
        patch: Patch = lambda path, body: merge_patch(api, path, body)  # noqa: E731
        self.quotas = Quotas(self.quota_file, self.scheduler, clock, patch)
        self.housekeeping = Housekeeping(
            self.scheduler,
            self.group_status,
            self.preempting,
            self.preemption_notes,
            self.quotas,
            self.pod_events,
            leading=self.leading,
            synced=lambda: all(i.synced.is_set() for i in self.required),
            flush_events=self.events.flush,
            flush_status=pod_status.flush,
            queue_status=queue_status_writer(api, clock, config.queue_status, self.metrics),
        )

    def _build_scheduler(
        self,
        config: SchedulerConfig,
        api: ApiClient,
        profiles: Mapping[str, Profile],
        pod_status: PodStatusWriter,
        clock: SystemClock,
    ) -> Scheduler:
        """The quota file first: the tenant queues the scheduler is built with need it."""
        options = self.options
        events = self.events = EventRecorder(api)
        self.quota_file = QuotaFile(
            api,
            clock,
            config,
            (options.quota, options.quota_configmap, options.quota_poll_interval),
            events,
            self.metrics,
        )
        tenants = tenant_queues(
            profiles, self.cache, self.queue, clock, self.metrics, self.quota_file.policy
        )
        self.quota_file.on_change.append(tenants.changed)
        tenants.layer.producer_queue = self.gangs.queue_of
        return Scheduler(
            profiles,
            self.cache,
            self.queue,
            pod_status,
            events,
            self.metrics,
            clock,
            seed=options.seed,
            gangs=self.gangs,
            tenants=tenants.layer,
            backfill=tenants.backfill,
        )

    def _init_informers(self, api: ApiClient) -> None:
        """Nodes, Pods and PriorityClasses (required), and PodGroups (optional)."""
        self.priority_classes = PriorityClassEvents()
        self.topology_events = TopologyEvents(self.cache, self.queue)
        self.invalid = InvalidObjects(
            self.metrics, self.gangs, self.topology_events, self.scheduler
        )
        nodes = Informer(
            api,
            NODES,
            parse_node,
            NodeEvents(self.cache, self.queue),
            key=lambda n: n.name,
            on_invalid=self.invalid.of("v1", "Node"),
        )
        self.pod_events = PodEvents(self.cache, self.queue, self.scheduler.admits, self.gangs)
        pods = Informer(
            api,
            PODS,
            parse_pod,
            self.pod_events,
            # By uid: a pod recreated under its old name (StatefulSets, PyTorchJob workers)
            # is a delete and an add, even when a relist is the first to see it.
            key=lambda p: p.uid,
            on_invalid=self.invalid.of("v1", "Pod"),
        )
        classes = Informer(
            api,
            PRIORITY_CLASSES,
            parse_priority_class,
            self.priority_classes,
            key=lambda c: c.name,
            on_invalid=self.invalid.of("scheduling.k8s.io/v1", "PriorityClass"),
        )
        # PodGroups are optional: without the CRD installed the scheduler still schedules plain
        # pods (the PodGroup informer keeps retrying, gang members wait with an Event).
        self.required: list[Watching] = [nodes, pods, classes]
        self.informers: list[Watching] = [
            *self.required,
            *gang_informers(api, self.gangs, self.invalid),
        ]

    def _init_leader_election(
        self, config: SchedulerConfig, api: ApiClient, clock: SystemClock
    ) -> LeaderElector | None:
        """The Lease, and the write fence on every request this client makes."""
        elect = config.leader_election.leader_elect
        if self.options.leader_elect is not None:
            elect = self.options.leader_elect
        if not elect:
            return None
        identity = self.options.identity
        settings = LeaderElectionConfig.from_settings(config.leader_election, identity)
        elector = LeaderElector(
            api,
            settings,
            clock=clock,
            metrics=self.metrics,
            renew_client=lambda: ApiClient(api.configuration),
        )
        fence_writes(api, self.write_window)
        return elector

    @property
    def config(self) -> SchedulerConfig:
        """The KubeSchedulerConfiguration in force (the last good one the file held)."""
        return self.config_file.current

    # Tenant quotas (runtime/app_quotas.py): the policy in force and its subscribers.

    @property
    def quota_policy(self) -> QuotaPolicy:
        return self.quota_file.policy

    @property
    def on_quota_change(self) -> list[Callable[[QuotaPolicy], None]]:
        return self.quota_file.on_change

    @property
    def quota_reloader(self) -> QuotaReloader | None:
        return self.quota_file.reloader

    # Preemption (runtime/preempting.py): PodDisruptionBudgets, the Eviction API, and the
    # note on each preempting gang's PodGroup. Budgets are optional like PodGroups: the
    # Eviction API enforces them anyway, so a missing grant or a slow list breaks none.

    def _init_preemption(self, api: ApiClient, nominator: PodStatusWriter) -> None:
        self.budgets = DisruptionBudgets()
        self.informers.append(
            Informer(
                api,
                PDBS,
                parse_disruption_budget,
                self.budgets,
                key=lambda b: f"{b.namespace}/{b.name}",
                on_invalid=self.invalid.of("policy/v1", "PodDisruptionBudget"),
            )
        )
        self.preempting = Preempting(
            self.scheduler.live,
            KubeEvictor(api),
            nominator,
            min_runtime_s=self.options.preemption_min_runtime,
            budgets=self.budgets.budgets,
        )
        self.scheduler.live.preempting = self.preempting
        self.pod_events.pending_deleted.append(self.preempting.pod_deleted)
        self.pod_events.assigned_gone.append(self.preempting.victim_gone)
        self.preemption_notes = NotePublisher(
            self.preempting.notes, lambda path, body: merge_patch(api, path, body)
        )

    # Node agent topology (gpu/nrt.py): optional, like PodGroups; without the CRD or an object
    # for a node, that node's GPUs come from its labels.

    def _init_topology(self, api: ApiClient) -> None:
        self.informers.append(
            Informer(
                api,
                NODE_RESOURCE_TOPOLOGIES,
                parse_nrt,
                self.topology_events,
                key=lambda m: m.node,
                on_invalid=self.invalid.topology,
            )
        )

    def _init_devices(self, api: ApiClient, profiles: Mapping[str, Profile]) -> None:
        self.informers += device_informers(api, profiles, self.cache, self.queue, self.invalid)

    def stop(self) -> None:
        """Stop scheduling, let bindings in flight finish, release the lease (as on SIGTERM)."""
        self._stop.set()

    def health(self) -> tuple[bool, str]:
        return self.elector.healthz() if self.elector is not None else (True, "ok")

    def ready(self) -> dict[str, tuple[bool, str]]:
        waiting = [i.resource.kind for i in self.required if not i.synced.is_set()]
        if waiting:
            return {"informers-synced": (False, "waiting for " + ", ".join(waiting))}
        return {"informers-synced": (True, "ok")}

    def leading(self) -> bool:
        return self.elector.is_leader if self.elector is not None else True

    def write_window(self) -> float:
        """The write fence (`fence_writes`): how long this replica may still write, by its
        last renewal and the renew deadline; 0 when it does not lead."""
        if self.elector is None:
            return float("inf")
        left = self.elector.write_window()
        if left <= 0:
            self.metrics.writes_fenced.inc()
        return left

    async def run(self) -> int:
        """Serve until SIGTERM/SIGINT (exit 0) or lost leadership (exit 1)."""
        self.servers = await start_serving(self, self._api)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.stop)
        try:
            return await self._run_until(self._stop)
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
            for server in self.servers.values():
                await server.close()

    async def _run_until(self, stop: asyncio.Event) -> int:
        try:
            async with asyncio.TaskGroup() as tasks:
                children = [tasks.create_task(i.run()) for i in self.informers]
                children.append(tasks.create_task(self.housekeeping.run()))
                for reloader in (self.quota_reloader, self.config_file.reloader):
                    if reloader is not None:
                        children.append(tasks.create_task(reloader.run()))
                work = tasks.create_task(self._lead_and_schedule())
                stopped = tasks.create_task(stop.wait())
                await asyncio.wait({work, stopped}, return_when=asyncio.FIRST_COMPLETED)
                logger.info("stopping")
                for task in (*children, work, stopped):
                    task.cancel()
        except* LeadershipLost:
            logger.error("leader election lost; exiting so a restart rejoins as a standby")
            lost = True
        else:
            lost = False
        if lost:
            return 1
        await self.scheduler.drain()
        if self.elector is not None:
            await self.elector.release()
        return 0

    async def _lead_and_schedule(self) -> None:
        await asyncio.gather(*(i.wait_synced() for i in self.required))
        logger.info("informers synced nodes=%d", len(self.cache.snapshot))
        settle_heap()
        if self.elector is None:
            await self.scheduler.run()
        else:
            logger.info("waiting for leadership identity=%s", self.elector.identity)
            await self.elector.run(self._schedule_as_leader)

    async def _schedule_as_leader(self) -> None:
        """A new leader lists Nodes and Pods afresh before its first cycle: its watches may
        still be catching up (after an API server restart they reconnect with backoff) with
        bindings the last leader made, and placing on that stale view over-commits."""
        started = time.monotonic()
        fresh = [i.resync() for i in self.required if i.resource.kind in ("Node", "Pod")]
        await asyncio.gather(*fresh)
        logger.info("leader cache fresh seconds=%.2f", time.monotonic() - started)
        await self.scheduler.run()


async def run(options: RunOptions, config: SchedulerConfig) -> int:
    """Connect to the API server and run until stopped; the exit code of the process."""
    api = await api_client(options.kubeconfig or config.client_connection.kubeconfig or None)
    async with api:
        return await App(options, config, api).run()

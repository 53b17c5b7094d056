"""The scheduler's Prometheus metrics, in one registry per scheduler.

Names, labels and buckets are kube-scheduler's (and client-go's, for leader election) wherever
the meaning is the same, so existing dashboards and alerts work unchanged; our own additions
carry the `batchsched_` prefix. Each `SchedulerMetrics` owns a dedicated `CollectorRegistry`
so tests, and several schedulers in one process, never collide in the global default registry.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

#: The Content-Type of `SchedulerMetrics.render()` output (text exposition format).
CONTENT_TYPE = CONTENT_TYPE_LATEST

#: `scheduler_pending_pods` queue label values, as kube-scheduler reports them.
PENDING_QUEUES = ("active", "backoff", "unschedulable", "gated")


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Purely computational: `count` upper bounds start, start*factor, ... (Go's helper)."""
    if start <= 0 or factor <= 1 or count < 1:
        raise ValueError("exponential buckets need start > 0, factor > 1 and count >= 1")
    return tuple(start * factor**i for i in range(count))


class SchedulerMetrics:
    """Every metric the scheduler exports; attribute names say the domain, not the series."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._define_scheduling()
        self._define_queue_and_cache()
        self._define_operations()
        self._define_quota()
        self._define_tenants()
        self._define_capacity()
        self._define_status_writes()

    def _define_scheduling(self) -> None:
        reg = self.registry
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod "
            "could not be scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"],
            registry=reg,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding).",
            ["result", "profile"],
            buckets=exponential_buckets(0.001, 2, 15),
            registry=reg,
        )
        self.algorithm_duration = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds (one pod's pure cycle, no binding).",
            buckets=exponential_buckets(0.001, 2, 15),
            registry=reg,
        )
        self.events_dropped = Counter(
            "batchsched_events_dropped_total",
            "Events not posted because too many were waiting to be sent (or were still "
            "waiting at shutdown), by the Event's reason.",
            ["reason"],
            registry=reg,
        )
        self.extension_point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=exponential_buckets(0.0001, 2, 12),
            registry=reg,
        )
        self.pod_scheduling_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            buckets=exponential_buckets(1, 2, 5),
            registry=reg,
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts_total",
            "Total preemption attempts in the cluster till now.",
            registry=reg,
        )
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims.",
            # More than 64 victims is rare enough to share the +Inf bucket, as in kube.
            buckets=exponential_buckets(1, 2, 7),
            registry=reg,
        )
        self.preemption_budget_violations = Counter(
            "batchsched_preemption_budget_violations_total",
            "PodDisruptionBudgets that kept a preemption plan from starting: they would not "
            "allow its evictions (nothing is evicted; the preemptor backs off).",
            registry=reg,
        )

    def _define_queue_and_cache(self) -> None:
        reg = self.registry
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in "
            "activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number "
            "of pods in the unschedulable pool; 'gated' means number of gated pods.",
            ["queue"],
            registry=reg,
        )
        self.queue_incoming_pods = Counter(
            "scheduler_queue_incoming_pods_total",
            "Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"],
            registry=reg,
        )
        self.cache_size = Gauge(
            "scheduler_cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ["type"],
            registry=reg,
        )

    def _define_operations(self) -> None:
        reg = self.registry
        self.request_retries = Counter(
            "rest_client_request_retries_total",
            "API requests retried after the server answered with Retry-After (a 429, or a "
            "5xx for an idempotent method), by status code and verb.",
            ["code", "verb"],
            registry=reg,
        )
        self.leader_election_master_status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease.",
            ["name"],
            registry=reg,
        )
        self.invalid_objects = Counter(
            "batchsched_invalid_objects_total",
            "API objects that could not be parsed and were left out of scheduling, by kind.",
            ["kind"],
            registry=reg,
        )
        self.bind_failures = Counter(
            "batchsched_bind_failures_total",
            "Binding cycles that failed (the pod went back to the queue), by reason.",
            ["reason"],
            registry=reg,
        )
        self.assumed_expired = Counter(
            "batchsched_assumed_pods_expired_total",
            "Assumed pods dropped because the API never confirmed their binding in time.",
            registry=reg,
        )
        self.gang_incomplete = Counter(
            "batchsched_gangs_incomplete_total",
            "Gangs found bound below minMember past their timeout (reported, never deleted).",
            registry=reg,
        )
        self.writes_fenced = Counter(
            "batchsched_writes_fenced_total",
            "API writes refused inside the process because this replica did not hold the Lease.",
            registry=reg,
        )
        self.informer_relists = Counter(
            "batchsched_informer_relists_total",
            "Full relists by an informer (first list, 410 Gone, or watch failure), by resource.",
            ["resource"],
            registry=reg,
        )
        self.config_errors = Counter(
            "batchsched_config_errors_total",
            "Configuration that was rejected (the last good one stays in force), by source.",
            ["source"],
            registry=reg,
        )

    def _define_quota(self) -> None:
        reg = self.registry
        self.quota_reloads = Counter(
            "batchsched_quota_config_reloads_total",
            "Changes of the tenant quota file seen after start-up, by the result: 'success' "
            "(put in force) or 'error' (rejected; the last good one stays in force).",
            ["result"],
            registry=reg,
        )
        self.config_reloads = Counter(
            "batchsched_config_reload_total",
            "Changes of the --config KubeSchedulerConfiguration file seen after start-up, by "
            "the result: 'success' (swapped in between cycles) or 'error' (rejected; the "
            "config in force stays).",
            ["result"],
            registry=reg,
        )
        self.quota_last_reload_success = Gauge(
            "batchsched_quota_config_last_reload_success_timestamp_seconds",
            "Unix time the quota file in force was loaded (at start-up or by a reload).",
            registry=reg,
        )

    def _define_tenants(self) -> None:
        reg = self.registry
        self.quota_rejections = Counter(
            "batchsched_quota_rejections_total",
            "Scheduling attempts refused because the tenant's quota did not allow them, "
            "by tenant ('<none>': the pod maps to no tenant).",
            ["tenant"],
            registry=reg,
        )
        self.tenant_gpus = Gauge(
            "batchsched_tenant_gpus",
            "GPUs (whole, shares summed) held by each tenant's pods, teams and organisations.",
            ["tenant"],
            registry=reg,
        )
        self.backfill_held = Counter(
            "batchsched_backfill_held_total",
            "Placements held back because they would have delayed a gang's reservation.",
            registry=reg,
        )
        self.backfill_reservations = Gauge(
            "batchsched_backfill_reservations",
            "Gangs that hold a backfill reservation (an estimated start) right now.",
            registry=reg,
        )
        self.invalid_annotations = Counter(
            "batchsched_invalid_annotations_total",
            "Annotations that could not be read (the scheduler went on without them), by name.",
            ["annotation"],
            registry=reg,
        )

    def _define_capacity(self) -> None:
        reg = self.registry
        self.tenant_quota_gpus = Gauge(
            "batchsched_tenant_quota_gpus",
            "Each tenant's GPU quota from the quota file, by bound ('guaranteed', 'max'); a "
            "bound the file does not name has no series.",
            ["tenant", "bound"],
            registry=reg,
        )
        self.node_gpus = Gauge(
            "batchsched_node_gpus",
            "GPUs (nvidia.com/gpu) per node as the scheduler's cache sees them, by GPU model "
            "and state ('allocatable', 'allocated').",
            ["node", "model", "state"],
            registry=reg,
        )
        self.gangs_pending = Gauge(
            "batchsched_gangs_pending",
            "PodGroups that have not yet started whole and have a member in the scheduling queue.",
            registry=reg,
        )
        self.gang_time_to_whole = Histogram(
            "batchsched_gang_time_to_whole_seconds",
            "From a PodGroup's creation to the cycle that placed it whole (its quorum bound or "
            "binding), once per gang.",
            buckets=exponential_buckets(1, 2, 16),  # 1 s .. ~9 h
            registry=reg,
        )
        self.backfilled_pods = Counter(
            "batchsched_backfilled_pods_total",
            "Pods started while another gang held a protected backfill reservation: they went "
            "in front of it without delaying its planned start.",
            registry=reg,
        )
        self.gang_oldest_pending = Gauge(
            "batchsched_gang_oldest_pending_seconds",
            "Age (since the PodGroup's creation) of the oldest pending gang (as in "
            "batchsched_gangs_pending); 0 when none is pending.",
            registry=reg,
        )

    def set_pending(self, counts: Mapping[str, int]) -> None:
        """Publish queue sizes; a queue missing from `counts` reads 0, not a stale value."""
        for queue in PENDING_QUEUES:
            self.pending_pods.labels(queue=queue).set(counts.get(queue, 0))

    def set_cache_size(self, *, nodes: int, pods: int, assumed_pods: int) -> None:
        self.cache_size.labels(type="nodes").set(nodes)
        self.cache_size.labels(type="pods").set(pods)
        self.cache_size.labels(type="assumed_pods").set(assumed_pods)

    def set_leader(self, lease_name: str, leading: bool) -> None:
        self.leader_election_master_status.labels(name=lease_name).set(1 if leading else 0)

    def render(self) -> bytes:
        """The text exposition of every metric in this registry (served at /metrics)."""
        return generate_latest(self.registry)

    def _define_status_writes(self) -> None:
        self.queue_status_writes = Counter(
            "batchsched_queue_status_writes_total",
            "PATCH requests the leader made to write pending gangs' queue status on their "
            "PodGroups (runtime/queue_status_writer.py), by outcome: written, gone (404 or "
            "409: the PodGroup is gone or replaced), failed (any other answer, or none).",
            ["outcome"],
            registry=self.registry,
        )

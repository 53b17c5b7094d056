"""The node agent's Prometheus metrics, in a registry of its own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

__all__ = ["AgentMetrics"]


class AgentMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        reg = self.registry = registry if registry is not None else CollectorRegistry()
        self.nvml_up = Gauge(
            "batchsched_agent_nvml_up", "1 when the last NVML read succeeded, else 0.", registry=reg
        )
        self.gpus = Gauge(
            "batchsched_agent_gpus", "GPUs on the node, by health.", ["healthy"], registry=reg
        )
        self.nvml_errors = Counter(
            "batchsched_agent_nvml_errors_total",
            "NVML calls that failed a read (GPUs lost not included), by call.",
            ["call"],
            registry=reg,
        )
        self.xid_events = Counter(
            "batchsched_agent_xid_events_total",
            "NVML health events (XID; 0 for a double-bit ECC error), by XID.",
            ["xid"],
            registry=reg,
        )
        self.publishes = Counter(
            "batchsched_agent_publishes_total",
            "NodeResourceTopology writes, by result (ok, error).",
            ["result"],
            registry=reg,
        )
        self.last_publish = Gauge(
            "batchsched_agent_last_publish_timestamp_seconds",
            "Unix time of the last successful NodeResourceTopology write.",
            registry=reg,
        )
        self.pod_resources_errors = Counter(
            "batchsched_agent_pod_resources_errors_total",
            "Failed reads of the kubelet's pod-resources API.",
            registry=reg,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)

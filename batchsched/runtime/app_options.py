"""The options of `batchsched run` that do not come from the KubeSchedulerConfiguration."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunOptions:
    kubeconfig: str | None = None
    config: Path | None = None  # the KubeSchedulerConfiguration file, polled for changes
    config_poll_interval: float = 5.0
    leader_elect: bool | None = None  # None: as the config file says (default on)
    http_host: str = "0.0.0.0"
    http_port: int = 10251
    seed: int = 0
    identity: str | None = None
    # Tenant quotas (queues/): the file, the ConfigMap it is mounted from ("NS/NAME", what
    # reload Events are about) and how often the file is checked for a change.
    quota: Path | None = None
    quota_configmap: str | None = None
    quota_poll_interval: float = 10.0
    # Preemption: pods that started less than this many seconds ago are never victims.
    preemption_min_runtime: float = 0.0

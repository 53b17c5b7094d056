"""The options of `batchsched run` that do not come from the KubeSchedulerConfiguration."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# kube-scheduler's --authorization-always-allow-paths default.
ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")


@dataclass(frozen=True)
class RunOptions:
    kubeconfig: str | None = None
    config: Path | None = None  # the KubeSchedulerConfiguration file, polled for changes
    config_poll_interval: float = 5.0
    leader_elect: bool | None = None  # None: as the config file says (default on)
    # The plain HTTP listener (/healthz /livez /readyz /metrics, no authentication): only
    # when asked (`--http-address`); None is off.
    http_host: str = "0.0.0.0"
    http_port: int | None = None
    # The secure port (TLS, delegated authn/authz, /configz, /debug/flags/v); None is off.
    # `batchsched run` serves it on 10259 as kube-scheduler does; 0 picks a free port.
    bind_address: str = "0.0.0.0"
    secure_port: int | None = None
    tls_cert_file: Path | None = None
    tls_private_key_file: Path | None = None
    cert_dir: Path | None = None  # where a self-signed certificate is written (default: a temp dir)
    client_ca_file: Path | None = None
    always_allow_paths: tuple[str, ...] = ALWAYS_ALLOW_PATHS
    seed: int = 0
    identity: str | None = None
    # Tenant quotas (queues/): the file, the ConfigMap it is mounted from ("NS/NAME", what
    # reload Events are about) and how often the file is checked for a change.
    quota: Path | None = None
    quota_configmap: str | None = None
    quota_poll_interval: float = 10.0
    # Preemption: pods that started less than this many seconds ago are never victims.
    preemption_min_runtime: float = 0.0

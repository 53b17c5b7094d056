"""The config in force as a KubeSchedulerConfiguration document, for /configz (kube-scheduler
serves its effective configuration there under the key "componentconfig")."""

from __future__ import annotations

from batchsched.config.documents import KIND
from batchsched.config.scheduler_config import ProfileConfig, SchedulerConfig

__all__ = ["configz_document"]

_DURATIONS = ("leaseDuration", "renewDeadline", "retryPeriod")


def configz_document(config: SchedulerConfig) -> dict[str, object]:
    """Purely computational: the resolved config, defaults filled in, in the file's shape
    (camelCase, durations as "15s", each extension point's plugins as its enabled list)."""
    election = config.leader_election.model_dump(mode="json", by_alias=True)
    for key in _DURATIONS:
        election[key] = f"{float(election[key]):g}s"
    document: dict[str, object] = {
        "apiVersion": config.api_version,
        "kind": KIND,
        "parallelism": config.parallelism,
        "podInitialBackoffSeconds": config.pod_initial_backoff_seconds,
        "podMaxBackoffSeconds": config.pod_max_backoff_seconds,
        "leaderElection": election,
        "clientConnection": config.client_connection.model_dump(mode="json", by_alias=True),
        "queueStatus": _queue_status(config),
        "profiles": [_profile(p) for p in config.profiles],
    }
    if config.percentage_of_nodes_to_score is not None:
        document["percentageOfNodesToScore"] = config.percentage_of_nodes_to_score
    return document


def _queue_status(config: SchedulerConfig) -> dict[str, object]:
    settings = config.queue_status
    return {
        "passInterval": f"{settings.pass_interval:g}s",
        "minIntervalPerGroup": f"{settings.min_interval_per_group:g}s",
        "maxGroupsPerPass": settings.max_groups_per_pass,
    }


def _profile(profile: ProfileConfig) -> dict[str, object]:
    plugins = {
        point: {
            "enabled": [
                {"name": p.name, "weight": p.weight} if point == "score" else {"name": p.name}
                for p in enabled
            ]
        }
        for point, enabled in profile.plugins.items()
    }
    out: dict[str, object] = {
        "schedulerName": profile.scheduler_name,
        "plugins": plugins,
        "pluginConfig": [{"name": n, "args": a} for n, a in profile.plugin_args.items()],
    }
    if profile.percentage_of_nodes_to_score is not None:
        out["percentageOfNodesToScore"] = profile.percentage_of_nodes_to_score
    return out

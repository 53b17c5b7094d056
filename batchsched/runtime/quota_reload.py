"""Hot reload of the tenant quota file, mounted from a ConfigMap.

The kubelet updates a ConfigMap volume by writing a new timestamped directory and swapping the
`..data` symlink to it, so the file's own mtime is not a reliable signal (the path is a symlink
whose target changes, and a copy can keep its mtime). We poll the file's *content* and compare
SHA-256 digests: whatever way the bytes change, we see it; when they don't, nothing happens.

A new file that parses is put in force (callback, INFO log, metrics, a Normal Event
`QuotaConfigReloaded`). A new file that does not parse changes nothing: the last good policy
stays in force, and the error goes to an ERROR log line, the metrics and a Warning Event
`InvalidQuotaConfig` whose note is the full message. Each distinct content is reported once,
however many polls see it. At start-up there is no last good policy, so `load_initial` raises.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Final

from kubernetes_asyncio.client import ApiClient

from batchsched.clock import Clock
from batchsched.config.errors import ConfigError, Issue
from batchsched.kube.binder import ObjectRef
from batchsched.kube.client import ApiError, ApiUnavailable, request_json
from batchsched.metrics import SchedulerMetrics
from batchsched.runtime.file_poll import PolledFile, Resolve
from batchsched.runtime.scheduler import Recorder
from queues.config import QuotaConfigError, parse_quota_config
from queues.model import QuotaPolicy

logger = logging.getLogger(__name__)

DEFAULT_POLL_INTERVAL_S: Final = 10.0
RELOADED: Final = "QuotaConfigReloaded"
INVALID: Final = "InvalidQuotaConfig"
ACTION: Final = "LoadQuotaConfig"


def parse_object_ref(text: str) -> tuple[str, str]:
    """`NAMESPACE/NAME` (the --quota-configmap value) as (namespace, name)."""
    namespace, slash, name = text.partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise ValueError(f"expected NAMESPACE/NAME, got {text!r}")
    return namespace, name


def configmap_ref(namespace: str, name: str) -> ObjectRef:
    return ObjectRef("v1", "ConfigMap", namespace, name, "")


def lease_ref(namespace: str, name: str) -> ObjectRef:
    return ObjectRef("coordination.k8s.io/v1", "Lease", namespace, name, "")


def uid_resolver(api: ApiClient) -> Resolve:
    """Fills in the object's uid (so `kubectl describe` shows the Event with the object);
    without it, or when it cannot be read, the Event still names the object by name."""

    async def resolve(ref: ObjectRef) -> ObjectRef:
        group = "/api/v1" if ref.api_version == "v1" else f"/apis/{ref.api_version}"
        path = f"{group}/namespaces/{ref.namespace}/{ref.kind.lower()}s/{ref.name}"
        try:
            found = await request_json(api, "GET", path)
        except (ApiError, ApiUnavailable) as err:
            logger.debug("event object not found path=%s error=%s", path, err)
            return ref
        meta = found.get("metadata")
        uid = meta.get("uid") if isinstance(meta, dict) else None
        return replace(ref, uid=uid) if isinstance(uid, str) else ref

    return resolve


class QuotaReloader(PolledFile[QuotaPolicy]):
    """Reads the quota file; `check_once` puts a changed, valid file in force."""

    def __init__(
        self,
        path: Path,
        *,
        on_change: Callable[[QuotaPolicy], None],
        recorder: Recorder,
        regarding: ObjectRef,
        metrics: SchedulerMetrics,
        clock: Clock,
        interval: float = DEFAULT_POLL_INTERVAL_S,
        resolve: Resolve | None = None,
    ) -> None:
        super().__init__(
            path,
            interval=interval,
            recorder=recorder,
            regarding=regarding,
            action=ACTION,
            resolve=resolve,
        )
        self._on_change = on_change
        self._metrics = metrics
        self._clock = clock
        self.policy: QuotaPolicy | None = None  # the last good one

    def load_initial(self) -> QuotaPolicy:
        """The policy at start-up; QuotaConfigError when the file is missing or bad."""
        digest, text = self._read()
        self.policy = self._load(text)
        self._digest = digest
        self._metrics.quota_last_reload_success.set(self._clock.wall())
        logger.info(
            "quota config loaded file=%s tenants=%d digest=%s",
            self.path,
            len(self.policy.tenants),
            digest[:12],
        )
        return self.policy

    def _error(self, issues: list[Issue]) -> QuotaConfigError:
        return QuotaConfigError(issues, str(self.path))

    def _load(self, text: str) -> QuotaPolicy:
        return parse_quota_config(text, str(self.path))

    async def _accepted(self, policy: QuotaPolicy, digest: str) -> None:
        self.policy = policy
        self._metrics.quota_reloads.labels(result="success").inc()
        self._metrics.quota_last_reload_success.set(self._clock.wall())
        logger.info(
            "quota config reloaded file=%s tenants=%d digest=%s",
            self.path,
            len(policy.tenants),
            digest[:12],
        )
        try:
            self._on_change(policy)
        except Exception:  # a subscriber's bug must not stop the reload loop or the scheduler
            logger.exception("quota config subscriber failed file=%s", self.path)
        note = f"quota config {self.path} reloaded: {len(policy.tenants)} tenants"
        await self._record("Normal", RELOADED, note)

    async def _rejected(self, err: ConfigError) -> None:
        self._metrics.quota_reloads.labels(result="error").inc()
        self._metrics.config_errors.labels(source="quota").inc()
        logger.error("quota config rejected, keeping the last good one error=%s", err)
        await self._record("Warning", INVALID, f"kept the last good quota config: {err}")

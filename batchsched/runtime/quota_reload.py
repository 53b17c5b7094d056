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

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Final

from kubernetes_asyncio.client import ApiClient

from batchsched.clock import Clock
from batchsched.config.errors import Issue
from batchsched.kube.binder import ObjectRef
from batchsched.kube.client import ApiError, ApiUnavailable, request_json
from batchsched.metrics import SchedulerMetrics
from batchsched.runtime.scheduler import Recorder
from queues.config import QuotaConfigError, parse_quota_config
from queues.model import QuotaPolicy

logger = logging.getLogger(__name__)

DEFAULT_POLL_INTERVAL_S: Final = 10.0
RELOADED: Final = "QuotaConfigReloaded"
INVALID: Final = "InvalidQuotaConfig"
ACTION: Final = "LoadQuotaConfig"
_UNREADABLE: Final = "unreadable"  # the digest of "could not read the file", so it logs once

Resolve = Callable[[ObjectRef], Awaitable[ObjectRef]]


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


class QuotaReloader:
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
        self.path = path
        self.interval = interval
        self._on_change = on_change
        self._recorder = recorder
        self.regarding = regarding
        self._resolve = resolve
        self._metrics = metrics
        self._clock = clock
        self._digest: str | None = None  # of the content last looked at, good or bad
        self.policy: QuotaPolicy | None = None  # the last good one

    def load_initial(self) -> QuotaPolicy:
        """The policy at start-up; QuotaConfigError when the file is missing or bad."""
        digest, text = self._read()
        self.policy = parse_quota_config(text, str(self.path))
        self._digest = digest
        self._metrics.quota_last_reload_success.set(self._clock.wall())
        logger.info(
            "quota config loaded file=%s tenants=%d digest=%s",
            self.path,
            len(self.policy.tenants),
            digest[:12],
        )
        return self.policy

    async def run(self, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        """Poll forever (cancel to stop)."""
        while True:
            await sleep(self.interval)
            await self.check_once()

    async def check_once(self) -> bool:
        """Look at the file once; True when a new policy was put in force."""
        try:
            digest, text = self._read()
        except QuotaConfigError as err:
            if self._digest != _UNREADABLE:
                self._digest = _UNREADABLE
                await self._rejected(err)
            return False
        if digest == self._digest:
            return False
        self._digest = digest
        try:
            policy = parse_quota_config(text, str(self.path))
        except QuotaConfigError as err:
            await self._rejected(err)
            return False
        await self._accepted(policy, digest)
        return True

    def _read(self) -> tuple[str, str]:
        try:
            data = self.path.read_bytes()
            return hashlib.sha256(data).hexdigest(), data.decode("utf-8")
        except (OSError, UnicodeDecodeError) as err:
            issue = Issue("", f"cannot read the file: {err}")
            raise QuotaConfigError([issue], str(self.path)) from err

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

    async def _rejected(self, err: QuotaConfigError) -> None:
        self._metrics.quota_reloads.labels(result="error").inc()
        self._metrics.config_errors.labels(source="quota").inc()
        logger.error("quota config rejected, keeping the last good one error=%s", err)
        await self._record("Warning", INVALID, f"kept the last good quota config: {err}")

    async def _record(self, type_: str, reason: str, note: str) -> None:
        if self._resolve is not None and not self.regarding.uid:
            self.regarding = await self._resolve(self.regarding)
        await self._recorder.record(self.regarding, type_, reason, ACTION, note)

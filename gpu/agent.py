"""The node agent: reads the node's GPUs through NVML and publishes its NodeResourceTopology.

One `Agent.refresh()` reads NVML (and the kubelet's pod-resources, where mounted), builds the
object (gpu/nrt.py) and applies it when something changed or a heartbeat is due. `run()`
repeats that every `poll_s` seconds and at once when NVML reports a health event (XID,
double-bit ECC), which a thread waits for. Nothing here ends the process: NVML that cannot
start, a read that fails, an API server that refuses the write, each becomes a log line, a
metric and a failing /readyz check with the reason, and is retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from gpu.agent_metrics import AgentMetrics
from gpu.nrt import (
    GPU_LOAD_ANNOTATION,
    GPU_PODS_ANNOTATION,
    detail_json,
    load_json,
    nrt_object,
    pods_json,
)
from gpu.nvml import NodeReading, NvmlError, NvmlReader, NvmlUnavailable
from gpu.podresources import PodDevices, PodResourcesLister, PodResourcesUnavailable

__all__ = ["Agent", "AgentConfig", "PublishError", "Publisher", "gpu_holders"]

log = logging.getLogger(__name__)

GPU_RESOURCE: Final = "nvidia.com/gpu"
MAX_RETRY_S: Final = 60.0


class PublishError(Exception):
    """The object could not be written (API refused it, unreachable, no credentials)."""


class Publisher(Protocol):
    async def apply(self, obj: Mapping[str, object]) -> None:
        """Server-side apply the whole object; PublishError when it was not written."""
        ...


@dataclass(frozen=True, slots=True)
class AgentConfig:
    node_name: str
    source: str = "nvml"  # "fake:<machine>" in fake mode: written into the GPU detail
    poll_s: float = 10.0  # how often NVML is read for changes
    heartbeat_s: float = 60.0  # the longest the object goes unwritten
    policy: str = "none"  # the kubelet's Topology Manager policy and scope, as reported
    scope: str = "container"
    event_wait_ms: int = 5000  # one blocking NVML event wait in the event thread


@dataclass(frozen=True, slots=True)
class _Published:
    detail: str
    pods: str
    at: float  # monotonic


class Agent:
    def __init__(
        self,
        reader: NvmlReader,
        publisher: Publisher,
        config: AgentConfig,
        *,
        pod_resources: PodResourcesLister | str | None = None,
        metrics: AgentMetrics | None = None,
    ) -> None:
        self.reader = reader
        self.publisher = publisher
        self.config = config
        self.metrics = metrics or AgentMetrics()
        self.pod_resources = pod_resources
        self.nvml_open = False
        self.nvml_status = (False, "NVML not initialised yet")
        self.publish_status = (False, "nothing published yet")
        self._published: _Published | None = None
        self._changed = asyncio.Event()
        self._retry_s = 1.0
        if isinstance(pod_resources, str):  # None: not asked for (e.g. --print)
            log.info(
                "pod-resources not available reason=%s; per-pod GPUs not reported", pod_resources
            )

    def ready(self) -> dict[str, tuple[bool, str]]:
        """The /readyz checks: NVML answers, and the last write reached the API server."""
        return {"nvml": self.nvml_status, "published": self.publish_status}

    async def refresh(self, now: float | None = None) -> bool:
        """Read, and publish if anything changed or a heartbeat is due; True when it wrote."""
        now = time.monotonic() if now is None else now
        reading = await self._read()
        if reading is None:
            return False
        detail = detail_json(
            reading.topology,
            [h.reasons for h in reading.health],
            self.config.source,
            reading.driver,
        )
        holders = await self._holders(reading)
        pods = pods_json(holders)
        last = self._published
        due = last is None or now - last.at >= self.config.heartbeat_s
        if not due and last is not None and (last.detail, last.pods) == (detail, pods):
            return False
        in_use = frozenset(i for indices in holders.values() for i in indices)
        obj = nrt_object(
            self.config.node_name,
            reading.topology,
            detail,
            heartbeat=_rfc3339(time.time()),
            host=self.reader.host,
            gpus_in_use=in_use,
            policy=self.config.policy,
            scope=self.config.scope,
        )
        annotations = obj["metadata"]["annotations"]  # type: ignore[index]
        if self.pod_resources is not None and not isinstance(self.pod_resources, str):
            annotations[GPU_PODS_ANNOTATION] = pods
        # Load changes all the time: published with each write (a change of GPUs or pods, or
        # the heartbeat), never a reason to write on its own.
        annotations[GPU_LOAD_ANNOTATION] = load_json(reading.load)
        return await self._publish(obj, _Published(detail, pods, now), reading)

    async def _read(self) -> NodeReading | None:
        try:
            if not self.nvml_open:
                driver = await asyncio.to_thread(self.reader.open)
                self.nvml_open = True
                await asyncio.to_thread(self.reader.watch)
                log.info("NVML ready driver=%s source=%s", driver, self.config.source)
            reading = await asyncio.to_thread(self.reader.read)
        except NvmlUnavailable as err:
            self._nvml_failed(err, unavailable=True)
            return None
        except NvmlError as err:
            self._nvml_failed(err, unavailable=False)
            return None
        self.nvml_status = (True, "ok")
        self.metrics.nvml_up.set(1)
        self._retry_s = 1.0
        healthy = sum(h.healthy for h in reading.health)
        self.metrics.gpus.labels(healthy="true").set(healthy)
        self.metrics.gpus.labels(healthy="false").set(len(reading.health) - healthy)
        return reading

    def _nvml_failed(self, err: NvmlError, *, unavailable: bool) -> None:
        reason = str(err)
        if self.nvml_status != (False, reason):
            # One line per new reason, at ERROR: the cause must be visible in `kubectl logs`
            # without the container restarting over and over.
            log.error(
                "NVML %s error=%s; not ready, retrying (GPU topology is not published meanwhile)",
                "unavailable" if unavailable else "read failed",
                reason,
            )
        self.nvml_status = (False, reason)
        self.metrics.nvml_up.set(0)
        self.metrics.nvml_errors.labels(call=err.call).inc()
        if unavailable and self.nvml_open:
            self.nvml_open = False  # open again from scratch next time

    async def _holders(self, reading: NodeReading) -> dict[tuple[str, str], tuple[int, ...]]:
        lister = self.pod_resources
        if lister is None or isinstance(lister, str):
            return {}
        try:
            devices = await asyncio.to_thread(lister.list_devices)
        except (PodResourcesUnavailable, ValueError) as err:
            log.warning("pod-resources list failed error=%s", err)
            self.metrics.pod_resources_errors.inc()
            return {}
        return gpu_holders(devices, [g.uuid for g in reading.topology.gpus])

    async def _publish(
        self, obj: dict[str, object], record: _Published, reading: NodeReading
    ) -> bool:
        try:
            await self.publisher.apply(obj)
        except PublishError as err:
            if self.publish_status != (False, str(err)):
                log.error("publish failed node=%s error=%s; retrying", self.config.node_name, err)
            self.publish_status = (False, str(err))
            self.metrics.publishes.labels(result="error").inc()
            return False
        changed = self._published is None or self._published.detail != record.detail
        self._published = record
        self.publish_status = (True, "ok")
        self.metrics.publishes.labels(result="ok").inc()
        self.metrics.last_publish.set(time.time())
        unhealthy = [h.index for h in reading.health if not h.healthy]
        log.log(
            logging.INFO if changed else logging.DEBUG,
            "published node=%s gpus=%d unhealthy=%s changed=%s",
            self.config.node_name,
            len(reading.health),
            unhealthy,
            changed,
        )
        return True

    # The loop

    async def run(self) -> None:
        """Refresh forever (cancel to stop): every poll, and at once after a health event."""
        events = asyncio.create_task(self._watch_events())
        try:
            while True:
                await self.refresh()
                wait = self.config.poll_s
                if not self.nvml_status[0]:
                    wait = self._retry_s
                    self._retry_s = min(self._retry_s * 2, MAX_RETRY_S)
                await self._wait_changed(wait)
        finally:
            events.cancel()

    async def _wait_changed(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)
        self._changed.clear()

    async def _watch_events(self) -> None:
        while True:
            if not self.nvml_open:
                await asyncio.sleep(1.0)  # nothing to wait on until NVML is open
                continue
            try:
                event = await asyncio.to_thread(self.reader.wait_event, self.config.event_wait_ms)
            except NvmlError as err:
                log.warning("NVML event wait failed error=%s", err)
                await asyncio.sleep(self.config.event_wait_ms / 1000)
                continue
            if event is not None:
                log.warning(
                    "GPU health event uuid=%s xid=%d type=%#x",
                    event.uuid,
                    event.xid,
                    event.event_type,
                )
                self.metrics.xid_events.labels(xid=str(event.xid)).inc()
                self._changed.set()


def gpu_holders(
    devices: tuple[PodDevices, ...], uuids: list[str]
) -> dict[tuple[str, str], tuple[int, ...]]:
    """(namespace, pod) -> the GPU indices it holds. Device ids are GPU UUIDs; a time-sliced
    replica ("GPU-...::2") is its GPU; ids of other devices (MIG instances) are left out."""
    index_of = {uuid: i for i, uuid in enumerate(uuids) if uuid}
    holders: dict[tuple[str, str], set[int]] = {}
    for entry in devices:
        if entry.resource != GPU_RESOURCE:
            continue
        for device in entry.device_ids:
            index = index_of.get(device.split("::", 1)[0])
            if index is not None:
                holders.setdefault((entry.namespace, entry.pod), set()).add(index)
    return {pod: tuple(sorted(indices)) for pod, indices in sorted(holders.items())}


def _rfc3339(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def dump(obj: Mapping[str, object]) -> str:
    return json.dumps(obj, indent=2, sort_keys=False)

"""Read a node's GPUs through NVML (nvidia-ml-py), translated once into the topology model.

`NvmlReader.read()` asks NVML about every GPU (UUID, name, memory, PCIe bus id, NUMA node, CPU
affinity, NVLinks and their peers, MIG, ECC) and every pair (NVLink, else the PCIe common
ancestor) and returns a `NodeReading`: a `NodeTopology` plus each GPU's health and why. A GPU
that fell off the bus stays in the reading as an unhealthy GPU; a node where NVML cannot work
raises `NvmlUnavailable` (see gpu.nvml_api for how errors are translated).

This is an I/O module (it calls the driver): the decision core never imports it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import pynvml

from gpu.nvml_api import (
    APPLICATION_XIDS,
    CRITICAL_EVENTS,
    GpuLost,
    MemoryInfo,
    NvmlError,
    NvmlLibrary,
    NvmlUnavailable,
    nvml_call,
    optional_call,
)
from gpu.nvml_model import GpuLinks, HostNuma, numa_layout, nvlink_between
from gpu.topology import (
    GpuDevice,
    GpuLoad,
    Link,
    LinkLevel,
    MigPartition,
    NodeTopology,
    link_matrix,
)

__all__ = [
    "GpuHealth",
    "GpuLost",
    "NodeReading",
    "NvmlError",
    "NvmlLibrary",
    "NvmlReader",
    "NvmlUnavailable",
    "XidEvent",
    "product_name",
]

log = logging.getLogger(__name__)


def product_name(nvml_name: str) -> str:
    """NVML's "NVIDIA H100 80GB HBM3" as GPU feature discovery labels it: spaces to dashes,
    so measured nodes and labelled ones name a model the same way."""
    return "-".join(nvml_name.split())


@dataclass(frozen=True, slots=True)
class GpuHealth:
    index: int
    reasons: tuple[str, ...] = ()  # why the GPU is unhealthy; () when it is healthy
    ecc_uncorrected: int = 0  # volatile (since the driver loaded) uncorrected ECC errors

    @property
    def healthy(self) -> bool:
        return not self.reasons


@dataclass(frozen=True, slots=True)
class NodeReading:
    topology: NodeTopology
    health: tuple[GpuHealth, ...]  # by GPU index
    driver: str
    load: tuple[GpuLoad, ...] = ()  # the GPUs that answered, by index


@dataclass(frozen=True, slots=True)
class XidEvent:
    uuid: str
    xid: int  # 0 for a double-bit ECC event
    event_type: int


@dataclass(frozen=True, slots=True)
class _Probe:
    """What NVML told us about one GPU, before the pairs are looked at."""

    device: GpuDevice
    handle: object | None  # None: lost before we got a handle
    links: GpuLinks
    ecc_uncorrected: int
    lost: str = ""  # why the GPU is lost, "" when it answered
    load: GpuLoad | None = None


class NvmlReader:
    """Reads the node's GPUs. `open()` once, `read()` per refresh, `close()` at the end.

    `host` describes the NUMA nodes (sysfs, or the reference machine in fake mode); without it
    NUMA nodes are inferred from the GPUs' NUMA ids and CPU affinity.
    """

    def __init__(self, lib: NvmlLibrary, host: Sequence[HostNuma] = (), cpus: int = 1024) -> None:
        self._lib = lib
        self.host = tuple(host)
        self._cpu_words = max(1, (cpus + 63) // 64)
        # Critical XIDs by GPU UUID, sticky for the process's life: like the device plugin,
        # a GPU that reported one stays unhealthy until the node is looked at.
        self._xids: dict[str, list[int]] = {}
        self._events: object | None = None

    def open(self) -> str:
        """Initialise NVML; the driver version. NvmlUnavailable when NVML cannot work here."""
        nvml_call(self._lib.nvmlInit)
        return nvml_call(self._lib.nvmlSystemGetDriverVersion)

    def close(self) -> None:
        lib, events = self._lib, self._events
        self._events = None
        if events is not None:
            with contextlib.suppress(NvmlError):
                nvml_call(lib.nvmlEventSetFree, events)
        nvml_call(lib.nvmlShutdown)

    def read(self) -> NodeReading:
        lib = self._lib
        driver = nvml_call(lib.nvmlSystemGetDriverVersion)
        count = nvml_call(lib.nvmlDeviceGetCount)
        probes = [self._probe(i) for i in range(count)]
        health = tuple(self._health(p) for p in probes)
        devices = [_with_health(p.device, h.healthy) for p, h in zip(probes, health, strict=True)]
        placed, numa_nodes = numa_layout(devices, [p.links.cpus for p in probes], self.host)
        pairs = {
            (a.device.index, b.device.index): self._pair(a, b)
            for i, a in enumerate(probes)
            for b in probes[i + 1 :]
        }
        topology = NodeTopology(
            model=next((p.device.model for p in probes if not p.lost), ""),
            gpus=placed,
            numa_nodes=numa_nodes,
            links=link_matrix(count, pairs, Link(LinkLevel.SYS)),
        )
        load = tuple(p.load for p in probes if p.load is not None)
        return NodeReading(topology, health, driver, load)

    def _health(self, probe: _Probe) -> GpuHealth:
        reasons = []
        if probe.lost:
            reasons.append(f"lost: {probe.lost}")
        if probe.ecc_uncorrected:
            reasons.append(f"ecc: {probe.ecc_uncorrected} uncorrected volatile errors")
        for xid in self._xids.get(probe.device.uuid, []) if probe.device.uuid else []:
            reasons.append(f"xid: {xid}" if xid else "ecc: double-bit error event")
        return GpuHealth(probe.device.index, tuple(reasons), probe.ecc_uncorrected)

    def _probe(self, index: int) -> _Probe:
        lib = self._lib
        handle: object | None = None
        try:
            handle = nvml_call(lib.nvmlDeviceGetHandleByIndex, index)
            return self._probe_handle(index, handle)
        except GpuLost as err:
            # The index stays (GPU indices are positions) with nothing known but its loss.
            log.warning("GPU lost index=%d error=%s", index, err)
            return _Probe(GpuDevice(index, "", "", 0, -1, "", False), None, GpuLinks(), 0, str(err))

    def _probe_handle(self, index: int, h: object) -> _Probe:
        lib = self._lib
        uuid = nvml_call(lib.nvmlDeviceGetUUID, h)
        name = nvml_call(lib.nvmlDeviceGetName, h)
        memory = nvml_call(lib.nvmlDeviceGetMemoryInfo, h)
        bus = nvml_call(lib.nvmlDeviceGetPciInfo, h).busId
        numa = optional_call(lib.nvmlDeviceGetNumaNodeId, h)
        device = GpuDevice(
            index=index,
            uuid=uuid,
            model=product_name(name),
            memory_mib=memory.total // (1024 * 1024),
            numa_node=numa if numa is not None and numa >= 0 else -1,
            pci_bus_id=bus.upper(),
            mig=self._mig(h),
        )
        return _Probe(device, h, self._links(h), self._ecc(h), load=self._load(index, h, memory))

    def _load(self, index: int, h: object, memory: MemoryInfo) -> GpuLoad | None:
        """Utilisation and memory in use (GpuLoadAware scores by them); None where the GPU
        does not report utilisation."""
        rates = optional_call(self._lib.nvmlDeviceGetUtilizationRates, h)
        if rates is None:
            return None
        # Version 2 leaves out what the driver reserves for itself (615 MiB on an idle H200),
        # which no pod can free and which version 1 counts as used.
        mib = 1024 * 1024
        used = self._used_memory(h, memory)
        return GpuLoad(index, rates.gpu, used // mib, memory.total // mib)

    def _used_memory(self, h: object, memory: MemoryInfo) -> int:
        if _MEMORY_V2 is None:  # an nvidia-ml-py without the versioned call
            return memory.used
        try:
            v2 = nvml_call(self._lib.nvmlDeviceGetMemoryInfo, h, _MEMORY_V2)
        except GpuLost:
            raise
        except NvmlError:  # a driver older than the version-2 struct: version 1 it is
            return memory.used
        return v2.used

    def _links(self, h: object) -> GpuLinks:
        """CPU affinity, and the active NVLinks: lanes to each peer GPU by bus id, to switches."""
        lib = self._lib
        words = optional_call(lib.nvmlDeviceGetCpuAffinity, h, self._cpu_words)
        cpus = tuple(
            w * 64 + bit
            for w, mask in enumerate(words or ())
            for bit in range(64)
            if mask >> bit & 1
        )
        peers: dict[str, int] = {}
        switch = version = 0
        for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
            active = optional_call(lib.nvmlDeviceGetNvLinkState, h, link)
            if active is None:
                break  # no NVLink on this GPU, or past its last link
            if active != pynvml.NVML_FEATURE_ENABLED:
                continue
            version = version or self._nvlink_version(h, link)
            kind = optional_call(lib.nvmlDeviceGetNvLinkRemoteDeviceType, h, link)
            if kind == pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH:
                switch += 1
                continue
            remote = nvml_call(lib.nvmlDeviceGetNvLinkRemotePciInfo, h, link).busId.upper()
            peers[remote] = peers.get(remote, 0) + 1
        return GpuLinks(cpus, peers, switch, version)

    def _nvlink_version(self, h: object, link: int) -> int:
        lib = self._lib
        found = optional_call(lib.nvmlDeviceGetNvLinkVersion, h, link)
        return found or 0

    def _mig(self, h: object) -> tuple[MigPartition, ...]:
        lib = self._lib
        mode = optional_call(lib.nvmlDeviceGetMigMode, h)
        if not mode or mode[0] != pynvml.NVML_DEVICE_MIG_ENABLE:
            return ()
        slots = nvml_call(lib.nvmlDeviceGetMaxMigDeviceCount, h)
        profiles: dict[str, int] = {}
        for i in range(slots):
            mig = optional_call(lib.nvmlDeviceGetMigDeviceHandleByIndex, h, i)
            if mig is None:
                continue  # an empty slot
            name = nvml_call(lib.nvmlDeviceGetName, mig)
            # "NVIDIA H100 80GB HBM3 MIG 1g.10gb": the profile is the last word.
            profile = name.rsplit(" ", 1)[-1]
            profiles[profile] = profiles.get(profile, 0) + 1
        return tuple(MigPartition(p, n) for p, n in sorted(profiles.items()))

    def _ecc(self, h: object) -> int:
        lib = self._lib
        found = optional_call(
            lib.nvmlDeviceGetTotalEccErrors,
            h,
            pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            pynvml.NVML_VOLATILE_ECC,
        )
        return found or 0

    def _pair(self, a: _Probe, b: _Probe) -> Link:
        if a.handle is None or b.handle is None:
            return Link(LinkLevel.SYS)  # a lost GPU is never handed out: any level will do
        nvlink = nvlink_between(a.links, b.links, a.device.pci_bus_id, b.device.pci_bus_id)
        if nvlink is not None:
            return nvlink
        lib = self._lib
        ha, hb = a.handle, b.handle
        try:
            ancestor = optional_call(lib.nvmlDeviceGetTopologyCommonAncestor, ha, hb)
        except GpuLost:
            ancestor = None
        if ancestor is None:
            return Link(LinkLevel.SYS)  # unknown: assume the worst, never better than real
        return Link(_PCIE_LEVELS.get(ancestor, LinkLevel.SYS))

    # Health events

    def watch(self) -> None:
        """Register every GPU for XID and double-bit ECC events, where it supports them."""
        lib = self._lib
        if self._events is not None:  # NVML was opened again: drop the old set
            with contextlib.suppress(NvmlError):
                nvml_call(lib.nvmlEventSetFree, self._events)
        events = self._events = nvml_call(lib.nvmlEventSetCreate)
        count = nvml_call(lib.nvmlDeviceGetCount)
        for i in range(count):
            with contextlib.suppress(GpuLost):  # read() reports it
                h = nvml_call(lib.nvmlDeviceGetHandleByIndex, i)
                optional_call(lib.nvmlDeviceRegisterEvents, h, CRITICAL_EVENTS, events)

    def wait_event(self, timeout_ms: int) -> XidEvent | None:
        """One health event within `timeout_ms`, else None. It blocks: run it in a thread.
        Critical XIDs are remembered and mark their GPU unhealthy in every later read()."""
        lib, events = self._lib, self._events
        if events is None:
            return None
        try:
            data = nvml_call(lib.nvmlEventSetWait_v2, events, timeout_ms)
        except NvmlError as err:
            if err.code == pynvml.NVML_ERROR_TIMEOUT:
                return None
            raise
        device = data.device
        uuid = nvml_call(lib.nvmlDeviceGetUUID, device)
        critical = data.eventType == pynvml.nvmlEventTypeXidCriticalError
        event = XidEvent(uuid, data.eventData if critical else 0, data.eventType)
        if event.xid not in APPLICATION_XIDS:
            self._xids.setdefault(uuid, []).append(event.xid)
        return event


def _with_health(device: GpuDevice, healthy: bool) -> GpuDevice:
    if device.healthy == healthy:
        return device
    return dataclasses.replace(device, healthy=healthy)


# nvmlGpuTopologyLevel_t to our levels. NODE (host bridges of one NUMA node) has no level of
# its own here: it is the same socket without a shared switch, as PHB.
# pynvml's version tag for the memory call's second struct (absent before nvidia-ml-py 12.535).
_MEMORY_V2: Final[int | None] = getattr(pynvml, "nvmlMemory_v2", None)

_PCIE_LEVELS: Final = {
    pynvml.NVML_TOPOLOGY_INTERNAL: LinkLevel.PIX,  # two GPUs on one board
    pynvml.NVML_TOPOLOGY_SINGLE: LinkLevel.PIX,
    pynvml.NVML_TOPOLOGY_MULTIPLE: LinkLevel.PXB,
    pynvml.NVML_TOPOLOGY_HOSTBRIDGE: LinkLevel.PHB,
    pynvml.NVML_TOPOLOGY_NODE: LinkLevel.PHB,
    pynvml.NVML_TOPOLOGY_SYSTEM: LinkLevel.SYS,
}

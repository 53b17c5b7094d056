"""A fake of nvidia-ml-py for the reference machines, with the library's calls and errors.

`FakeNvml(DGX_H100)` answers the `gpu.nvml_api.NvmlLibrary` calls as the driver on that machine
would: names, bus ids, NUMA nodes and CPU affinity from the machine's table, NVLinks to NVSwitches
on the DGX machines, PCIe common ancestors on the others, MIG on A100/H100 only. Failures are
pynvml's own exception classes with the driver's codes (pynvml.NVMLError(code) builds the
subclass, e.g. NVMLError_GPUIsLost), in the situations the driver raises them: any call before
nvmlInit, NOT_SUPPORTED for NVLink on a PCIe card, INVALID_ARGUMENT past the last link,
GPU_IS_LOST for every call about a GPU that fell off the bus.

Faults are injected through `Faults` (at construction) and `lose()` / `inject_event()` (later);
GPU load (utilisation, memory in use) through `set_load()`: idle until set.
Used by the tests and by `batchsched-agent --fake <machine>` (kind clusters, demos).
"""

from __future__ import annotations

import threading
import uuid as uuidlib
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

import pynvml

from gpu.machines import DGX_A100, DGX_H100, L4_BOX, PCIE_SERVER, T4_BOX, Machine
from gpu.nvml_model import HostNuma
from gpu.topology import MigPartition

__all__ = ["FAKE_MACHINES", "FakeNvml", "Faults", "host_numa"]

FAKE_MACHINES: Final[Mapping[str, Machine]] = {
    "dgx-a100": DGX_A100,
    "dgx-h100": DGX_H100,
    "pcie-server": PCIE_SERVER,
    "l4-box": L4_BOX,
    "t4-box": T4_BOX,
}
# nvmlNvlinkVersion_t of the DGX machines' links: NVLink 3.0 (A100), 4.0 (H100).
_NVLINK_VERSION: Final = {DGX_A100.name: pynvml.NVML_NVLINK_VERSION_3_0, DGX_H100.name: 6}
_MIG_CAPABLE: Final = frozenset({DGX_A100.name, DGX_H100.name})
_MIG_SLOTS: Final = 7
_SWITCHES: Final = 4  # NVSwitch chips in the fake's fabric; links spread over them


@dataclass
class Faults:
    init_error: int | None = None  # nvmlInit fails with this code (e.g. DRIVER_NOT_LOADED)
    lost: set[int] = field(default_factory=set)  # GPUs already off the bus
    failing: dict[str, int] = field(default_factory=dict)  # call name -> code it always raises
    ecc_uncorrected: dict[int, int] = field(default_factory=dict)  # by GPU index
    mig: dict[int, tuple[MigPartition, ...]] = field(default_factory=dict)  # MIG-enabled GPUs


@dataclass(frozen=True, slots=True)
class _Handle:
    index: int


@dataclass(frozen=True, slots=True)
class _MigHandle:
    parent: int
    name: str


@dataclass(frozen=True, slots=True)
class _Pci:
    busId: str


@dataclass(frozen=True, slots=True)
class _Memory:
    total: int
    free: int
    used: int


@dataclass(frozen=True, slots=True)
class _Utilization:
    gpu: int
    memory: int


@dataclass(frozen=True, slots=True)
class _Event:
    device: object
    eventType: int
    eventData: int
    gpuInstanceId: int = 0xFFFFFFFF
    computeInstanceId: int = 0xFFFFFFFF


def _fail(code: int) -> pynvml.NVMLError:
    return pynvml.NVMLError(code)  # pynvml maps the code to its subclass


def host_numa(machine: Machine) -> tuple[HostNuma, ...]:
    """The machine's NUMA nodes as sysfs would describe them (local distance 10, remote 20)."""
    count = len(machine.numa)
    return tuple(
        HostNuma(
            i,
            socket,
            tuple(cpu for r in ranges for cpu in r),
            memory,
            {j: 10 if i == j else 20 for j in range(count)},
        )
        for i, (socket, ranges, memory) in enumerate(machine.numa)
    )


class FakeNvml:
    """One machine's NVML. Thread-safe where the agent needs it (events wait in a thread)."""

    def __init__(
        self, machine: Machine, faults: Faults | None = None, driver: str = "550.54.15"
    ) -> None:
        self.machine = machine
        self.faults = faults or Faults()
        self.driver = driver
        self.initialized = False
        self.calls: list[str] = []
        self._events: deque[_Event] = deque()
        self._registered: set[int] = set()
        self._wakeup = threading.Condition()
        self._load: dict[int, tuple[int, int]] = {}  # index -> (utilisation %, MiB in use)
        # What the driver keeps for itself on each GPU: version 1 of the memory call counts it
        # as used (615 MiB on an idle H200, driver 580), version 2 reports it apart.
        self.reserved_mib = 0

    # Faults injected while running

    def lose(self, index: int) -> None:
        """GPU `index` falls off the bus: every later call about it raises GPU_IS_LOST."""
        self.faults.lost.add(index)

    def inject_event(self, index: int, event_type: int, data: int = 0) -> None:
        """Deliver an event (e.g. an XID) to an event set the GPU is registered with."""
        with self._wakeup:
            if index in self._registered:
                self._events.append(_Event(_Handle(index), event_type, data))
                self._wakeup.notify_all()

    def set_load(self, index: int, utilization_pct: int, memory_used_mib: int) -> None:
        """What NVML reports for GPU `index` from now on (a job started or ended there)."""
        self._load[index] = (utilization_pct, memory_used_mib)

    def uuid_of(self, index: int) -> str:
        name = f"{self.machine.name}/{index}"
        return f"GPU-{uuidlib.uuid5(uuidlib.NAMESPACE_URL, name)}"

    # Plumbing shared by every call

    def _enter(self, call: str) -> None:
        self.calls.append(call)
        if call in self.faults.failing:
            raise _fail(self.faults.failing[call])
        if not self.initialized:
            raise _fail(pynvml.NVML_ERROR_UNINITIALIZED)

    def _gpu(self, call: str, handle: object) -> int:
        self._enter(call)
        if isinstance(handle, _MigHandle):
            index = handle.parent
        elif isinstance(handle, _Handle) and 0 <= handle.index < self.machine.gpu_count:
            index = handle.index
        else:
            raise _fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if index in self.faults.lost:
            raise _fail(pynvml.NVML_ERROR_GPU_IS_LOST)
        return index

    # Library

    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        if self.faults.init_error is not None:
            raise _fail(self.faults.init_error)
        self.initialized = True

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.initialized = False

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return self.driver

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return self.machine.gpu_count

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object:
        return _Handle(self._gpu("nvmlDeviceGetHandleByIndex", _Handle(index)))

    # One GPU

    def nvmlDeviceGetUUID(self, handle: object) -> str:
        return self.uuid_of(self._gpu("nvmlDeviceGetUUID", handle))

    def nvmlDeviceGetName(self, handle: object) -> str:
        self._gpu("nvmlDeviceGetName", handle)
        name = " ".join(self.machine.product.split("-"))
        return f"{name} MIG {handle.name}" if isinstance(handle, _MigHandle) else name

    def nvmlDeviceGetMemoryInfo(self, handle: object, version: int | None = None) -> _Memory:
        index = self._gpu("nvmlDeviceGetMemoryInfo", handle)
        mib = 1024 * 1024
        total = self.machine.gpu_memory_mib * mib
        used = self._load.get(index, (0, 0))[1] * mib
        reserved = self.reserved_mib * mib
        if version is None:  # version 1: the driver's reserve is part of `used`
            return _Memory(total, total - used - reserved, used + reserved)
        return _Memory(total, total - used - reserved, used)

    def nvmlDeviceGetUtilizationRates(self, handle: object) -> _Utilization:
        index = self._gpu("nvmlDeviceGetUtilizationRates", handle)
        if isinstance(handle, _MigHandle):  # the driver does not report it per MIG device
            raise _fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return _Utilization(self._load.get(index, (0, 0))[0], 0)

    def nvmlDeviceGetPciInfo(self, handle: object) -> _Pci:
        return _Pci(self.machine.gpu_bus[self._gpu("nvmlDeviceGetPciInfo", handle)])

    def nvmlDeviceGetNumaNodeId(self, handle: object) -> int:
        return self.machine.gpu_numa[self._gpu("nvmlDeviceGetNumaNodeId", handle)]

    def nvmlDeviceGetCpuAffinity(self, handle: object, size: int) -> list[int]:
        index = self._gpu("nvmlDeviceGetCpuAffinity", handle)
        words = [0] * size
        for cpu in host_numa(self.machine)[self.machine.gpu_numa[index]].cpus:
            if cpu < size * 64:
                words[cpu // 64] |= 1 << (cpu % 64)
        return words

    def nvmlDeviceGetTotalEccErrors(
        self, handle: object, error_type: int, counter_type: int
    ) -> int:
        index = self._gpu("nvmlDeviceGetTotalEccErrors", handle)
        if error_type != pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED:
            return 0
        return self.faults.ecc_uncorrected.get(index, 0)

    # NVLink: DGX machines link every GPU to the NVSwitches; PCIe cards have none.

    def _link(self, call: str, handle: object, link: int) -> int:
        index = self._gpu(call, handle)
        fabric = self.machine.nvswitch
        if fabric is None:
            raise _fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < fabric.nvlinks:
            raise _fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return index

    def nvmlDeviceGetNvLinkState(self, handle: object, link: int) -> int:
        self._link("nvmlDeviceGetNvLinkState", handle, link)
        return int(pynvml.NVML_FEATURE_ENABLED)

    def nvmlDeviceGetNvLinkVersion(self, handle: object, link: int) -> int:
        self._link("nvmlDeviceGetNvLinkVersion", handle, link)
        return int(_NVLINK_VERSION.get(self.machine.name, pynvml.NVML_NVLINK_VERSION_INVALID))

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: object, link: int) -> int:
        self._link("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
        return int(pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH)

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: object, link: int) -> _Pci:
        self._link("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
        return _Pci(f"00000000:{0xE0 + link % _SWITCHES:02X}:00.0")

    def nvmlDeviceGetTopologyCommonAncestor(self, a: object, b: object) -> int:
        i = self._gpu("nvmlDeviceGetTopologyCommonAncestor", a)
        j = self._gpu("nvmlDeviceGetTopologyCommonAncestor", b)
        m = self.machine
        if i == j:
            return int(pynvml.NVML_TOPOLOGY_INTERNAL)
        if m.numa[m.gpu_numa[i]][0] != m.numa[m.gpu_numa[j]][0]:
            return int(pynvml.NVML_TOPOLOGY_SYSTEM)
        if m.gpu_switch[i] is None or m.gpu_switch[j] is None:
            return int(pynvml.NVML_TOPOLOGY_HOSTBRIDGE)
        if m.gpu_switch[i] == m.gpu_switch[j]:
            return int(pynvml.NVML_TOPOLOGY_SINGLE)
        return int(pynvml.NVML_TOPOLOGY_MULTIPLE)

    # MIG: A100 and H100 only; slots hold the configured instances in profile order.

    def _mig_capable(self, call: str, handle: object) -> int:
        index = self._gpu(call, handle)
        if self.machine.name not in _MIG_CAPABLE:
            raise _fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return index

    def nvmlDeviceGetMigMode(self, handle: object) -> list[int]:
        index = self._mig_capable("nvmlDeviceGetMigMode", handle)
        mode = int(index in self.faults.mig)
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: object) -> int:
        index = self._mig_capable("nvmlDeviceGetMaxMigDeviceCount", handle)
        return _MIG_SLOTS if index in self.faults.mig else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: object, slot: int) -> object:
        index = self._mig_capable("nvmlDeviceGetMigDeviceHandleByIndex", handle)
        names = [p.profile for p in self.faults.mig.get(index, ()) for _ in range(p.count)]
        if not 0 <= slot < _MIG_SLOTS:
            raise _fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if slot >= len(names):
            raise _fail(pynvml.NVML_ERROR_NOT_FOUND)
        return _MigHandle(index, names[slot])

    # Events

    def nvmlEventSetCreate(self) -> object:
        self._enter("nvmlEventSetCreate")
        return object()

    def nvmlDeviceRegisterEvents(self, handle: object, types: int, events: object) -> None:
        index = self._gpu("nvmlDeviceRegisterEvents", handle)
        with self._wakeup:
            self._registered.add(index)

    def nvmlEventSetWait_v2(self, events: object, timeout_ms: int) -> _Event:
        self._enter("nvmlEventSetWait_v2")
        with self._wakeup:
            if not self._events:
                self._wakeup.wait(timeout_ms / 1000)
            if not self._events:
                raise _fail(pynvml.NVML_ERROR_TIMEOUT)
            return self._events.popleft()

    def nvmlEventSetFree(self, events: object) -> None:
        self._enter("nvmlEventSetFree")

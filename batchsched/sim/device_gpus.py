"""The cluster's GPUs that are Dynamic Resource Allocation devices, for the run's metrics.

A GPU here is a device of the DeviceClass the run names (`gpu.nvidia.com` unless told
otherwise, the class NVIDIA's driver installs for whole GPUs) that some node reaches; it is
allocated while a claim holds it (seen or assumed, admin access aside, as `DraState.in_use`
counts it). Counts are kept per node and redone only for the node a pod with claims was placed
on or left; devices several nodes reach are counted apart and redone each time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from batchsched.dra.allocator import AllocationError, Matcher
from batchsched.dra.device import Device, DeviceId
from batchsched.dra.objects import Choice
from batchsched.dra.state import DraState
from batchsched.snapshot import NodeInfo
from gpu.topology import MILLI_PER_GPU

_SHARED: Final = ""  # the bucket of devices more than one node reaches


class DeviceGpus:
    def __init__(self, dra: DraState, nodes: Iterable[NodeInfo], device_class: str) -> None:
        self.device_class = device_class
        self._in_use = dra.in_use
        reach: dict[DeviceId, list[str]] = {}
        matcher = Matcher(dra.classes)
        choice = Choice(name="gpu", device_class=device_class)
        for info in nodes:
            for device in dra.devices_for(info.name, info.node.labels):
                if device.id in reach or _is_gpu(matcher, choice, device):
                    reach.setdefault(device.id, []).append(info.name)
        self._devices: dict[str, list[DeviceId]] = {}
        for device_id, names in reach.items():
            bucket = names[0] if len(names) == 1 else _SHARED
            self._devices.setdefault(bucket, []).append(device_id)
        self.total = len(reach)
        self._held = {bucket: self._count(bucket) for bucket in self._devices}
        self.held = sum(self._held.values())

    def _count(self, bucket: str) -> int:
        in_use = self._in_use
        return sum(1 for d in self._devices.get(bucket, ()) if d in in_use)

    def recount(self, node_name: str) -> int:
        """Count the node's GPUs (and the shared ones) again; returns the change in held."""
        before = self.held
        for bucket in (node_name, _SHARED):
            if bucket in self._devices:
                now = self._count(bucket)
                self.held += now - self._held[bucket]
                self._held[bucket] = now
        return self.held - before

    def sorted_free(self, node_name: str) -> tuple[int, ...] | None:
        """The node's own GPU devices as the fragmentation measure reads a ledger: free
        milli-GPU per GPU, largest first; None for a node without GPU devices of its own."""
        devices = self._devices.get(node_name) if node_name else None
        if not devices:
            return None
        held = self._held[node_name]
        return (MILLI_PER_GPU,) * (len(devices) - held) + (0,) * held


def _is_gpu(matcher: Matcher, choice: Choice, device: Device) -> bool:
    try:
        return matcher.matches(choice, device)
    except AllocationError:
        return False  # no such class, or its selector fails: no GPUs of it

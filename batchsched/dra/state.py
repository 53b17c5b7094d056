"""What the cluster's Dynamic Resource Allocation objects say, kept up to date by watch events,
with the allocations this scheduler made but the API has not shown back yet.

A device is in use while a claim's allocation (seen or assumed) holds it without admin
access. Assumed allocations are undo-logged inside the snapshot's trials, so a gang whose
members cannot all be placed gives back every device its trial took.
Only the highest generation of a pool counts; a pool whose generation is not complete yet
(fewer slices than resourceSliceCount) offers none of its devices, as in kube-scheduler.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from itertools import count
from typing import Final

from batchsched.dra.device import Device, DeviceId
from batchsched.dra.objects import Allocation, DeviceClass, ResourceClaim, ResourceSlice


@dataclass(slots=True)
class _Pool:
    slices: dict[str, ResourceSlice] = field(default_factory=dict)

    def current(self) -> list[ResourceSlice]:
        """The slices of the newest generation, or none while that generation is incomplete."""
        if not self.slices:
            return []
        newest = max(s.generation for s in self.slices.values())
        found = [s for s in self.slices.values() if s.generation == newest]
        if len(found) < max(s.slice_count for s in found):
            return []
        return sorted(found, key=lambda s: s.name)


# Versions and epochs come from one counter for every DraState, so a cache keyed by them
# cannot mistake one state (a rebuilt snapshot, a what-if) for another.
_STAMPS: Final = count(1)
RELEASED: Final = "released"


class DraState:
    def __init__(self) -> None:
        self.classes: dict[str, DeviceClass] = {}
        self.claims: dict[str, ResourceClaim] = {}
        self._slices: dict[str, ResourceSlice] = {}
        self._pools: dict[tuple[str, str], _Pool] = {}
        self._local: dict[str, tuple[Device, ...]] = {}  # node name -> its devices
        # What each pool's current generation gives: devices per node, and shared slices.
        self._contributions: dict[
            tuple[str, str], tuple[dict[str, tuple[Device, ...]], tuple[ResourceSlice, ...]]
        ] = {}
        self._shared: tuple[ResourceSlice, ...] = ()  # slices reaching several nodes
        self.everywhere: frozenset[DeviceId] = frozenset()  # devices of allNodes slices
        self._in_use: dict[DeviceId, str] = {}  # device -> the claim holding it
        # Allocations made here and not yet seen in a claim: claim key -> (allocation, pod uid).
        self.assumed: dict[str, tuple[Allocation, str]] = {}
        # Undo log: (key, previous assumed allocation) or (key, RELEASED) for a release.
        self._log: list[tuple[str, tuple[Allocation, str] | str | None]] = []
        self._released: set[str] = set()  # claims whose devices an eviction what-if freed
        self._by_consumer: dict[str, set[str]] = {}  # pod uid -> claims reserved for it
        self._marks: list[int] = []
        self.version = next(_STAMPS)  # new on every change of slices or classes
        # Bumped when a device of the node (or, for "", of a shared slice) is taken or given
        # back: a node's allocation search can be reused until its generation moves.
        self._generations: dict[str, int] = {}
        self._node_of: dict[DeviceId, str] = {}
        self._epoch = next(_STAMPS)  # new when slices, classes or shared devices change

    # Watch events (never inside a trial).

    def load(
        self,
        classes: Iterable[DeviceClass],
        slices: Iterable[ResourceSlice],
        claims: Iterable[ResourceClaim],
    ) -> None:
        """Objects read from files (`place`, `simulate`), as if each had been watched."""
        for device_class in classes:
            self.set_class(device_class)
        for resource_slice in slices:
            self.set_slice(resource_slice)
        for claim in claims:
            self.set_claim(claim)

    def set_class(self, device_class: DeviceClass) -> None:
        self.classes[device_class.name] = device_class
        self.version = next(_STAMPS)
        self._epoch = next(_STAMPS)

    def remove_class(self, name: str) -> None:
        self.classes.pop(name, None)
        self.version = next(_STAMPS)
        self._epoch = next(_STAMPS)

    def set_slice(self, resource_slice: ResourceSlice) -> None:
        old = self._slices.get(resource_slice.name)
        if old is not None and (old.driver, old.pool) != (
            resource_slice.driver,
            resource_slice.pool,
        ):
            self.remove_slice(old.name)
        self._slices[resource_slice.name] = resource_slice
        key = (resource_slice.driver, resource_slice.pool)
        self._pools.setdefault(key, _Pool()).slices[resource_slice.name] = resource_slice
        self._reindex(key)

    def remove_slice(self, name: str) -> None:
        old = self._slices.pop(name, None)
        if old is None:
            return
        key = (old.driver, old.pool)
        pool = self._pools[key]
        del pool.slices[name]
        if not pool.slices:
            del self._pools[key]
        self._reindex(key)

    def _reindex(self, key: tuple[str, str]) -> None:
        """Index one pool's devices again, and the nodes it reaches (a pool changes alone)."""
        local: dict[str, list[Device]] = {}
        shared: list[ResourceSlice] = []
        pool = self._pools.get(key)
        for current in pool.current() if pool is not None else ():
            if current.node_name:
                local.setdefault(current.node_name, []).extend(current.devices)
            else:
                shared.append(current)
        old_local, old_shared = self._contributions.pop(key, ({}, ()))
        if local or shared:
            self._contributions[key] = ({n: tuple(d) for n, d in local.items()}, tuple(shared))
        for node in old_local.keys() | local.keys():
            self._index_node(node)
        if old_shared or shared:
            every = [s for k in sorted(self._contributions) for s in self._contributions[k][1]]
            self._shared = tuple(every)
            self.everywhere = frozenset(d.id for s in every if s.all_nodes for d in s.devices)
        self.version = next(_STAMPS)
        self._epoch = next(_STAMPS)

    def _index_node(self, node: str) -> None:
        for device in self._local.get(node, ()):
            self._node_of.pop(device.id, None)
        pools = sorted(k for k, (local, _) in self._contributions.items() if node in local)
        devices = tuple(d for k in pools for d in self._contributions[k][0][node])
        if devices:
            self._local[node] = devices
        else:
            self._local.pop(node, None)
        for device in devices:
            self._node_of[device.id] = node

    def set_claim(self, claim: ResourceClaim) -> None:
        old = self.claims.get(claim.key)
        if old is not None and old.uid != claim.uid:
            self.remove_claim(old.key)
        if old is not None:
            self._hold(old.allocation, old.key, -1)
            self._index_consumers(old, -1)
        self.claims[claim.key] = claim
        self._index_consumers(claim, 1)
        if claim.allocation is not None:
            # The API shows an allocation: ours landed (or another scheduler's did).
            assumed = self.assumed.pop(claim.key, None)
            if assumed is not None:
                self._hold(assumed[0], claim.key, -1)
        self._hold(claim.allocation, claim.key, 1)

    def remove_claim(self, key: str) -> None:
        old = self.claims.pop(key, None)
        if old is not None:
            self._hold(old.allocation, key, -1)
            self._index_consumers(old, -1)
        assumed = self.assumed.pop(key, None)
        if assumed is not None:
            self._hold(assumed[0], key, -1)

    def _index_consumers(self, claim: ResourceClaim, sign: int) -> None:
        for consumer in claim.reserved_for:
            if consumer.resource != "pods":
                continue
            keys = self._by_consumer.setdefault(consumer.uid, set())
            if sign > 0:
                keys.add(claim.key)
            else:
                keys.discard(claim.key)
                if not keys:
                    del self._by_consumer[consumer.uid]

    # What a cycle reads.

    def devices_for(self, node_name: str, labels: Mapping[str, str]) -> tuple[Device, ...]:
        """Every device of a current pool that `node_name` can reach, in a stable order."""
        local = self._local.get(node_name, ())
        if not self._shared:
            return local
        reach = dict(labels)
        shared = [d for s in self._shared if s.reaches(node_name, reach) for d in s.devices]
        return local + tuple(shared)

    def generation(self, node_name: str) -> int:
        """Changes whenever what `node_name` can be allocated may have changed."""
        return (self._epoch << 32) | self._generations.get(node_name, 0)

    def all_devices(self) -> list[Device]:
        """Every device of a current pool, once."""
        found = [d for devices in self._local.values() for d in devices]
        return found + [d for s in self._shared for d in s.devices]

    def holder(self, device: DeviceId) -> str | None:
        """The claim holding `device`, or None when it is free."""
        return self._in_use.get(device)

    @property
    def in_use(self) -> Mapping[DeviceId, str]:
        return self._in_use

    def claim(self, key: str) -> ResourceClaim | None:
        """The claim as the API shows it, with this scheduler's pending allocation on it."""
        claim = self.claims.get(key)
        assumed = self.assumed.get(key)
        if claim is None or assumed is None or claim.allocation is not None:
            return claim
        return _with_allocation(claim, assumed[0])

    # Reserve and Unreserve (undo-logged inside a trial).

    def assume(self, key: str, allocation: Allocation, pod_uid: str) -> None:
        if key in self.assumed:
            raise ValueError(f"claim {key} already has an allocation pending")
        self._set_assumed(key, (allocation, pod_uid))

    def forget(self, key: str, pod_uid: str) -> None:
        """Give back an allocation `pod_uid` made and that the API has not shown yet."""
        found = self.assumed.get(key)
        if found is not None and found[1] == pod_uid:
            self._set_assumed(key, None)

    def _set_assumed(self, key: str, value: tuple[Allocation, str] | None) -> None:
        previous = self.assumed.pop(key, None)
        if previous is not None:
            self._hold(previous[0], key, -1)
        if value is not None:
            self.assumed[key] = value
            self._hold(value[0], key, 1)
        if self._marks:
            self._log.append((key, previous))

    def release_consumer(self, pod_uid: str) -> None:
        """Inside a trial: the pod is evicted, so every claim only it uses gives its devices
        back (the resourceclaim controller deallocates such a claim once the pod is gone)."""
        if not self._marks:
            raise RuntimeError("devices are released only inside a trial (a what-if)")
        keys = set(self._by_consumer.get(pod_uid, ()))
        keys.update(k for k, (_, uid) in self.assumed.items() if uid == pod_uid)
        for key in sorted(keys - self._released):
            claim = self.claims.get(key)
            users = {c.uid for c in claim.reserved_for} if claim is not None else set()
            if users - {pod_uid}:
                continue  # shared with a pod that stays
            allocation = claim.allocation if claim is not None else None
            if allocation is None and key in self.assumed:
                allocation = self.assumed[key][0]
            self._hold(allocation, key, -1)
            self._released.add(key)
            self._log.append((key, RELEASED))

    def begin(self) -> None:
        self._marks.append(len(self._log))

    def end(self, keep: bool) -> None:
        mark = self._marks.pop()
        if keep:
            if not self._marks:
                del self._log[mark:]
                for key in self._released:  # releases are what-ifs: none outlives its trial
                    self._hold(self._allocation_of(key), key, 1)
                self._released.clear()
            return
        while len(self._log) > mark:
            key, previous = self._log.pop()
            if previous == RELEASED:
                self._released.discard(key)
                self._hold(self._allocation_of(key), key, 1)
                continue
            assert not isinstance(previous, str)
            current = self.assumed.pop(key, None)
            if current is not None:
                self._hold(current[0], key, -1)
            if previous is not None:
                self.assumed[key] = previous
                self._hold(previous[0], key, 1)

    def _allocation_of(self, key: str) -> Allocation | None:
        claim = self.claims.get(key)
        if claim is not None and claim.allocation is not None:
            return claim.allocation
        assumed = self.assumed.get(key)
        return assumed[0] if assumed is not None else None

    def _hold(self, allocation: Allocation | None, key: str, sign: int) -> None:
        if allocation is None:
            return
        gens, node_of = self._generations, self._node_of
        for result in allocation.devices:
            if result.admin_access:
                continue
            node = node_of.get(result.id)
            if node is None:
                self._epoch = next(_STAMPS)
            else:
                gens[node] = gens.get(node, 0) + 1
            if sign > 0:
                self._in_use[result.id] = key
            elif self._in_use.get(result.id) == key:
                del self._in_use[result.id]


def _with_allocation(claim: ResourceClaim, allocation: Allocation) -> ResourceClaim:
    return replace(claim, allocation=allocation)

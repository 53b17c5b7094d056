"""Purely computational: the devices of one node that a pod's unallocated claims get.

Semantics follow kube-scheduler's structured allocator: every request of every claim gets
distinct devices; a device matches a choice when all CEL selectors of its DeviceClass and of
the choice hold; `firstAvailable` alternatives are tried in order; allocationMode All takes
every matching device the node reaches and needs all of them free; matchAttribute constraints
make the devices of the requests they cover agree on one attribute; admin access may take
devices in use and holds none. The search backtracks over candidate sets like kube's, best
set first (batchsched.dra.sets), so the answer is feasible exactly when kube's is, within a
step budget no realistic claim reaches.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from batchsched.dra.cel import CelError, CelEvalError, compile_selector
from batchsched.dra.device import AttributeValue, Device, DeviceId
from batchsched.dra.objects import (
    ALL,
    AllocatedDevice,
    Allocation,
    Choice,
    DeviceClass,
    DeviceRequest,
    OpaqueConfig,
    ResourceClaim,
)
from batchsched.dra.sets import DeviceSet, ranked_sets
from batchsched.model.selectors import IN, NodeSelectorTerm, Requirement
from gpu.topology import NodeTopology

# Candidate sets tried per node before the search gives up on it.
MAX_STEPS: Final = 2000


class AllocationError(ValueError):
    """A claim no node can satisfy as written: unknown class, bad or failing CEL."""


@dataclass(frozen=True, slots=True)
class NodeDevices:
    node_name: str
    reachable: tuple[Device, ...]  # every device of a current pool the node reaches
    in_use: Mapping[DeviceId, str]  # device -> the claim holding it
    topology: NodeTopology | None = None
    everywhere: frozenset[DeviceId] = frozenset()  # devices of allNodes slices


@dataclass(frozen=True, slots=True)
class Plan:
    """Allocations for the pod's unallocated claims on one node, and their worst set quality
    (the node's score: 0 when no request asked for more than one device)."""

    allocations: tuple[tuple[str, Allocation], ...]
    quality: int
    devices: int


class Matcher:
    """Selector verdicts per device, cached until the slices or classes change."""

    def __init__(self, classes: Mapping[str, DeviceClass]) -> None:
        self._classes = classes
        self._verdicts: dict[tuple[str, DeviceId], bool] = {}

    def reset(self, classes: Mapping[str, DeviceClass]) -> None:
        self._classes = classes
        self._verdicts.clear()

    def device_class(self, name: str) -> DeviceClass:
        found = self._classes.get(name)
        if found is None:
            raise AllocationError(f"device class {name} does not exist")
        return found

    def matches(self, choice: Choice, device: Device) -> bool:
        for expression in (*self.device_class(choice.device_class).selectors, *choice.selectors):
            if not self._holds(expression, device):
                return False
        return True

    def _holds(self, expression: str, device: Device) -> bool:
        key = (expression, device.id)
        found = self._verdicts.get(key)
        if found is None:
            try:
                found = compile_selector(expression).matches(device)
            except (CelError, CelEvalError) as err:
                raise AllocationError(str(err)) from err
            self._verdicts[key] = found
        return found


@dataclass(slots=True)
class _Search:
    node: NodeDevices
    matcher: Matcher
    steps: int = 0
    used: set[DeviceId] = field(default_factory=set)
    picks: list[tuple[str, Choice, DeviceSet]] = field(default_factory=list)


def allocate(claims: Sequence[ResourceClaim], node: NodeDevices, matcher: Matcher) -> Plan | None:
    """Devices for every request of `claims` on `node`, or None when they do not fit.
    Raises AllocationError for a claim that cannot be allocated anywhere."""
    work = [(claim, request) for claim in claims for request in claim.requests]
    search = _Search(node, matcher)
    if not _fill(search, work, 0, {}):
        return None
    return _plan(claims, search)


def _fill(
    search: _Search,
    work: Sequence[tuple[ResourceClaim, DeviceRequest]],
    at: int,
    fixed: dict[tuple[str, str], AttributeValue],
) -> bool:
    if at == len(work):
        return True
    claim, request = work[at]
    for choice in request.choices:
        for chosen in _candidates(search, claim, choice, fixed):
            search.steps += 1
            if search.steps > MAX_STEPS:
                return False
            pinned = _pin(claim, choice, chosen, fixed)
            if pinned is None:
                continue
            search.used.update(d.id for d in chosen.devices)
            search.picks.append((claim.key, choice, chosen))
            if _fill(search, work, at + 1, pinned):
                return True
            search.picks.pop()
            search.used.difference_update(d.id for d in chosen.devices)
        if search.steps > MAX_STEPS:
            return False
    return False


def _candidates(
    search: _Search,
    claim: ResourceClaim,
    choice: Choice,
    fixed: Mapping[tuple[str, str], AttributeValue],
) -> Iterator[DeviceSet]:
    node, used = search.node, search.used
    matching = [d for d in node.reachable if search.matcher.matches(choice, d)]
    if not choice.admin_access:
        matching_free = [d for d in matching if d.id not in node.in_use and d.id not in used]
    else:
        matching_free = [d for d in matching if d.id not in used]
    usable = [d for d in matching_free if _agrees(claim, choice, d, fixed)]
    if choice.mode == ALL:
        # Every matching device, all free: one set or none (kube refuses an empty one too).
        if matching and len(usable) == len(matching):
            yield DeviceSet(tuple(usable), 0)
        return
    yield from ranked_sets(usable, choice.count, node.topology)


def _agrees(
    claim: ResourceClaim,
    choice: Choice,
    device: Device,
    fixed: Mapping[tuple[str, str], AttributeValue],
) -> bool:
    for constraint in claim.constraints:
        if not constraint.covers(choice.name):
            continue
        value = device.attributes.get(constraint.attribute)
        if value is None:
            return False
        pinned = fixed.get((claim.key, constraint.attribute))
        if pinned is not None and pinned != value:
            return False
    return True


def _pin(
    claim: ResourceClaim,
    choice: Choice,
    chosen: DeviceSet,
    fixed: dict[tuple[str, str], AttributeValue],
) -> dict[tuple[str, str], AttributeValue] | None:
    """`fixed` with the constrained attributes of `chosen`, or None when its devices differ."""
    pinned = fixed
    for constraint in claim.constraints:
        if not constraint.covers(choice.name):
            continue
        values = {d.attributes.get(constraint.attribute) for d in chosen.devices}
        if len(values) != 1:
            return None
        value = values.pop()
        assert value is not None  # _agrees kept only devices that have it
        if pinned is fixed:
            pinned = dict(fixed)
        pinned[(claim.key, constraint.attribute)] = value
    return pinned


def _plan(claims: Sequence[ResourceClaim], search: _Search) -> Plan:
    node = search.node
    quality: int | None = None
    allocations = []
    total = 0
    for claim in claims:
        results: list[AllocatedDevice] = []
        local = False
        for key, choice, chosen in search.picks:
            if key != claim.key:
                continue
            if len(chosen.devices) > 1:
                quality = chosen.quality if quality is None else min(quality, chosen.quality)
            for device in chosen.devices:
                local = local or device.id not in node.everywhere
                results.append(
                    AllocatedDevice(
                        choice.name, device.driver, device.pool, device.name, choice.admin_access
                    )
                )
        total += len(results)
        pin = (NodeSelectorTerm((), (Requirement("metadata.name", IN, (node.node_name,)),)),)
        allocation = Allocation(tuple(results), pin if local else (), _configs(claim, search))
        allocations.append((claim.key, allocation))
    return Plan(tuple(allocations), quality or 0, total)


def _configs(claim: ResourceClaim, search: _Search) -> tuple[tuple[str, OpaqueConfig], ...]:
    """The class configuration of each request's class, then the claim's own (kube's order)."""
    found: list[tuple[str, OpaqueConfig]] = []
    for key, choice, _ in search.picks:
        if key != claim.key:
            continue
        for config in search.matcher.device_class(choice.device_class).config:
            scoped = OpaqueConfig(config.driver, config.parameters_json, (choice.name,))
            found.append(("FromClass", scoped))
    found.extend(("FromClaim", config) for config in claim.config)
    return tuple(found)

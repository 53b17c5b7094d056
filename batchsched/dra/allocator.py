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

from batchsched.dra.cel_values import CelError, CelEvalError
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
# Selector verdicts remembered (expression, device) before starting over.
MAX_VERDICTS: Final = 1_000_000


class AllocationError(ValueError):
    """A claim no node can satisfy as written: unknown class, bad or failing CEL."""


@dataclass(frozen=True, slots=True)
class NodeDevices:
    node_name: str
    reachable: tuple[Device, ...]  # every device of a current pool the node reaches
    in_use: Mapping[DeviceId, str]  # device -> the claim holding it
    topology: NodeTopology | None = None
    everywhere: frozenset[DeviceId] = frozenset()  # devices of allNodes slices
    generation: int = 0  # the node's (NodeInfo.generation): its labels decide what it reaches


Pick = tuple[int, Choice, DeviceSet]  # (index of the claim, the choice, its devices)


@dataclass(frozen=True, slots=True)
class Found:
    """Devices for the pod's unallocated claims on one node, and their worst set quality
    (the node's score: 0 when no request asked for more than one device). It depends only
    on what the claims ask for, not on their names, so pods that ask alike share it."""

    picks: tuple[Pick, ...]
    quality: int
    devices: int


class Matcher:
    """Selector verdicts per device, cached until the slices or classes change."""

    def __init__(self, classes: Mapping[str, DeviceClass]) -> None:
        self._classes = classes
        # Verdicts outlive slice and class changes: a device whose slice is republished
        # unchanged is the same device (its attributes are the verdict's only input).
        self._verdicts: dict[tuple[str, DeviceId], tuple[Device, bool]] = {}
        # (class, selectors, node) -> (the node's generation then, its matching devices): a
        # relabelled node may reach other node-selector slices.
        self._matching: dict[tuple[str, tuple[str, ...], str], tuple[int, tuple[Device, ...]]] = {}

    def reset(self, classes: Mapping[str, DeviceClass]) -> None:
        """Slices or classes changed: which devices match which choice must be redone."""
        self._classes = classes
        self._matching.clear()
        if len(self._verdicts) > MAX_VERDICTS:
            self._verdicts.clear()

    def matching(self, choice: Choice, node: NodeDevices) -> tuple[Device, ...]:
        """The devices `node` reaches that match `choice`, whether free or not."""
        key = (choice.device_class, choice.selectors, node.node_name)
        cached = self._matching.get(key)
        if cached is not None and cached[0] == node.generation:
            return cached[1]
        found = tuple(d for d in node.reachable if self.matches(choice, d))
        self._matching[key] = (node.generation, found)
        return found

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
        if found is not None and found[0] is device:
            return found[1]
        # Imported on a verdict's first need, not at the top: the CEL engine (celpy, lark) costs
        # ~0.1 s of every start-up (issue #17) and most clusters have no DRA selectors.
        from batchsched.dra.cel import compile_selector

        try:
            verdict = compile_selector(expression).matches(device)
        except (CelError, CelEvalError) as err:
            raise AllocationError(str(err)) from err
        self._verdicts[key] = (device, verdict)
        return verdict


@dataclass(slots=True)
class _Search:
    node: NodeDevices
    matcher: Matcher
    steps: int = 0
    used: set[DeviceId] = field(default_factory=set)
    picks: list[Pick] = field(default_factory=list)


Work = Sequence[tuple[int, ResourceClaim, DeviceRequest]]


def search(claims: Sequence[ResourceClaim], node: NodeDevices, matcher: Matcher) -> Found | None:
    """Devices for every request of `claims` on `node`, or None when they do not fit.
    Raises AllocationError for a claim that cannot be allocated anywhere."""
    work = [(i, claim, request) for i, claim in enumerate(claims) for request in claim.requests]
    if not _enough(work, node, matcher):
        return None
    state = _Search(node, matcher)
    if not _fill(state, work, 0, {}):
        return None
    sizes = [len(chosen.devices) for _, _, chosen in state.picks]
    multi = [chosen.quality for _, _, chosen in state.picks if len(chosen.devices) > 1]
    return Found(tuple(state.picks), min(multi, default=0), sum(sizes))


def _enough(work: Work, node: NodeDevices, matcher: Matcher) -> bool:
    """A quick necessary check: each single-choice ExactCount request alone has enough free
    matching devices (most nodes of a busy cluster fail here, without a search)."""
    in_use = node.in_use
    for _, _, request in work:
        if len(request.choices) != 1:
            continue
        choice = request.choices[0]
        if choice.mode == ALL or choice.admin_access:
            continue
        free = 0
        for device in matcher.matching(choice, node):
            if device.id not in in_use:
                free += 1
        if free < choice.count:
            return False
    return True


def _fill(
    search: _Search, work: Work, at: int, fixed: dict[tuple[str, int], AttributeValue]
) -> bool:
    if at == len(work):
        return True
    index, claim, request = work[at]
    for choice in request.choices:
        for chosen in _candidates(search, claim, choice, fixed):
            search.steps += 1
            if search.steps > MAX_STEPS:
                return False
            pinned = _pin(claim, choice, chosen, fixed)
            if pinned is None:
                continue
            search.used.update(d.id for d in chosen.devices)
            search.picks.append((index, choice, chosen))
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
    fixed: Mapping[tuple[str, int], AttributeValue],
) -> Iterator[DeviceSet]:
    node, used = search.node, search.used
    matching = search.matcher.matching(choice, node)
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
    fixed: Mapping[tuple[str, int], AttributeValue],
) -> bool:
    for index, constraint in enumerate(claim.constraints):
        if not constraint.covers(choice.name):
            continue
        value = device.attributes.get(constraint.attribute)
        if value is None:
            return False
        pinned = fixed.get((claim.key, index))
        if pinned is not None and pinned != value:
            return False
    return True


def _pin(
    claim: ResourceClaim,
    choice: Choice,
    chosen: DeviceSet,
    fixed: dict[tuple[str, int], AttributeValue],
) -> dict[tuple[str, int], AttributeValue] | None:
    """`fixed` with the constrained attributes of `chosen`, or None when its devices differ."""
    pinned = fixed
    for index, constraint in enumerate(claim.constraints):
        if not constraint.covers(choice.name):
            continue
        values = {d.attributes.get(constraint.attribute) for d in chosen.devices}
        if len(values) != 1:
            return None
        value = values.pop()
        assert value is not None  # _agrees kept only devices that have it
        if pinned is fixed:
            pinned = dict(fixed)
        pinned[(claim.key, index)] = value
    return pinned


def allocations(
    claims: Sequence[ResourceClaim], node: NodeDevices, found: Found, matcher: Matcher
) -> tuple[tuple[str, Allocation], ...]:
    """What `found` means for each claim: its devices, the node selector (pinned to the node
    unless every device is reachable from all nodes) and the driver configuration."""
    pin = (NodeSelectorTerm((), (Requirement("metadata.name", IN, (node.node_name,)),)),)
    made = []
    for index, claim in enumerate(claims):
        picks = [(choice, chosen) for i, choice, chosen in found.picks if i == index]
        results = tuple(
            AllocatedDevice(choice.name, d.driver, d.pool, d.name, choice.admin_access)
            for choice, chosen in picks
            for d in chosen.devices
        )
        local = any(r.id not in node.everywhere for r in results)
        configs = _configs(claim, [choice for choice, _ in picks], matcher)
        made.append((claim.key, Allocation(results, pin if local else (), configs)))
    return tuple(made)


def _configs(
    claim: ResourceClaim, choices: Sequence[Choice], matcher: Matcher
) -> tuple[tuple[str, OpaqueConfig], ...]:
    """The class configuration of each request's class, then the claim's own (kube's order)."""
    found: list[tuple[str, OpaqueConfig]] = []
    for choice in choices:
        for config in matcher.device_class(choice.device_class).config:
            scoped = OpaqueConfig(config.driver, config.parameters_json, (choice.name,))
            found.append(("FromClass", scoped))
    found.extend(("FromClaim", config) for config in claim.config)
    return tuple(found)

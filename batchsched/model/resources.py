"""Resource vectors in canonical integer units, and the pod's effective request.

All fit and accounting arithmetic happens on integers (millicores, bytes, counts), so there is
no float drift between what a node reports, what pods request and what we subtract.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from batchsched.model.quantity import QuantityError, format_amount, resource_amount

__all__ = [
    "CPU",
    "EPHEMERAL_STORAGE",
    "MEMORY",
    "NVIDIA_GPU",
    "PODS",
    "Resources",
    "pod_requests",
]

CPU: Final = "cpu"
MEMORY: Final = "memory"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"
PODS: Final = "pods"
NVIDIA_GPU: Final = "nvidia.com/gpu"

# Resources with their own attribute, in the order names() reports them.
_STANDARD: Final = (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)
# Resource lists written as text (name -> quantity string, as the API prints them) and
# their vectors: a vector is immutable, so pods asking alike share one.
_PARSED: Final[dict[tuple[tuple[str, object], ...], Resources]] = {}
_PARSED_LIMIT: Final = 4096


@dataclass(frozen=True, slots=True)
class Resources:
    """Amounts in canonical integer units: cpu in millicores, memory/ephemeral-storage in bytes,
    pods and extended resources as counts.

    ``scalar`` holds every other resource (nvidia.com/gpu, hugepages-2Mi, example.com/foo) and
    never stores a zero, so equality means "same amounts" however the value was built.
    """

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    pods: int = 0
    scalar: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Copy ``scalar`` without zeros, so callers can't mutate us and zeros can't break ==."""
        if not self.scalar:  # most vectors: no checks to make
            object.__setattr__(self, "scalar", {})
            return
        clash = sorted(set(self.scalar) & set(_STANDARD))
        if clash:
            raise ValueError(f"standard resources {clash} belong in their own fields, not scalar")
        object.__setattr__(self, "scalar", {k: v for k, v in self.scalar.items() if v != 0})

    def __hash__(self) -> int:
        """Hash by amounts, so equal vectors hash alike despite the dict inside."""
        standard = (self.milli_cpu, self.memory, self.ephemeral_storage, self.pods)
        return hash((standard, frozenset(self.scalar.items())))

    @classmethod
    def parse(cls, mapping: Mapping[str, object] | None, field: str) -> Resources:
        """Build from a Kubernetes dict like ``{"cpu": "500m", "memory": "1Gi"}``.

        ``field`` is the path of the dict in the manifest; every error names
        ``f"{field}.{name}"`` so the user can find the bad line.
        """
        if mapping is None:
            return cls()
        if not isinstance(mapping, Mapping):
            raise QuantityError(field, mapping, "expected a mapping of resource name to quantity")
        items = tuple(mapping.items())
        known = all(type(k) is str and type(v) is str for k, v in items)
        if known and items in _PARSED:  # pods of one Job ask alike: parse each text once
            return _PARSED[items]
        amounts: dict[str, int] = {}
        for name, raw in items:
            amounts[_checked_name(name, field)] = _parse_amount(name, raw, f"{field}.{name}")
        parsed = _from_amounts(amounts)
        if known and len(_PARSED) < _PARSED_LIMIT:
            _PARSED[items] = parsed
        return parsed

    def get(self, name: str) -> int:
        """Amount of one resource; an absent resource is 0."""
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        if name == EPHEMERAL_STORAGE:
            return self.ephemeral_storage
        if name == PODS:
            return self.pods
        return self.scalar.get(name, 0)

    def names(self) -> tuple[str, ...]:
        """Names with non-zero amounts: cpu, memory, ephemeral-storage, pods, then scalar sorted.

        A fixed order keeps messages and test output deterministic.
        """
        standard = tuple(name for name in _STANDARD if self.get(name) != 0)
        return standard + tuple(sorted(self.scalar))

    def __add__(self, other: Resources) -> Resources:
        return _combine(self, other, lambda a, b: a + b)

    def __sub__(self, other: Resources) -> Resources:
        """Difference; may go negative, which is how an over-committed node's "free" reads."""
        return _combine(self, other, lambda a, b: a - b)

    def max_with(self, other: Resources) -> Resources:
        """Per-resource maximum; missing resources count as 0."""
        return _combine(self, other, max)

    def is_zero(self) -> bool:
        """True when every amount is 0 (``scalar`` stores no zeros)."""
        return not (self.milli_cpu or self.memory or self.ephemeral_storage or self.pods) and (
            not self.scalar
        )

    def insufficient(self, free: Resources) -> tuple[str, ...]:
        """Resources this request needs more of than ``free`` holds, in names() order.

        Only resources actually requested (non-zero) are checked, as kube-scheduler's fit
        check does: a pod asking for no GPU is not blocked by a node over-committed on GPUs.
        """
        return tuple(name for name in self.names() if self.get(name) > free.get(name))

    def to_dict(self) -> dict[str, str]:
        """Human-readable amounts for messages, e.g. ``{"cpu": "1500m", "memory": "512Mi"}``."""
        return {name: format_amount(name, self.get(name)) for name in self.names()}


def pod_requests(
    containers: Sequence[Resources],
    init_containers: Sequence[tuple[Resources, bool]],
    overhead: Resources,
) -> Resources:
    """Effective request of a pod, as kube-scheduler computes it.

    App containers run together, so they sum. Init containers run one at a time before them,
    so each only needs to fit on its own, alongside the sidecars (restartable init containers)
    already started, which keep running for the pod's whole life and so also join the
    steady-state sum. The pod needs the larger of the two phases, plus the runtime overhead.
    ``init_containers`` pairs each init container's requests with whether it is a sidecar.
    """
    if not init_containers and overhead.is_zero():
        return containers[0] if len(containers) == 1 else _sum(containers)
    steady = _sum(containers)
    sidecars = Resources()
    init_peak = Resources()
    for request, restartable in init_containers:
        if restartable:
            steady += request
            sidecars += request
            during_init = sidecars
        else:
            during_init = request + sidecars
        init_peak = init_peak.max_with(during_init)
    return steady.max_with(init_peak) + overhead


def _checked_name(name: object, field: str) -> str:
    """A resource name must be a non-empty string (YAML keys can be anything)."""
    if not isinstance(name, str) or not name:
        raise QuantityError(field, name, "resource name must be a non-empty string")
    return name


def _parse_amount(name: str, raw: object, field: str) -> int:
    """Canonical amount of one entry; only str/int/float can be quantities."""
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise QuantityError(field, raw, f"expected a string or number, got {type(raw).__name__}")
    return resource_amount(name, raw, field)


def _from_amounts(amounts: Mapping[str, int]) -> Resources:
    """Build a vector from name -> canonical amount, routing standard names to their fields."""
    return Resources(
        milli_cpu=amounts.get(CPU, 0),
        memory=amounts.get(MEMORY, 0),
        ephemeral_storage=amounts.get(EPHEMERAL_STORAGE, 0),
        pods=amounts.get(PODS, 0),
        scalar={k: v for k, v in amounts.items() if k not in _STANDARD},
    )


def _combine(left: Resources, right: Resources, op: Callable[[int, int], int]) -> Resources:
    """Apply ``op`` per resource over the union of both vectors' names (field by field: this
    runs for every container of every pod the informers parse)."""
    ls, rs = left.scalar, right.scalar
    return Resources(
        op(left.milli_cpu, right.milli_cpu),
        op(left.memory, right.memory),
        op(left.ephemeral_storage, right.ephemeral_storage),
        op(left.pods, right.pods),
        {name: op(ls.get(name, 0), rs.get(name, 0)) for name in ls.keys() | rs.keys()}
        if ls or rs
        else {},
    )


def _sum(vectors: Iterable[Resources]) -> Resources:
    """Sum of vectors; the empty sum is zero."""
    total = Resources()
    for vector in vectors:
        total += vector
    return total

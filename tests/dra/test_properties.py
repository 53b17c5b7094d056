"""Hypothesis: pods with ResourceClaims scheduled one by one through the default profile, some
inside trials that are kept or discarded, on random clusters of node-local, allNodes and
nodeSelector devices.

Invariants: no device is held by two claims and `in_use` is exactly what the allocations
hold; every allocation is reachable from the pod's node and gives each request what it asked
for; a discarded trial restores `in_use` exactly; and the pod is placed exactly when a
brute-force oracle finds room for its claim on some node, on a node the oracle agrees with.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.config import default_config
from batchsched.dra.parse import parse_device_class, parse_resource_claim, parse_resource_slice
from batchsched.framework.runner import ProfileRunner
from batchsched.snapshot import Snapshot
from tests.builders import make_node, make_pod
from tests.dra.builders import DRIVER, claim, claiming, device_class, exact, gpu

PROFILE = default_config().build_profiles()["gpu-scheduler"]
PRODUCTS: Final = ("H100", "A100")
ROOTS: Final = ("r0", "r1", "r2", None)
SHARED: Final = "shared"  # the pool of the allNodes slice
RACK_POOL: Final = "rack-a"  # the pool of the slice for nodes labelled rack=a
PCIE_ROOT: Final = "resource.kubernetes.io/pcieRoot"


# The cluster as the test models it, independently of DraState


@dataclass(frozen=True)
class Dev:
    pool: str  # a node's name, SHARED or RACK_POOL
    index: int
    product: str
    root: str | None
    kind: str  # "gpu", or "nic": the GPU class's selector refuses it

    @property
    def id(self) -> str:
        return f"{DRIVER}/{self.pool}/gpu-{self.index}"

    def published(self) -> dict[str, Any]:
        raw = gpu(self.pool, self.index, self.product, self.root)
        raw["attributes"]["type"] = {"string": self.kind}
        return raw


@dataclass(frozen=True)
class Cluster:
    nodes: tuple[tuple[str, str], ...]  # (name, rack label)
    devices: tuple[Dev, ...]

    def reachable(self, node: str) -> list[Dev]:
        rack = dict(self.nodes)[node]
        return [
            d
            for d in self.devices
            if d.pool in (node, SHARED) or (d.pool == RACK_POOL and rack == "a")
        ]


@dataclass(frozen=True)
class Ask:
    """One claim: requests "r0", "r1", ... of (count, product or any), and whether every
    device must share one PCIe root (matchAttribute over all requests)."""

    requests: tuple[tuple[int, str | None], ...]
    same_root: bool

    def raw(self, name: str) -> dict[str, Any]:
        requests = [
            exact(f"r{i}", count, "gpu.nvidia.com", *_product_selector(product))
            for i, (count, product) in enumerate(self.requests)
        ]
        constraints = [{"matchAttribute": PCIE_ROOT}] if self.same_root else None
        return claim(name, *requests, constraints=constraints)


def _product_selector(product: str | None) -> tuple[str, ...]:
    if product is None:
        return ()
    return (f"device.attributes['gpu.nvidia.com'].productName == '{product}'",)


def devices_of(draw: st.DrawFn, pool: str, count: int) -> list[Dev]:
    kinds = st.sampled_from(("gpu", "gpu", "gpu", "nic"))
    return [
        Dev(
            pool,
            i,
            draw(st.sampled_from(PRODUCTS)),
            draw(st.sampled_from(ROOTS)),
            draw(kinds),
        )
        for i in range(count)
    ]


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    nodes = tuple((f"n{i}", draw(st.sampled_from("ab"))) for i in range(draw(st.integers(1, 4))))
    devices = [d for name, _ in nodes for d in devices_of(draw, name, draw(st.integers(1, 8)))]
    devices += devices_of(draw, SHARED, draw(st.integers(0, 3)))
    devices += devices_of(draw, RACK_POOL, draw(st.integers(0, 2)))
    return Cluster(nodes, tuple(devices))


asks = st.builds(
    Ask,
    st.lists(
        st.tuples(st.integers(1, 4), st.sampled_from((None, None, *PRODUCTS))),
        min_size=1,
        max_size=2,
    ).map(tuple),
    st.booleans(),
)
# Steps: pods scheduled plainly, or inside a trial that is committed or discarded.
steps = st.lists(
    st.tuples(
        st.sampled_from(("plain", "commit", "discard")), st.lists(asks, min_size=1, max_size=2)
    ),
    min_size=1,
    max_size=6,
)


def snapshot_of(cluster: Cluster, claims: Sequence[dict[str, Any]]) -> Snapshot:
    snapshot = Snapshot(
        [make_node(n).cpu("64").memory("256Gi").label("rack", r).view() for n, r in cluster.nodes]
    )
    dra = snapshot.dra
    dra.set_class(parse_device_class(device_class()))
    pools: dict[str, list[Dev]] = {}
    for d in cluster.devices:
        pools.setdefault(d.pool, []).append(d)
    for pool, found in pools.items():
        dra.set_slice(parse_resource_slice(slice_of(pool, found)))
    for raw in claims:
        dra.set_claim(parse_resource_claim(raw))
    return snapshot


def slice_of(pool: str, found: list[Dev]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
        "devices": [d.published() for d in found],
    }
    if pool == SHARED:
        spec["allNodes"] = True
    elif pool == RACK_POOL:
        term = {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["a"]}]}
        spec["nodeSelector"] = {"nodeSelectorTerms": [term]}
    else:
        spec["nodeName"] = pool
    return {"metadata": {"name": f"{pool}-slice"}, "spec": spec}


# The oracle: every way to give the requests distinct free devices, up to devices alike


def oracle_fits(ask: Ask, free: Sequence[Dev]) -> bool:
    kinds = Counter((d.product, d.root) for d in free if d.kind == "gpu")
    if not ask.same_root:
        return _assign(ask.requests, kinds)
    roots = {root for _, root in kinds if root is not None}
    return any(
        _assign(ask.requests, Counter({k: n for k, n in kinds.items() if k[1] == root}))
        for root in roots
    )


def _assign(requests: Sequence[tuple[int, str | None]], kinds: Counter[Any]) -> bool:
    if not requests:
        return True
    (count, product), rest = requests[0], requests[1:]
    eligible = [k for k in kinds if kinds[k] > 0 and product in (None, k[0])]
    for taken in _splits(count, [kinds[k] for k in eligible]):
        left = kinds.copy()
        for k, n in zip(eligible, taken, strict=True):
            left[k] -= n
        if _assign(rest, left):
            return True
    return False


def _splits(total: int, caps: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """Every way to take `total` items from piles of sizes `caps`."""
    if not caps:
        if total == 0:
            yield ()
        return
    for first in range(min(total, caps[0]) + 1):
        for rest in _splits(total - first, caps[1:]):
            yield (first, *rest)


# Checks


def held_by_allocations(snapshot: Snapshot, keys: Sequence[str]) -> dict[str, str]:
    """Device -> claim from every claim's allocation, asserting no device is held twice."""
    held: dict[str, str] = {}
    for key in keys:
        found = snapshot.dra.claim(key)
        if found is None or found.allocation is None:
            continue
        for result in found.allocation.devices:
            assert not result.admin_access
            assert result.id not in held, f"{result.id} held by {held.get(result.id)} and {key}"
            held[result.id] = key
    return held


def check_allocation(snapshot: Snapshot, cluster: Cluster, key: str, ask: Ask, node: str) -> None:
    found = snapshot.dra.claim(key)
    assert found is not None and found.allocation is not None, f"{key} placed, not allocated"
    allocation = found.allocation
    assert allocation.allows(node, {"rack": dict(cluster.nodes)[node]})
    by_id = {d.id: d for d in cluster.reachable(node)}
    given: dict[str, list[Dev]] = {}
    for result in allocation.devices:
        assert result.id in by_id, f"{result.id} is not reachable from {node}"
        given.setdefault(result.request, []).append(by_id[result.id])
    assert set(given) == {f"r{i}" for i in range(len(ask.requests))}
    for i, (count, product) in enumerate(ask.requests):
        chosen = given[f"r{i}"]
        assert len(chosen) == count
        assert all(d.kind == "gpu" and product in (None, d.product) for d in chosen), chosen
    if ask.same_root:
        roots = {d.root for got in given.values() for d in got}
        assert len(roots) == 1 and None not in roots, roots


@settings(max_examples=80, deadline=None)
@given(clusters(), steps)
def test_claims_are_allocated_exactly_when_they_fit_and_never_share_a_device(
    cluster: Cluster, plan: list[tuple[str, list[Ask]]]
) -> None:
    pods = [ask for _, group in plan for ask in group]
    keys = [f"default/c{i}" for i in range(len(pods))]
    snapshot = snapshot_of(cluster, [ask.raw(f"c{i}") for i, ask in enumerate(pods)])
    runner = ProfileRunner(PROFILE)
    numbered = iter(enumerate(pods))
    for mode, group in plan:
        before = dict(snapshot.dra.in_use)
        trial = snapshot.begin_trial() if mode != "plain" else None
        tried = []
        for _ in group:
            i, ask = next(numbered)
            held = held_by_allocations(snapshot, keys)
            assert dict(snapshot.dra.in_use) == held
            fits = {
                n
                for n, _ in cluster.nodes
                if oracle_fits(ask, [d for d in cluster.reachable(n) if d.id not in held])
            }
            pod = claiming(make_pod(f"p{i}").cpu("100m"), f"c{i}").view()
            result = runner.schedule_one(pod, snapshot)
            assert result.placed == bool(fits), (ask, fits, result.message())
            if result.node_name is not None:
                assert result.node_name in fits, (ask, result.node_name, fits)
                check_allocation(snapshot, cluster, keys[i], ask, result.node_name)
            tried.append((i, pod))
        assert dict(snapshot.dra.in_use) == held_by_allocations(snapshot, keys)
        if trial is not None and mode == "commit":
            trial.commit()
        elif trial is not None:
            trial.discard()
            assert dict(snapshot.dra.in_use) == before
            for i, pod in tried:
                found = snapshot.dra.claim(keys[i])
                assert found is not None and found.allocation is None
                assert snapshot.node_of(pod.uid) is None
    assert dict(snapshot.dra.in_use) == held_by_allocations(snapshot, keys)


# The oracle itself, on cases small enough to check by hand


def _dev(i: int, product: str = "H100", root: str | None = "r0", kind: str = "gpu") -> Dev:
    return Dev("n0", i, product, root, kind)


def test_the_oracle_on_hand_checked_cases() -> None:
    two_roots = [_dev(0, root="r0"), _dev(1, root="r1"), _dev(2, root="r1")]
    assert oracle_fits(Ask(((2, None),), True), two_roots)
    assert not oracle_fits(Ask(((3, None),), True), two_roots)
    assert oracle_fits(Ask(((3, None),), False), two_roots)
    assert not oracle_fits(Ask(((1, None), (1, None)), True), [_dev(0), _dev(1, root="r1")])
    mixed = [_dev(0, "H100"), _dev(1, "A100")]
    assert oracle_fits(Ask(((1, None), (1, "H100")), False), mixed)
    assert not oracle_fits(Ask(((1, "H100"), (1, "H100")), False), mixed)
    assert not oracle_fits(Ask(((1, None),), False), [_dev(0, kind="nic")])
    assert not oracle_fits(Ask(((1, None),), True), [_dev(0, root=None)])

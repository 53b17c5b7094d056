"""The allocation search on one node (batchsched.dra.allocator), called directly: kube's
semantics for requests, alternatives, constraints, allocation mode All and admin access, and
what an allocation records."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from batchsched.config import default_config
from batchsched.dra import allocator
from batchsched.dra.allocator import AllocationError, Found, Matcher, NodeDevices, allocations
from batchsched.dra.device import AttributeValue, Device, DeviceId
from batchsched.dra.objects import (
    ALL,
    EXACT_COUNT,
    AllocatedDevice,
    Choice,
    DeviceClass,
    DeviceRequest,
    MatchAttribute,
    OpaqueConfig,
    ResourceClaim,
)
from batchsched.dra.sets import (
    ONE_ROOT_QUALITY,
    PCIE_ROOT,
    SPREAD_QUALITY,
    DeviceSet,
    ranked_sets,
)
from batchsched.framework.runner import ProfileRunner
from batchsched.model.selectors import IN, NodeSelectorTerm, Requirement
from tests.builders import make_node, make_pod
from tests.dra.builders import DRIVER, claim, claiming, dra_snapshot, gpu

PRODUCT = f"{DRIVER}/productName"
CLASSES = {
    "gpu": DeviceClass("gpu", (f"device.driver == '{DRIVER}'",)),
    "any": DeviceClass("any"),
    "configured": DeviceClass(
        "configured", (), (OpaqueConfig(DRIVER, '{"sharing": "timeSlicing"}'),)
    ),
}
H100 = "device.attributes['gpu.nvidia.com'].productName == 'H100'"


# Builders


def device(name: str, product: str = "A100", root: str | None = None, **more: object) -> Device:
    attributes: dict[str, AttributeValue] = {PRODUCT: product}
    if root is not None:
        attributes[PCIE_ROOT] = root
    for key, value in more.items():
        assert isinstance(value, int | str)
        attributes[f"{DRIVER}/{key}"] = value
    return Device(DRIVER, "n1", name, attributes)


def one(
    name: str,
    count: int = 1,
    *selectors: str,
    cls: str = "gpu",
    mode: str = EXACT_COUNT,
    admin: bool = False,
) -> DeviceRequest:
    return DeviceRequest(name, (Choice(name, cls, selectors, mode, count, admin),))


def first_available(name: str, *counts: int) -> DeviceRequest:
    """Alternatives "<name>/c<count>" of the gpu class, tried in the order given."""
    choices = tuple(Choice(f"{name}/c{n}", "gpu", count=n) for n in counts)
    return DeviceRequest(name, choices, first_available=True)


def claim_of(
    name: str, *requests: DeviceRequest, constraints: tuple[MatchAttribute, ...] = ()
) -> ResourceClaim:
    uid = f"uid-{name}"
    return ResourceClaim("default", name, uid, requests=requests, constraints=constraints)


def on_node(
    *devices: Device,
    in_use: Mapping[str, str] | None = None,
    everywhere: frozenset[str] = frozenset(),
) -> NodeDevices:
    held = {DeviceId(f"{DRIVER}/n1/{n}"): c for n, c in (in_use or {}).items()}
    shared = frozenset(DeviceId(f"{DRIVER}/n1/{n}") for n in everywhere)
    return NodeDevices("n1", devices, held, None, shared)


def search(claims: list[ResourceClaim], node: NodeDevices) -> Found | None:
    return allocator.search(claims, node, Matcher(CLASSES))


def picked(found: Found | None) -> list[tuple[int, str, list[str]]] | None:
    """(claim index, choice name, device names) per request, or None when nothing fits."""
    if found is None:
        return None
    return [(i, choice.name, [d.name for d in chosen.devices]) for i, choice, chosen in found.picks]


ROOTED = (device("d0", root="r0"), device("d1", root="r1"), device("d2", root="r1"))
ROOT_OF_ALL = (MatchAttribute(PCIE_ROOT),)
A_AND_B = (MatchAttribute(PCIE_ROOT, ("a", "b")),)


# Requests, alternatives and backtracking


@pytest.mark.parametrize(
    ("claims", "node", "expected"),
    [
        (
            [claim_of("c", one("any"), one("h100", 1, H100))],
            on_node(device("d0", "H100"), device("d1", "A100")),
            [(0, "any", ["d1"]), (0, "h100", ["d0"])],
        ),
        (
            [claim_of("a", one("any")), claim_of("b", one("h100", 1, H100))],
            on_node(device("d0", "H100"), device("d1", "A100")),
            [(0, "any", ["d1"]), (1, "h100", ["d0"])],
        ),
        (
            [claim_of("c", one("a"), one("b"), constraints=ROOT_OF_ALL)],
            on_node(*ROOTED),
            [(0, "a", ["d1"]), (0, "b", ["d2"])],
        ),
        (
            [claim_of("c", one("a"), one("b"), one("free"), constraints=A_AND_B)],
            on_node(*ROOTED),
            [(0, "a", ["d1"]), (0, "b", ["d2"]), (0, "free", ["d0"])],
        ),
        (
            [claim_of("x", one("a"), constraints=ROOT_OF_ALL), claim_of("y", one("a"))],
            on_node(device("d0"), device("d1", root="r1")),
            [(0, "a", ["d1"]), (1, "a", ["d0"])],
        ),
        (
            [claim_of("x", one("a"), one("b"), constraints=(MatchAttribute(f"{DRIVER}/nvl"),))],
            on_node(device("d0", nvl=1), device("d1", nvl=2), device("d2", nvl=2)),
            [(0, "a", ["d1"]), (0, "b", ["d2"])],
        ),
        (
            [claim_of("c", one("a"), one("b"), constraints=ROOT_OF_ALL)],
            on_node(device("d0", root="r0"), device("d1", root="r1")),
            None,
        ),
        (
            [claim_of("c", first_available("gpu", 2, 1))],
            on_node(*ROOTED),
            [(0, "gpu/c2", ["d1", "d2"])],
        ),
        (
            [claim_of("c", first_available("gpu", 4, 1))],
            on_node(*ROOTED),
            [(0, "gpu/c1", ["d0"])],
        ),
        (
            [claim_of("c", first_available("gpu", 2, 1), one("pair", 2))],
            on_node(*ROOTED),
            [(0, "gpu/c1", ["d0"]), (0, "pair", ["d1", "d2"])],
        ),
        (
            [claim_of("c", first_available("gpu", 1, 2))],
            on_node(*ROOTED),
            [(0, "gpu/c1", ["d0"])],
        ),
        (
            [claim_of("c", one("gpu", 2))],
            on_node(*ROOTED, in_use={"d1": "default/other"}),
            [(0, "gpu", ["d0", "d2"])],
        ),
        (
            [claim_of("c", one("gpu", 3))],
            on_node(*ROOTED, in_use={"d1": "default/other"}),
            None,
        ),
        (
            [claim_of("c", one("a", 2), one("b", 2))],
            on_node(*ROOTED),
            None,
        ),
    ],
    ids=[
        "a request for any GPU gives up the only H100 to a later request that needs it",
        "the same backtracking works across two claims of one pod",
        "a constraint across two requests sends both under the root that has two devices",
        "a constraint naming two requests leaves a third request free",
        "one claim's constraint does not bind another claim",
        "a constraint may be on a driver attribute of any type",
        "a constraint no root can satisfy fails",
        "firstAvailable takes the first alternative that fits",
        "firstAvailable falls back to a later alternative",
        "firstAvailable falls back when a later request needs the devices",
        "firstAvailable keeps the order it is given, not the biggest",
        "a device in use by another claim is not given",
        "a request that needs a device in use fails",
        "two requests never share a device",
    ],
)
def test_search(
    claims: list[ResourceClaim],
    node: NodeDevices,
    expected: list[tuple[int, str, list[str]]] | None,
) -> None:
    assert picked(search(claims, node)) == expected


def test_a_device_without_the_constrained_attribute_cannot_serve_a_covered_request() -> None:
    node = on_node(device("d0"), device("d1"))
    assert search([claim_of("c", one("a"), constraints=ROOT_OF_ALL)], node) is None


# Allocation mode All and admin access


def every(name: str, *selectors: str, admin: bool = False) -> DeviceRequest:
    return one(name, 0, *selectors, mode=ALL, admin=admin)


@pytest.mark.parametrize(
    ("request_", "in_use", "expected"),
    [
        (every("all"), {}, ["d0", "d1", "d2"]),
        (every("all"), {"d1": "default/other"}, None),
        (every("all", "device.attributes['gpu.nvidia.com'].productName == 'H100'"), {}, ["d2"]),
        (every("all", "device.attributes['gpu.nvidia.com'].productName == 'B200'"), {}, None),
        (every("all", admin=True), {"d1": "default/other"}, ["d0", "d1", "d2"]),
        (one("gpu", 1, admin=True), {n: "default/o" for n in ("d0", "d1", "d2")}, ["d0"]),
        (one("gpu", 1), {n: "default/o" for n in ("d0", "d1", "d2")}, None),
    ],
    ids=[
        "All takes every matching device",
        "All with one device in use fails",
        "All takes only the devices its selectors match",
        "All matching no device fails",
        "All with admin access takes devices in use",
        "admin access may take a device in use",
        "without admin access a node whose devices are all in use fails",
    ],
)
def test_all_and_admin_access(
    request_: DeviceRequest, in_use: dict[str, str], expected: list[str] | None
) -> None:
    node = on_node(device("d0"), device("d1"), device("d2", "H100"), in_use=in_use)
    found = picked(search([claim_of("c", request_)], node))
    assert found == (None if expected is None else [(0, request_.name, expected)])


def test_all_fails_when_another_request_of_the_pod_took_one_of_its_devices() -> None:
    node = on_node(device("d0"), device("d1"))
    assert search([claim_of("c", one("first"), every("all"))], node) is None


def test_admin_access_results_are_marked_and_hold_nothing() -> None:
    node = on_node(device("d0"), in_use={"d0": "default/other"})
    claims = [claim_of("c", one("gpu", 1, admin=True))]
    found = search(claims, node)
    assert found is not None
    ((_, made),) = allocations(claims, node, found, Matcher(CLASSES))
    assert made.devices == (AllocatedDevice("gpu", DRIVER, "n1", "d0", admin_access=True),)


# What an allocation records


def test_configs_come_from_each_requests_class_then_from_the_claim() -> None:
    claim_config = OpaqueConfig(DRIVER, '{"mine": 1}', ("b",))
    c = ResourceClaim(
        "default",
        "c",
        "u",
        requests=(one("a", cls="configured"), one("b", cls="gpu"), one("c", cls="configured")),
        config=(claim_config,),
    )
    node = on_node(device("d0"), device("d1"), device("d2"))
    found = search([c], node)
    assert found is not None
    ((key, made),) = allocations([c], node, found, Matcher(CLASSES))
    assert key == "default/c"
    assert made.config == (
        ("FromClass", OpaqueConfig(DRIVER, '{"sharing": "timeSlicing"}', ("a",))),
        ("FromClass", OpaqueConfig(DRIVER, '{"sharing": "timeSlicing"}', ("c",))),
        ("FromClaim", claim_config),
    )


def test_an_alternatives_class_config_is_scoped_to_the_alternative() -> None:
    request = DeviceRequest("gpu", (Choice("gpu/x", "configured", count=1),), True)
    node = on_node(device("d0"))
    found = search([claim_of("c", request)], node)
    assert found is not None
    ((_, made),) = allocations([claim_of("c", request)], node, found, Matcher(CLASSES))
    assert [c.requests for _, c in made.config] == [("gpu/x",)]
    assert [d.request for d in made.devices] == ["gpu/x"]


PINNED = (NodeSelectorTerm((), (Requirement("metadata.name", IN, ("n1",)),)),)


@pytest.mark.parametrize(
    ("shared", "pinned"),
    [
        (frozenset(), True),
        (frozenset({"d0", "d1"}), False),
        (frozenset({"d0"}), True),
    ],
    ids=[
        "devices of the node's own slice pin the claim to the node",
        "devices all from allNodes slices leave the claim usable on every node",
        "one local device among shared ones pins the claim",
    ],
)
def test_the_node_selector_of_an_allocation(shared: frozenset[str], pinned: bool) -> None:
    claims = [claim_of("c", one("gpu", 2))]
    node = on_node(device("d0"), device("d1"), everywhere=shared)
    found = search(claims, node)
    assert found is not None
    ((_, made),) = allocations(claims, node, found, Matcher(CLASSES))
    assert made.node_selector == (PINNED if pinned else ())
    assert made.allows("n1") and made.allows("n2") is not pinned


def test_each_claim_of_a_pod_gets_its_own_allocation_in_claim_order() -> None:
    claims = [claim_of("a", one("x")), claim_of("b", one("y", 2))]
    node = on_node(device("d0"), device("d1"), device("d2"))
    found = search(claims, node)
    assert found is not None
    made = allocations(claims, node, found, Matcher(CLASSES))
    assert [(k, [d.device for d in a.devices]) for k, a in made] == [
        ("default/a", ["d0"]),
        ("default/b", ["d1", "d2"]),
    ]


@pytest.mark.parametrize(
    ("requests", "quality", "count"),
    [
        ((one("a"),), 0, 1),
        ((one("a", 2),), ONE_ROOT_QUALITY, 2),
        ((one("a", 3),), SPREAD_QUALITY, 3),
        ((one("a", 2), one("b")), ONE_ROOT_QUALITY, 3),
    ],
    ids=[
        "a single device has no set quality",
        "two devices under one root are the one-root quality",
        "three devices across roots are the spread quality",
        "the quality is that of the multi-device sets only",
    ],
)
def test_found_reports_quality_and_device_count(
    requests: tuple[DeviceRequest, ...], quality: int, count: int
) -> None:
    found = search([claim_of("c", *requests)], on_node(*ROOTED))
    assert found is not None and (found.quality, found.devices) == (quality, count)


# Errors and the step budget


@pytest.mark.parametrize(
    ("selector", "cls"),
    [
        ("device.attributes['gpu.nvidia.com'].noSuchAttribute == 'x'", "gpu"),
        ("device.attributes['gpu.nvidia.com'].productName", "gpu"),
        ("device.nonsense(", "gpu"),
        ("true", "no-such-class"),
    ],
    ids=[
        "a selector reading a missing attribute is an error, not a non-match",
        "a selector that is not a bool is an error",
        "a selector that does not compile is an error",
        "an unknown class is an error",
    ],
)
def test_a_claim_that_cannot_be_allocated_anywhere_raises(selector: str, cls: str) -> None:
    with pytest.raises(AllocationError):
        search([claim_of("c", one("a", 1, selector, cls=cls))], on_node(*ROOTED))


def counting_sets(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the candidate sets the search is offered (one step each)."""
    offered = [0]
    real = ranked_sets

    def counted(*args: Any, **kwargs: Any) -> Iterator[DeviceSet]:
        for found in real(*args, **kwargs):
            offered[0] += 1
            yield found

    monkeypatch.setattr(allocator, "ranked_sets", counted)
    return offered


def test_a_search_past_the_step_budget_gives_up_instead_of_hanging(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only the last three of 30 devices share an island: C(30, 3) = 4060 sets to try."""
    devices = [device(f"d{i:02}", island=i) for i in range(27)]
    devices += [device(f"d{i}", island=99) for i in range(27, 30)]
    claims = [claim_of("c", one("a", 3), constraints=(MatchAttribute(f"{DRIVER}/island"),))]
    offered = counting_sets(monkeypatch)
    assert search(claims, on_node(*devices)) is None
    assert offered[0] == allocator.MAX_STEPS + 1
    monkeypatch.setattr(allocator, "MAX_STEPS", 10_000)
    assert picked(search(claims, on_node(*devices))) == [(0, "a", ["d27", "d28", "d29"])]


def test_an_infeasible_search_over_many_devices_stops_at_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two requests of 4 out of 40 devices, no two alike: C(40, 4) sets for the first alone."""
    devices = [device(f"d{i:02}", island=i) for i in range(40)]
    constraint = (MatchAttribute(f"{DRIVER}/island"),)
    claims = [claim_of("c", one("a", 4), one("b", 4), constraints=constraint)]
    offered = counting_sets(monkeypatch)
    assert search(claims, on_node(*devices)) is None
    assert offered[0] <= allocator.MAX_STEPS + 1


# Kube semantics that an earlier version missed


def test_a_constraint_naming_a_subrequest_covers_that_alternative() -> None:
    request = DeviceRequest("gpu", (Choice("gpu/pair", "gpu", count=2),), first_available=True)
    constraint = (MatchAttribute(f"{DRIVER}/island", ("gpu/pair",)),)
    node = on_node(device("d0", island=1), device("d1", island=2), device("d2", island=2))
    found = search([claim_of("c", request, constraints=constraint)], node)
    assert picked(found) == [(0, "gpu/pair", ["d1", "d2"])]


def test_two_constraints_on_one_attribute_for_different_requests_are_independent() -> None:
    node = on_node(
        device("d0", root="r0"),
        device("d1", root="r0"),
        device("d2", root="r1"),
        device("d3", root="r1"),
    )
    c = claim_of(
        "c",
        one("a"),
        one("b"),
        one("c"),
        one("d"),
        constraints=(MatchAttribute(PCIE_ROOT, ("a", "b")), MatchAttribute(PCIE_ROOT, ("c", "d"))),
    )
    assert picked(search([c], node)) == [
        (0, "a", ["d0"]),
        (0, "b", ["d1"]),
        (0, "c", ["d2"]),
        (0, "d", ["d3"]),
    ]


def test_a_matcher_answers_for_the_devices_a_node_reaches_now_after_a_reset() -> None:
    matcher = Matcher(CLASSES)
    choice = Choice("a", "gpu")
    assert len(matcher.matching(choice, on_node(device("d0")))) == 1
    matcher.reset(CLASSES)
    assert len(matcher.matching(choice, on_node(device("d0"), device("d1")))) == 2


RACK_IS_A = {"key": "rack", "operator": "In", "values": ["a"]}
RACK_A = {"nodeSelectorTerms": [{"matchExpressions": [RACK_IS_A]}]}


def test_a_node_relabelled_away_from_a_node_selector_slice_gets_none_of_its_devices() -> None:
    rack_slice = {
        "metadata": {"name": "rack-a"},
        "spec": {
            "driver": DRIVER,
            "nodeSelector": RACK_A,
            "pool": {"name": "rack-a", "generation": 1, "resourceSliceCount": 1},
            "devices": [gpu("x", 0), gpu("x", 1)],
        },
    }
    snapshot = dra_snapshot(
        [make_node("n1").cpu("8").label("rack", "a")],
        [rack_slice],
        [claim("c1"), claim("c2")],
    )
    runner = ProfileRunner(default_config().build_profiles()["gpu-scheduler"])
    first = runner.schedule_one(claiming(make_pod("p1").cpu("1"), "c1").view(), snapshot)
    assert first.node_name == "n1"
    snapshot.update_node(make_node("n1").cpu("8").label("rack", "b").view())
    second = runner.schedule_one(claiming(make_pod("p2").cpu("1"), "c2").view(), snapshot)
    assert second.node_name is None

"""DraState: which devices each node reaches (newest complete generation of each pool), which
are in use (claims seen and allocations assumed), trials, and the generation stamps."""

from __future__ import annotations

from dataclasses import replace

import pytest

from batchsched.dra.device import Device, DeviceId
from batchsched.dra.objects import AllocatedDevice, Allocation, ResourceClaim, ResourceSlice
from batchsched.dra.state import DraState
from batchsched.model.selectors import IN, NodeSelectorTerm, Requirement

DRIVER = "gpu.nvidia.com"


# Builders


def devices(pool: str, *names: str) -> tuple[Device, ...]:
    return tuple(Device(DRIVER, pool, n) for n in names)


def local(
    name: str, node: str, *names: str, pool: str = "", generation: int = 1, of: int = 1
) -> ResourceSlice:
    """A slice of `node`'s pool (named after the node unless `pool` says otherwise)."""
    pool = pool or node
    found = devices(pool, *names)
    return ResourceSlice(name, DRIVER, pool, generation, of, node_name=node, devices=found)


def everywhere(name: str, pool: str, *names: str, generation: int = 1) -> ResourceSlice:
    return ResourceSlice(
        name, DRIVER, pool, generation, 1, all_nodes=True, devices=devices(pool, *names)
    )


def labelled(name: str, pool: str, rack: str, *names: str) -> ResourceSlice:
    term = NodeSelectorTerm((Requirement("rack", IN, (rack,)),))
    return ResourceSlice(
        name, DRIVER, pool, 1, 1, node_selector=(term,), devices=devices(pool, *names)
    )


def ids(found: tuple[Device, ...]) -> list[str]:
    return [d.id for d in found]


def dev(pool: str, name: str) -> DeviceId:
    return DeviceId(f"{DRIVER}/{pool}/{name}")


def allocation(*held: tuple[str, str], admin: bool = False) -> Allocation:
    return Allocation(tuple(AllocatedDevice("gpu", DRIVER, p, n, admin) for p, n in held))


def a_claim(name: str, alloc: Allocation | None = None, uid: str = "") -> ResourceClaim:
    return ResourceClaim("default", name, uid or f"uid-{name}", allocation=alloc)


def state_with(*slices: ResourceSlice) -> DraState:
    state = DraState()
    for s in slices:
        state.set_slice(s)
    return state


# Slices and pools


@pytest.mark.parametrize(
    ("slices", "removed", "n1"),
    [
        ([local("a", "n1", "d0")], [], ["n1/d0"]),
        ([local("a", "n1", "old"), local("a", "n1", "new", generation=2)], [], ["n1/new"]),
        (
            [local("a", "n1", "new", generation=2), local("b", "n1", "old", generation=1)],
            [],
            ["n1/new"],
        ),
        (
            [
                local("a", "n1", "old0", "old1"),
                local("b", "n1", "new0", generation=2, of=2),
            ],
            [],
            [],
        ),
        (
            [
                local("b", "n1", "d2", generation=2, of=2),
                local("a", "n1", "d0", "d1", generation=2, of=2),
            ],
            [],
            ["n1/d0", "n1/d1", "n1/d2"],
        ),
        (
            [local("a", "n1", "d0", generation=2, of=2), local("b", "n1", "d1", generation=3)],
            [],
            ["n1/d1"],
        ),
        ([local("a", "n1", "d0"), local("b", "n1", "d1", pool="other")], ["a"], ["other/d1"]),
        ([local("a", "n1", "d0")], ["a"], []),
        (
            [
                local("a", "n1", "d0", "d1", generation=2, of=2),
                local("b", "n1", "d2", generation=2, of=2),
            ],
            ["b"],
            [],
        ),
        ([local("a", "n1", "d0"), local("a", "n2", "d0", pool="n1")], [], []),
    ],
    ids=[
        "a node reaches the devices of its slice",
        "a slice republished with a newer generation replaces its devices",
        "an older generation's slice next to a newer one is ignored",
        "an incomplete newest generation offers no devices, not the older ones",
        "a complete generation of two slices offers both, in slice-name order",
        "a newer complete generation wins over an older incomplete one",
        "removing a slice removes its devices and leaves the other pools",
        "removing the only slice leaves the node with nothing",
        "removing one slice of a complete generation makes it incomplete",
        "a slice renamed to another node moves its devices there",
    ],
)
def test_which_devices_a_node_reaches(
    slices: list[ResourceSlice], removed: list[str], n1: list[str]
) -> None:
    state = state_with(*slices)
    for name in removed:
        state.remove_slice(name)
    assert ids(state.devices_for("n1", {})) == [f"{DRIVER}/{d}" for d in n1]


def test_a_slice_moved_to_another_node_is_reached_there() -> None:
    state = state_with(local("a", "n1", "d0"), local("a", "n2", "d0", pool="n1"))
    assert ids(state.devices_for("n2", {})) == [f"{DRIVER}/n1/d0"]


def test_a_slice_moved_to_another_pool_leaves_the_old_pool() -> None:
    state = state_with(local("a", "n1", "d0"), local("a", "n1", "d0", pool="p2"))
    assert ids(state.devices_for("n1", {})) == [f"{DRIVER}/p2/d0"]


def test_all_nodes_slices_reach_every_node_and_are_everywhere() -> None:
    state = state_with(local("a", "n1", "d0"), everywhere("s", "shared", "x0", "x1"))
    assert ids(state.devices_for("n1", {})) == [
        f"{DRIVER}/n1/d0",
        f"{DRIVER}/shared/x0",
        f"{DRIVER}/shared/x1",
    ]
    assert ids(state.devices_for("unknown-node", {})) == [
        f"{DRIVER}/shared/x0",
        f"{DRIVER}/shared/x1",
    ]
    assert state.everywhere == {dev("shared", "x0"), dev("shared", "x1")}
    state.remove_slice("s")
    assert state.everywhere == frozenset()
    assert ids(state.devices_for("n2", {})) == []


def test_node_selector_slices_reach_the_nodes_their_labels_select_and_are_not_everywhere() -> None:
    state = state_with(labelled("s", "rack-a", "a", "x0"))
    assert ids(state.devices_for("n1", {"rack": "a"})) == [f"{DRIVER}/rack-a/x0"]
    assert ids(state.devices_for("n1", {"rack": "b"})) == []
    assert ids(state.devices_for("n1", {})) == []
    assert state.everywhere == frozenset()


def test_an_incomplete_shared_generation_offers_nothing_anywhere() -> None:
    shared = replace(everywhere("s", "shared", "x0", generation=2), slice_count=2)
    state = state_with(everywhere("s0", "shared", "old"), shared)
    assert ids(state.devices_for("n1", {})) == []
    assert state.everywhere == frozenset()


# Claims and devices in use


def test_a_claims_allocation_marks_its_devices_in_use_and_admin_access_does_not() -> None:
    state = state_with(local("a", "n1", "d0", "d1", "d2"))
    state.set_claim(a_claim("c", allocation(("n1", "d0"), ("n1", "d1"))))
    state.set_claim(a_claim("admin", allocation(("n1", "d2"), admin=True)))
    assert dict(state.in_use) == {dev("n1", "d0"): "default/c", dev("n1", "d1"): "default/c"}
    assert state.holder(dev("n1", "d2")) is None


def test_a_claim_without_an_allocation_holds_nothing() -> None:
    state = state_with(local("a", "n1", "d0"))
    state.set_claim(a_claim("c"))
    assert not state.in_use


def test_a_claim_updated_to_other_devices_releases_the_old_ones() -> None:
    state = state_with(local("a", "n1", "d0", "d1"))
    state.set_claim(a_claim("c", allocation(("n1", "d0"))))
    state.set_claim(a_claim("c", allocation(("n1", "d1"))))
    assert dict(state.in_use) == {dev("n1", "d1"): "default/c"}


def test_a_claim_recreated_with_a_new_uid_drops_what_the_old_one_had_pending() -> None:
    state = state_with(local("a", "n1", "d0", "d1"))
    state.set_claim(a_claim("c", uid="old"))
    state.assume("default/c", allocation(("n1", "d0")), "pod")
    state.set_claim(a_claim("c", uid="new"))
    assert not state.in_use and "default/c" not in state.assumed
    claim = state.claim("default/c")
    assert claim is not None and claim.allocation is None


def test_removing_a_claim_frees_its_devices_and_its_pending_allocation() -> None:
    state = state_with(local("a", "n1", "d0", "d1"))
    state.set_claim(a_claim("seen", allocation(("n1", "d0"))))
    state.set_claim(a_claim("mine"))
    state.assume("default/mine", allocation(("n1", "d1")), "pod")
    state.remove_claim("default/seen")
    state.remove_claim("default/mine")
    assert not state.in_use and not state.assumed
    assert state.claim("default/seen") is None


def test_an_assumed_allocation_shows_on_the_claim_until_the_api_shows_one() -> None:
    state = state_with(local("a", "n1", "d0", "d1"))
    state.set_claim(a_claim("c"))
    assumed = allocation(("n1", "d0"))
    state.assume("default/c", assumed, "pod")
    claim = state.claim("default/c")
    assert claim is not None and claim.allocation == assumed
    assert dict(state.in_use) == {dev("n1", "d0"): "default/c"}
    # The API shows another scheduler's allocation: ours is dropped, theirs counts.
    theirs = allocation(("n1", "d1"))
    state.set_claim(a_claim("c", theirs))
    assert "default/c" not in state.assumed
    assert dict(state.in_use) == {dev("n1", "d1"): "default/c"}
    claim = state.claim("default/c")
    assert claim is not None and claim.allocation == theirs


def test_an_update_without_an_allocation_keeps_the_assumed_one() -> None:
    state = state_with(local("a", "n1", "d0"))
    state.set_claim(a_claim("c"))
    state.assume("default/c", allocation(("n1", "d0")), "pod")
    state.set_claim(replace(a_claim("c"), resource_version="2"))
    assert dict(state.in_use) == {dev("n1", "d0"): "default/c"}


def test_assuming_twice_is_a_bug_and_forget_needs_the_pod_that_assumed() -> None:
    state = state_with(local("a", "n1", "d0"))
    state.set_claim(a_claim("c"))
    state.assume("default/c", allocation(("n1", "d0")), "pod-a")
    with pytest.raises(ValueError, match="already has an allocation pending"):
        state.assume("default/c", allocation(("n1", "d0")), "pod-b")
    state.forget("default/c", "pod-b")
    assert dev("n1", "d0") in state.in_use
    state.forget("default/c", "pod-a")
    assert not state.in_use and not state.assumed


# Trials


def in_use_after(*steps: str) -> dict[DeviceId, str]:
    """Run `steps` ("begin", "keep", "discard", "assume X", "forget X") on a state where claims
    a, b and c exist and x was assumed before any trial; each claim X takes device X."""
    state = state_with(local("s", "n1", "a", "b", "c", "x"))
    for name in "abcx":
        state.set_claim(a_claim(name))
    state.assume("default/x", allocation(("n1", "x")), "pod")
    for step in steps:
        verb, _, name = step.partition(" ")
        if verb == "begin":
            state.begin()
        elif verb in ("keep", "discard"):
            state.end(keep=verb == "keep")
        elif verb == "assume":
            state.assume(f"default/{name}", allocation(("n1", name)), "pod")
        else:
            state.forget(f"default/{name}", "pod")
    return dict(state.in_use)


def held(*names: str) -> dict[DeviceId, str]:
    return {dev("n1", n): f"default/{n}" for n in names}


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        (["begin", "assume a", "discard"], held("x")),
        (["begin", "assume a", "keep"], held("a", "x")),
        (["begin", "forget x", "discard"], held("x")),
        (["begin", "forget x", "assume x", "forget x", "discard"], held("x")),
        (["begin", "assume a", "begin", "assume b", "discard", "keep"], held("a", "x")),
        (["begin", "assume a", "begin", "assume b", "keep", "discard"], held("x")),
        (["begin", "assume a", "begin", "assume b", "keep", "keep"], held("a", "b", "x")),
        (["begin", "begin", "forget x", "keep", "assume c", "discard"], held("x")),
        (["begin", "assume a", "keep", "begin", "assume b", "discard"], held("a", "x")),
        (["begin", "assume a", "forget a", "assume a", "discard"], held("x")),
    ],
    ids=[
        "a discarded trial gives back what it assumed",
        "a kept trial keeps what it assumed",
        "a discarded trial restores an allocation it forgot",
        "a discarded trial restores the allocation from before, not one it made",
        "a discarded inner trial leaves the outer one's allocation",
        "an inner trial kept then the outer discarded gives back both",
        "both trials kept keep both",
        "a kept inner forget is undone with the outer trial",
        "a trial after a kept one undoes only its own",
        "assume, forget and assume again in one trial undo to nothing",
    ],
)
def test_trials(steps: list[str], expected: dict[DeviceId, str]) -> None:
    assert in_use_after(*steps) == expected


def test_a_trial_of_a_snapshot_discarded_restores_claims_as_shown() -> None:
    state = state_with(local("s", "n1", "d0"))
    state.set_claim(a_claim("c"))
    state.begin()
    state.assume("default/c", allocation(("n1", "d0")), "pod")
    state.end(keep=False)
    claim = state.claim("default/c")
    assert claim is not None and claim.allocation is None and not state.assumed


# Generation stamps


@pytest.mark.parametrize(
    ("held_device", "n1_moves", "n2_moves"),
    [
        (("n1", "d0"), True, False),
        (("n2", "d0"), False, True),
        (("shared", "x0"), True, True),
        (("n1", "d0-admin"), False, False),
    ],
    ids=[
        "taking a device of n1 moves n1's generation only",
        "taking a device of n2 moves n2's generation only",
        "taking a shared device moves every node's generation",
        "an admin-access result takes nothing and moves nothing",
    ],
)
def test_generation_moves_when_what_a_node_can_be_given_changes(
    held_device: tuple[str, str], n1_moves: bool, n2_moves: bool
) -> None:
    state = state_with(
        local("a", "n1", "d0", "d0-admin"), local("b", "n2", "d0"), everywhere("s", "shared", "x0")
    )
    state.set_claim(a_claim("c"))
    before = (state.generation("n1"), state.generation("n2"))
    admin = held_device[1].endswith("admin")
    state.assume("default/c", allocation(held_device, admin=admin), "pod")
    taken = (state.generation("n1"), state.generation("n2"))
    assert (taken[0] != before[0], taken[1] != before[1]) == (n1_moves, n2_moves)
    state.forget("default/c", "pod")
    freed = (state.generation("n1"), state.generation("n2"))
    assert (freed[0] != taken[0], freed[1] != taken[1]) == (n1_moves, n2_moves)


def test_generation_moves_for_every_node_when_slices_or_classes_change() -> None:
    state = state_with(local("a", "n1", "d0"))
    stamps = [state.generation("n2")]
    state.set_slice(local("b", "n1", "d1", pool="other"))
    stamps.append(state.generation("n2"))
    state.remove_slice("b")
    stamps.append(state.generation("n2"))
    state.remove_class("gpu")
    stamps.append(state.generation("n2"))
    assert len(set(stamps)) == len(stamps)


def test_a_claim_seen_from_the_api_moves_its_nodes_generation() -> None:
    state = state_with(local("a", "n1", "d0"), local("b", "n2", "d0"))
    before = (state.generation("n1"), state.generation("n2"))
    state.set_claim(a_claim("c", allocation(("n1", "d0"))))
    assert state.generation("n1") != before[0] and state.generation("n2") == before[1]
    state.remove_claim("default/c")
    assert state.generation("n1") not in before[:1] and state.generation("n2") == before[1]


def test_two_states_never_share_a_stamp() -> None:
    """A cache keyed by stamps must not mistake a rebuilt state for the old one."""
    stamps: list[set[int]] = []
    for _ in range(2):
        state = state_with(local("a", "n1", "d0"))
        state.set_claim(a_claim("c"))
        seen = {state.version, state.generation("n1"), state.generation("n2")}
        state.assume("default/c", allocation(("n1", "d0")), "pod")
        seen |= {state.version, state.generation("n1")}
        stamps.append(seen)
    assert not stamps[0] & stamps[1]
    assert DraState().version != DraState().version
    assert DraState().generation("n1") != DraState().generation("n1")

"""Batching identical gang members: the same decisions as the runner, member by member."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.framework.batch_build import build_batch
from batchsched.framework.cycle_state import CycleState
from batchsched.framework.members import Batching, GangMembers
from batchsched.framework.profile import Profile
from batchsched.framework.registry import assemble_profile
from batchsched.framework.runner import ProfileRunner, RunnerMark, Within
from batchsched.framework.signature import signature
from batchsched.framework.status import OK, Code, Status
from batchsched.gang.core import GangRequest, schedule_gang
from batchsched.gang.podgroup import parse_pod_group
from batchsched.model.pod import PodView
from batchsched.plugins.registry import DEFAULT_PLUGINS, default_registry
from batchsched.snapshot import NodeInfo, Snapshot
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod

PROFILE = assemble_profile(default_registry(), "gpu-scheduler", DEFAULT_PLUGINS, {})

Outcome = tuple[str | None, Code, int, int, str]


def run_members(
    profile: Profile,
    nodes: list[NodeBuilder],
    existing: list[PodBuilder],
    pods: list[PodView],
    batching: Batching,
    within: Within | None = None,
) -> tuple[list[Outcome], RunnerMark, int]:
    """Each member's node, status code, evaluated and feasible counts and message; the
    runner's generator and start index afterwards; how many members came from a batch."""
    snapshot = Snapshot([n.view() for n in nodes], [p.view() for p in existing])
    runner = ProfileRunner(profile, seed=7)
    runner.next_start = 3  # a start index that is not 0 wraps the windows sooner
    members = GangMembers(runner, snapshot, pods, within, batching)
    outcomes: list[Outcome] = []
    with snapshot.begin_trial():
        for pod in pods:
            result = members.schedule(pod)
            outcomes.append(
                (
                    result.node_name,
                    result.status.code,
                    result.evaluated_nodes,
                    result.feasible_nodes,
                    result.message(),
                )
            )
    return outcomes, runner.mark(), members.batched


def gpu_member(name: str, cpu: int, gpus: int, zone: str | None, tolerate: bool) -> PodBuilder:
    pod = make_pod(name, "ml").cpu(str(cpu)).memory("1Gi").label("team", "a")
    if gpus:
        pod = pod.gpus(gpus)
    if zone is not None:
        pod = pod.node_selector(zone=zone)
    if tolerate:
        pod = pod.toleration("dedicated", "ml", "NoSchedule")
    return pod


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[NodeBuilder], list[PodBuilder], int | None]:
    count = draw(st.integers(1, 140))
    nodes: list[NodeBuilder] = []
    existing: list[PodBuilder] = []
    for i in range(count):
        node = make_node(f"n{i}").cpu(str(draw(st.sampled_from([4, 8, 16, 64])))).memory("64Gi")
        gpus = draw(st.sampled_from([0, 2, 4, 8]))
        if gpus:
            node = node.gpus(gpus)
        node = node.label("zone", draw(st.sampled_from(["a", "b"])))
        taint = draw(st.sampled_from(["", "", "NoSchedule", "PreferNoSchedule"]))
        if taint:
            node = node.taint("dedicated", "ml", taint)
        nodes.append(node)
        if draw(st.booleans()):
            existing.append(make_pod(f"e{i}").cpu(str(draw(st.integers(1, 4)))).node(f"n{i}"))
    percentage = draw(st.sampled_from([None, 0, 10, 50, 100]))
    return nodes, existing, percentage


@st.composite
def gangs(draw: st.DrawFn) -> list[PodView]:
    """Members of one or two signatures, interleaved."""
    shapes = [
        (draw(st.integers(1, 8)), draw(st.integers(0, 2)), draw(st.sampled_from([None, "a"])))
        for _ in range(2)
    ]
    tolerate = draw(st.booleans())
    picks = draw(st.lists(st.sampled_from([0, 0, 0, 1]), min_size=2, max_size=30))
    return [gpu_member(f"m{i}", *shapes[shape], tolerate).view() for i, shape in enumerate(picks)]


@settings(max_examples=120, deadline=None)
@given(clusters(), gangs())
def test_batched_members_get_the_runners_decisions_one_by_one(
    cluster: tuple[list[NodeBuilder], list[PodBuilder], int | None], pods: list[PodView]
) -> None:
    nodes, existing, percentage = cluster
    profile = dataclasses.replace(PROFILE, percentage_of_nodes_to_score=percentage)
    plain, plain_mark, none = run_members(profile, nodes, existing, pods, "never")
    batched, batched_mark, _ = run_members(profile, nodes, existing, pods, "always")
    assert none == 0
    assert batched == plain
    assert batched_mark == plain_mark


def big_cluster(count: int) -> list[NodeBuilder]:
    return [make_node(f"g{i}").cpu("64").memory("512Gi").gpus(8) for i in range(count)]


def test_a_large_gang_is_batched_and_lands_where_the_runner_puts_it() -> None:
    pods = [gpu_member(f"m{i}", 1, 1, None, False).view() for i in range(40)]
    nodes = big_cluster(300)
    plain, plain_mark, _ = run_members(PROFILE, nodes, [], pods, "never")
    batched, batched_mark, count = run_members(PROFILE, nodes, [], pods, "auto")
    assert count == 40
    assert (batched, batched_mark) == (plain, plain_mark)


def test_a_small_gang_on_a_large_cluster_is_not_batched() -> None:
    # 300 nodes: each member filters 144 of them, so 2 members never look at a node twice.
    pods = [gpu_member(f"m{i}", 1, 1, None, False).view() for i in range(2)]
    _, _, count = run_members(PROFILE, big_cluster(300), [], pods, "auto")
    assert count == 0


def test_members_inside_a_topology_domain_are_batched_within_it() -> None:
    pods = [gpu_member(f"m{i}", 1, 4, None, False).view() for i in range(12)]
    within = Within(frozenset(f"g{i}" for i in range(0, 300, 7)))
    plain, plain_mark, _ = run_members(PROFILE, big_cluster(300), [], pods, "never", within)
    batched, batched_mark, count = run_members(
        PROFILE, big_cluster(300), [], pods, "always", within
    )
    assert count == 12
    assert {node for node, *_ in batched} <= within.nodes
    assert (batched, batched_mark) == (plain, plain_mark)


def test_the_gang_cycle_places_a_batched_gang_as_the_unbatched_one() -> None:
    group = parse_pod_group(
        {"metadata": {"name": "g", "namespace": "ml"}, "spec": {"minMember": 30}}
    )
    pods = tuple(gpu_member(f"m{i}", 1, 1, None, False).view() for i in range(30))
    placements = []
    for batching in ("never", "auto"):
        snapshot = Snapshot([n.view() for n in big_cluster(200)])
        runner = ProfileRunner(PROFILE, seed=3)
        decision = schedule_gang(GangRequest(group, pods), snapshot, runner, batching=batching)
        placements.append(([(r.pod.uid, r.node) for r in decision.placed], decision.outcome))
    assert placements[0] == placements[1]
    assert len(placements[0][0]) == 30


def test_pods_whose_verdicts_depend_on_other_nodes_have_no_signature() -> None:
    plain = make_pod("p").cpu("1")
    assert signature(plain.view()) is not None
    spread = make_pod("p").cpu("1").spread(1, "zone", "DoNotSchedule", {"app": "x"})
    anti = (
        make_pod("p")
        .cpu("1")
        .affinity(
            "podAntiAffinity",
            {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}
                ]
            },
        )
    )
    ports = make_pod("p").cpu("1").host_port(8080)
    for pod in (spread, anti, ports):
        assert signature(pod.view()) is None


def test_members_differing_in_requests_or_labels_do_not_share_a_signature() -> None:
    base = make_pod("a").cpu("1").label("team", "a")
    assert signature(base.view()) == signature(make_pod("b").cpu("1").label("team", "a").view())
    assert signature(base.view()) != signature(make_pod("b").cpu("2").label("team", "a").view())
    assert signature(base.view()) != signature(make_pod("b").cpu("1").label("team", "b").view())


class Elsewhere:
    """A filter that might look beyond the node it is handed: batching must not trust it."""

    name: ClassVar[str] = "Elsewhere"

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
        return OK


def test_a_filter_plugin_outside_the_node_local_set_turns_batching_off() -> None:
    pod = gpu_member("m", 1, 1, None, False).view()
    snapshot = Snapshot([n.view() for n in big_cluster(5)])
    trusted = ProfileRunner(PROFILE)
    assert build_batch(trusted, pod, snapshot, None) is not None
    profile = dataclasses.replace(PROFILE, filter=(*PROFILE.filter, Elsewhere()))
    assert build_batch(ProfileRunner(profile), pod, snapshot, None) is None


def test_a_gang_that_fills_the_cluster_fails_the_same_way_batched() -> None:
    # 3 nodes x 8 GPUs, 30 members of 1 GPU: the last 6 fit nowhere.
    pods = [gpu_member(f"m{i}", 1, 1, None, False).view() for i in range(30)]
    plain, plain_mark, _ = run_members(PROFILE, big_cluster(3), [], pods, "never")
    batched, batched_mark, count = run_members(PROFILE, big_cluster(3), [], pods, "always")
    assert count == 24
    assert [o[0] for o in plain].count(None) == 6
    assert (batched, batched_mark) == (plain, plain_mark)


def test_members_cycling_through_the_same_windows_pick_from_kept_rows_as_the_runner() -> None:
    # 400 nodes sampled 100 at a time: four windows, each seen again every fourth member; the
    # nodes already half full and the ones placed on change rows between two visits.
    profile = dataclasses.replace(PROFILE, percentage_of_nodes_to_score=25)
    nodes = big_cluster(400)
    existing = [gpu_member(f"e{i}", 2, 4, None, False).node(f"g{i}") for i in range(0, 400, 9)]
    pods = [gpu_member(f"m{i}", 1, 1, None, False).view() for i in range(60)]
    plain, plain_mark, _ = run_members(profile, nodes, existing, pods, "never")
    snapshot = Snapshot([n.view() for n in nodes], [p.view() for p in existing])
    runner = ProfileRunner(profile, seed=7)
    runner.next_start = 3
    members = GangMembers(runner, snapshot, pods, None, "always")
    with snapshot.begin_trial():
        placed = [members.schedule(pod).node_name for pod in pods]
    assert placed == [node for node, *_ in plain]
    assert runner.mark() == plain_mark
    assert members.kept_picks >= 50  # all but the first visit of each window (and its second)


def test_members_whose_window_is_every_feasible_node_pick_from_its_rows_as_the_runner() -> None:
    # percentageOfNodesToScore 100: each member's window is every feasible node. Identical
    # nodes share a row and tie, so the runner's generator draws among them in window order
    # (the start index is 3: the ties wrap around); nodes placed on move to other rows.
    profile = dataclasses.replace(PROFILE, percentage_of_nodes_to_score=100)
    nodes = big_cluster(120) + [make_node(f"c{i}").cpu("16").memory("64Gi") for i in range(30)]
    existing = [gpu_member(f"e{i}", 2, 4, None, False).node(f"g{i}") for i in range(0, 120, 7)]
    pods = [gpu_member(f"m{i}", 1 + i % 3, 1 + i % 2, None, False).view() for i in range(90)]
    plain, plain_mark, _ = run_members(profile, nodes, existing, pods, "never")
    snapshot = Snapshot([n.view() for n in nodes], [p.view() for p in existing])
    runner = ProfileRunner(profile, seed=7)
    runner.next_start = 3
    members = GangMembers(runner, snapshot, pods, None, "always")
    with snapshot.begin_trial():
        placed = [members.schedule(pod).node_name for pod in pods]
    assert placed == [node for node, *_ in plain]
    assert runner.mark() == plain_mark
    assert members.feasible_picks >= 80  # all but each signature's single-node windows

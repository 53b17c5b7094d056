"""Lone pods of one signature, cycle after cycle, from kept results: the runner's decisions,
whatever happens to the cluster in between."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.framework import batch
from batchsched.framework.lone_batches import LoneBatches, learning_scorers
from batchsched.framework.registry import assemble_profile
from batchsched.framework.runner import ProfileRunner, RunnerMark
from batchsched.model.pod import PodView
from batchsched.plugins.registry import DEFAULT_PLUGINS, default_registry
from batchsched.snapshot import Snapshot
from tests.builders import NodeBuilder, PodBuilder, make_node, make_pod
from tests.framework.test_batch import PROFILE, Outcome, clusters, gpu_member

# What happens between two cycles: ("pod", shape) schedules a pod of that shape; ("end", k)
# a pod placed earlier finishes; ("other", k) a pod of someone else lands on node k;
# ("label", k) node k is relabelled (a node update); ("same", k) node k's status heartbeat.
Step = tuple[str, int]

_steps = st.lists(
    st.one_of(
        st.tuples(st.just("pod"), st.sampled_from([0, 0, 0, 0, 1])),
        st.tuples(st.sampled_from(["end", "other", "label", "same"]), st.integers(0, 200)),
    ),
    min_size=2,
    max_size=40,
)


def _replay(
    nodes: list[NodeBuilder],
    existing: list[PodBuilder],
    percentage: int | None,
    shapes: list[Callable[[str], PodView]],
    steps: list[Step],
    batches: LoneBatches | None,
    changes_kept: int | None = None,
) -> tuple[list[Outcome], RunnerMark]:
    profile = dataclasses.replace(PROFILE, percentage_of_nodes_to_score=percentage)
    snapshot = Snapshot([n.view() for n in nodes], [p.view() for p in existing])
    snapshot.changes_kept = changes_kept
    runner = ProfileRunner(profile, seed=11)
    runner.next_start = 5
    placed: list[PodView] = []
    outcomes: list[Outcome] = []
    for i, (what, k) in enumerate(steps):
        if what == "pod":
            pod = shapes[k](f"p{i}")
            if batches is None:
                result = runner.schedule_one(pod, snapshot)
            else:
                result = batches.schedule(runner, pod, snapshot)
            code = result.status.code
            outcomes.append(
                (result.node_name, code, result.evaluated_nodes, result.feasible_nodes, "")
            )
            if result.placed and result.node_name is not None:
                node = snapshot.get(result.node_name)
                assert node is not None
                placed.append(node.pods[pod.uid])
        elif what == "end" and placed:
            snapshot.forget(placed.pop(k % len(placed)))
        elif what == "other":
            target = snapshot.nodes[k % len(snapshot.nodes)].name
            other = make_pod(f"o{i}", "other").cpu("1").memory("1Gi").view()
            snapshot.assume(other, target)
        elif what in ("label", "same"):
            info = snapshot.nodes[k % len(snapshot.nodes)]
            labels = dict(info.node.labels)
            if what == "label":
                labels["zone"] = "b" if labels.get("zone") == "a" else "a"
            snapshot.update_node(dataclasses.replace(info.node, labels=labels))
    return outcomes, runner.mark()


@settings(max_examples=100, deadline=None)
@given(clusters(), _steps, st.integers(1, 8), st.booleans(), st.sampled_from([None, 0, 1, 3]))
def test_lone_pods_from_kept_batches_land_where_the_runner_puts_them(
    cluster: tuple[list[NodeBuilder], list[PodBuilder], int | None],
    steps: list[Step],
    cpu: int,
    zoned: bool,
    changes_kept: int | None,
) -> None:
    """Also with the snapshot's change log cut short (a few entries kept), where the batch
    falls back to comparing every node's generation."""
    nodes, existing, percentage = cluster
    shapes: list[Callable[[str], PodView]] = [
        lambda name: gpu_member(name, cpu, 1, "a" if zoned else None, False).view(),
        lambda name: gpu_member(name, 2, 0, None, True).view(),
    ]
    plain = _replay(nodes, existing, percentage, shapes, steps, None)
    batched = _replay(nodes, existing, percentage, shapes, steps, LoneBatches(), changes_kept)
    assert batched == plain


@settings(max_examples=60, deadline=None)
@given(clusters(), _steps, st.integers(1, 8))
def test_nodes_changed_since_the_last_pick_evaluated_plugin_by_plugin_land_as_the_runner(
    cluster: tuple[list[NodeBuilder], list[PodBuilder], int | None],
    steps: list[Step],
    cpu: int,
) -> None:
    """Every refresh with a changed node goes through `_evaluate_changed` (one plugin at a time
    over the changed nodes), not only those with a few of them."""
    nodes, existing, percentage = cluster
    shapes: list[Callable[[str], PodView]] = [
        lambda name: gpu_member(name, cpu, 1, None, False).view(),
        lambda name: gpu_member(name, 2, 0, None, True).view(),
    ]
    plain = _replay(nodes, existing, percentage, shapes, steps, None)
    with mock.patch.object(batch, "_FEW_CHANGED", 1):
        batched = _replay(nodes, existing, percentage, shapes, steps, LoneBatches())
    assert batched == plain


def _deployment(count: int) -> list[PodView]:
    return [
        make_pod(f"web-{i}", "shop").cpu("500m").memory("1Gi").label("app", "web").view()
        for i in range(count)
    ]


def test_a_deployment_is_batched_from_its_second_pod_and_lands_as_unbatched() -> None:
    nodes = [make_node(f"n{i}").cpu("8").memory("32Gi") for i in range(300)]
    places = []
    batches = LoneBatches()
    for keeper in (None, batches):
        snapshot = Snapshot([n.view() for n in nodes])
        runner = ProfileRunner(PROFILE, seed=1)
        chosen = []
        for pod in _deployment(60):
            if keeper is None:
                result = runner.schedule_one(pod, snapshot)
            else:
                result = keeper.schedule(runner, pod, snapshot)
            chosen.append(result.node_name)
        places.append((chosen, runner.mark()))
    assert places[0] == places[1]
    assert batches.batched == 59  # the first pod only marks its signature as seen


def test_a_runner_that_scores_every_node_batches_from_the_first_pod_as_unbatched() -> None:
    # percentageOfNodesToScore 100 (the simulator's paper method): the first cycle would
    # evaluate every node anyway, so the first pod builds the batch; a signature seen once
    # waits apart and pushes no kept batch out.
    profile = dataclasses.replace(PROFILE, percentage_of_nodes_to_score=100)
    nodes = [make_node(f"n{i}").cpu("8").memory("32Gi") for i in range(300)]
    places = []
    batches = LoneBatches()
    for keeper in (None, batches):
        snapshot = Snapshot([n.view() for n in nodes])
        runner = ProfileRunner(profile, seed=1)
        chosen = []
        oneoffs = [make_pod(f"x{k}").cpu(f"{k + 1}m").view() for k in range(80)]
        deployment = _deployment(60)
        for pod in deployment[:30] + oneoffs + deployment[30:]:  # one-offs in between
            if keeper is None:
                result = runner.schedule_one(pod, snapshot)
            else:
                result = keeper.schedule(runner, pod, snapshot)
            chosen.append(result.node_name)
        places.append(chosen)
    assert places[0] == places[1]
    assert (batches.batched, batches.built) == (60 + 80, 1 + 80)


@pytest.mark.parametrize(("kept", "built"), [(1, 3 * 20), (2, 3 * 20), (3, 3), (64, 3)])
def test_signatures_beyond_the_kept_number_are_built_again_and_land_as_unbatched(
    kept: int, built: int
) -> None:
    # Three deployments taking turns, every node scored: with fewer than three signatures
    # kept, each pod's batch was pushed out by the two before it and is built again.
    profile = dataclasses.replace(PROFILE, percentage_of_nodes_to_score=100)
    nodes = [make_node(f"n{i}").cpu("8").memory("32Gi") for i in range(100)]
    pods = [
        make_pod(f"{app}-{i}", "shop").cpu(cpu).memory("1Gi").label("app", app).view()
        for i in range(20)
        for app, cpu in (("web", "500m"), ("api", "700m"), ("db", "900m"))
    ]
    places = []
    batches = LoneBatches(kept)
    for keeper in (None, batches):
        snapshot = Snapshot([n.view() for n in nodes])
        runner = ProfileRunner(profile, seed=1)
        chosen = []
        for pod in pods:
            if keeper is None:
                result = runner.schedule_one(pod, snapshot)
            else:
                result = keeper.schedule(runner, pod, snapshot)
            chosen.append(result.node_name)
        places.append((chosen, runner.mark()))
    assert places[0] == places[1]
    assert batches.built == built


def test_a_node_update_that_moves_nothing_keeps_the_batch() -> None:
    nodes = [make_node(f"n{i}").cpu("8").memory("32Gi") for i in range(50)]
    snapshot = Snapshot([n.view() for n in nodes])
    runner = ProfileRunner(PROFILE, seed=1)
    batches = LoneBatches()
    pods = _deployment(4)
    batches.schedule(runner, pods[0], snapshot)
    batches.schedule(runner, pods[1], snapshot)  # builds the batch
    version = snapshot.version
    info = snapshot.nodes[3]
    snapshot.update_node(dataclasses.replace(info.node))  # a heartbeat: an equal view
    assert snapshot.version == version
    batches.schedule(runner, pods[2], snapshot)
    assert (batches.batched, batches.built) == (2, 1)
    snapshot.update_node(dataclasses.replace(info.node, labels={"zone": "c"}))
    assert snapshot.version == version + 1
    batches.schedule(runner, pods[3], snapshot)  # the batch is built again
    assert (batches.batched, batches.built) == (3, 2)


def test_a_scorer_that_learned_a_new_target_rescores_the_kept_batch() -> None:
    """GpuTopology's fragmentation target follows the arriving pods: when it moves, scores
    kept for unchanged nodes are stale, so the kept batch scores them again with it (the
    verdicts and the other plugins' scores stay: nothing else reads the target)."""
    profile = assemble_profile(default_registry(), "gpu-scheduler", DEFAULT_PLUGINS, {})
    learning = learning_scorers(ProfileRunner(profile, seed=1))
    assert [(name, type(p).__name__) for name, p in learning] == [("GpuTopology", "GpuTopology")]
    nodes = [make_node(f"n{i}").cpu("8").memory("32Gi") for i in range(50)]
    snapshot = Snapshot([n.view() for n in nodes])
    runner = ProfileRunner(profile, seed=1)
    batches = LoneBatches()
    pods = _deployment(5)
    batches.schedule(runner, pods[0], snapshot)
    batches.schedule(runner, pods[1], snapshot)  # builds the batch
    batches.schedule(runner, pods[2], snapshot)
    assert (batches.built, batches.rescored) == (1, 0)
    learning[0][1].scoring_version += 1  # as GpuTopology does when it adopts a new target
    batches.schedule(runner, pods[3], snapshot)
    batches.schedule(runner, pods[4], snapshot)
    assert (batches.built, batches.rescored, batches.batched) == (1, 1, 4)

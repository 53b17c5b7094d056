"""Snapshot accounting and the trial overlay that gangs and what-ifs use."""

from __future__ import annotations

import pytest

from tests.builders import make_node, make_pod, snapshot_of


def test_bound_pods_count_on_their_node_and_finished_pods_do_not() -> None:
    snap = snapshot_of(
        [make_node("n1")],
        [
            make_pod("run").cpu("1").node("n1"),
            make_pod("done").cpu("2").node("n1").phase("Succeeded"),
        ],
    )
    info = snap.get("n1")
    assert info is not None
    assert info.req_milli_cpu == 1000 and len(info.pods) == 1


def test_a_discarded_trial_leaves_the_snapshot_as_it_was() -> None:
    snap = snapshot_of([make_node("n1"), make_node("n2")], [make_pod("run").cpu("1").node("n1")])
    trial = snap.begin_trial()
    snap.assume(make_pod("a").cpu("1").gpus(0).view(), "n1")
    snap.assume(make_pod("b").cpu("2").host_port(80).view(), "n2")
    running = snap.node_of("uid-default-run")
    assert running is not None
    snap.forget(next(iter(running.pods.values())))
    trial.discard()
    n1, n2 = snap.get("n1"), snap.get("n2")
    assert n1 is not None and n2 is not None
    assert (n1.req_milli_cpu, len(n1.pods), n2.req_milli_cpu, n2.used_ports) == (1000, 1, 0, [])


def test_a_committed_trial_keeps_its_placements() -> None:
    snap = snapshot_of([make_node("n1")])
    with snap.begin_trial() as trial:
        snap.assume(make_pod("a").cpu("1").view(), "n1")
        trial.commit()
    info = snap.get("n1")
    assert info is not None and info.req_milli_cpu == 1000


def test_leaving_a_trial_block_without_commit_rolls_back() -> None:
    snap = snapshot_of([make_node("n1")])
    with snap.begin_trial():
        snap.assume(make_pod("a").cpu("1").view(), "n1")
    info = snap.get("n1")
    assert info is not None and info.req_milli_cpu == 0


def test_nested_trials_roll_back_innermost_first() -> None:
    snap = snapshot_of([make_node("n1")])
    outer = snap.begin_trial()
    snap.assume(make_pod("a").cpu("1").view(), "n1")
    inner = snap.begin_trial()
    snap.assume(make_pod("b").cpu("1").view(), "n1")
    inner.commit()
    with pytest.raises(RuntimeError):
        inner.discard()
    outer.discard()
    info = snap.get("n1")
    assert info is not None and info.req_milli_cpu == 0 and not info.pods


def test_ending_an_outer_trial_before_the_inner_is_an_error() -> None:
    snap = snapshot_of([make_node("n1")])
    outer = snap.begin_trial()
    snap.begin_trial()
    with pytest.raises(RuntimeError):
        outer.commit()


def test_a_pod_cannot_be_counted_twice() -> None:
    snap = snapshot_of([make_node("n1"), make_node("n2")])
    pod = make_pod("a").view()
    snap.assume(pod, "n1")
    with pytest.raises(ValueError):
        snap.assume(pod, "n2")


def test_affinity_counters_follow_placements() -> None:
    anti = make_pod("anti").affinity(
        "podAntiAffinity",
        {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "x"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        },
    )
    snap = snapshot_of([make_node("n1")])
    with snap.begin_trial():
        snap.assume(anti.view(), "n1")
        assert (snap.pods_with_affinity, snap.pods_with_required_anti_affinity) == (1, 1)
    assert (snap.pods_with_affinity, snap.pods_with_required_anti_affinity) == (0, 0)

"""Extender verdicts in a batched gang trial: the runtime fetches one verdict per scheduling
signature (extenders/fetch.py), so the Extenders plugin is node-local for a signature and a
batched trial must place every member exactly as the unbatched runner does."""

from __future__ import annotations

import random
from collections.abc import Hashable

from hypothesis import given, settings
from hypothesis import strategies as st

from batchsched.framework.batch_build import build_batch
from batchsched.framework.profile import Profile
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.signature import signature
from batchsched.model.pod import PodView
from batchsched.plugins.extenders import ExtenderVerdict, with_extenders
from batchsched.snapshot import Snapshot
from tests.builders import NodeBuilder, PodBuilder
from tests.framework.test_batch import (
    PROFILE,
    big_cluster,
    clusters,
    gangs,
    gpu_member,
    run_members,
)


class BySignature:
    """A VerdictSource answering per signature, as the fetched verdicts are shared: each
    signature refuses, refuses unresolvably and scores nodes at random (seeded)."""

    def __init__(self, seed: int, nodes: list[str]) -> None:
        self.seed, self.nodes = seed, nodes
        self.verdicts: dict[Hashable, ExtenderVerdict] = {}

    def verdict(self, pod: PodView) -> ExtenderVerdict | None:
        key = signature(pod)
        if key not in self.verdicts:
            rng = random.Random(f"{self.seed}-{len(self.verdicts)}")
            refused = {n: "no" for n in self.nodes if rng.random() < 0.2}
            unresolvable = {
                n: "never" for n in self.nodes if n not in refused and rng.random() < 0.1
            }
            allowed = frozenset(self.nodes) - set(refused) - set(unresolvable)
            scores = {n: rng.randrange(0, 11) * 30 for n in allowed}
            self.verdicts[key] = ExtenderVerdict(allowed, refused, unresolvable, scores, 3)
        return self.verdicts[key]


@settings(max_examples=80, deadline=None)
@given(clusters(), gangs(), st.integers(0, 1000))
def test_batched_members_with_extender_verdicts_get_the_runners_decisions(
    cluster: tuple[list[NodeBuilder], list[PodBuilder], int | None],
    pods: list[PodView],
    seed: int,
) -> None:
    nodes, existing, _ = cluster
    names = [n.view().name for n in nodes]
    source = BySignature(seed, names)
    profile = with_extenders({"p": PROFILE}, source, 3)["p"]
    plain, plain_mark, none = run_members(profile, nodes, existing, pods, "never")
    batched, batched_mark, _ = run_members(profile, nodes, existing, pods, "always")
    assert none == 0
    assert batched == plain
    assert batched_mark == plain_mark


def test_a_gang_with_extender_verdicts_is_batched() -> None:
    nodes = big_cluster(30)
    source = BySignature(1, [n.view().name for n in nodes])
    profile = with_extenders({"p": PROFILE}, source, 3)["p"]
    pod = gpu_member("m", 1, 1, None, False).view()
    assert build_batch_for(profile, pod, nodes)
    pods = [gpu_member(f"m{i}", 1, 1, None, False).view() for i in range(20)]
    _, _, count = run_members(profile, nodes, [], pods, "always")
    assert count == 20


def build_batch_for(profile: Profile, pod: PodView, nodes: list[NodeBuilder]) -> bool:
    snapshot = Snapshot([n.view() for n in nodes])
    return build_batch(ProfileRunner(profile), pod, snapshot, None) is not None

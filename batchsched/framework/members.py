"""A gang trial's members scheduled one by one, identical ones through a SignatureBatch.

A learning scorer's scoring may move during the trial (GpuTopology re-prices the places left
on scarce nodes after each Reserve): a batch then re-scores with that scorer before its next
pick, as lone_batches.py does between cycles, so a batched member is placed where the runner
would place it."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal

from batchsched.framework.batch import SignatureBatch
from batchsched.framework.batch_build import build_batch
from batchsched.framework.lone_batches import learning_scorers, moved_since, scoring_versions
from batchsched.framework.runner import (
    ProfileRunner,
    ScheduleResult,
    Within,
    num_feasible_nodes_to_find,
)
from batchsched.framework.signature import signature
from batchsched.model.pod import PodView
from batchsched.snapshot import Snapshot

Batching = Literal["auto", "always", "never"]


class GangMembers:
    """Schedules a gang trial's members one by one, batching those that share a signature.

    `batching`: "auto" batches a signature when its members' samples would cover the candidate
    nodes more than once between them (fewer members would each filter fresh nodes anyway, so
    the kept results would never be read again); "always" and "never" are for tests."""

    __slots__ = (
        "_batches",
        "_batching",
        "_keys",
        "_learning",
        "_members",
        "_runner",
        "_snapshot",
        "_versions",
        "_within",
        "batched",
    )

    def __init__(
        self,
        runner: ProfileRunner,
        snapshot: Snapshot,
        pending: Sequence[PodView],
        within: Within | None = None,
        batching: Batching = "auto",
    ) -> None:
        self._runner, self._snapshot, self._within = runner, snapshot, within
        self._batching = batching
        self.batched = 0  # members answered from kept results (tests and profiling read it)
        # Signatures worth a batch and how many members share each; empty when none is (then
        # no member pays for a signature: a 3-pod gang on 5000 nodes keeps the runner's path).
        self._members: dict[Hashable, int] = {}
        self._keys: dict[str, Hashable | None] = {}  # by pod uid: computed once per member
        if batching == "always" or (batching == "auto" and self._worth_it(len(pending))):
            for pod in pending:
                key = self._keys[pod.uid] = signature(pod)
                if key is not None:
                    self._members[key] = self._members.get(key, 0) + 1
        self._batches: dict[Hashable, SignatureBatch | None] = {}
        self._learning = learning_scorers(runner)
        # per batch, its learning scorers' scoring versions when it last scored
        self._versions: dict[Hashable, tuple[int, ...]] = {}

    def schedule(self, pod: PodView) -> ScheduleResult:
        """What runner.schedule_one(pod, snapshot, within) would return, the same way."""
        # A pod not among `pending` has no kept signature: the runner schedules it.
        key = self._keys.get(pod.uid) if self._members else None
        batch = self._batch_for(key, pod) if key is not None else None
        if batch is not None and not self._caught_up(key, batch, pod):
            batch = self._batches[key] = None  # the runner answers for this signature now
        result = batch.schedule(pod) if batch is not None else None
        if result is not None:
            self.batched += 1
        else:
            if batch is not None:
                self._batches[key] = None  # the runner answers for this signature from now on
            result = self._runner.schedule_one(pod, self._snapshot, self._within)
        if result.node_name is not None:
            # The node this pod went to (or was tried on) changed for every other signature.
            for other in self._batches.values():
                if other is not None:
                    other.changed(result.node_name)
        return result

    @property
    def kept_picks(self) -> int:
        """Members picked from a batch's kept window rows (framework/batch_totals.py)."""
        return sum(b.kept_picks for b in self._batches.values() if b is not None)

    @property
    def feasible_picks(self) -> int:
        """Members picked from the rows of every feasible node (framework/batch_totals.py)."""
        return sum(b.feasible_picks for b in self._batches.values() if b is not None)

    def _caught_up(self, key: Hashable, batch: SignatureBatch, pod: PodView) -> bool:
        """Re-score `batch` with the learning scorers whose scoring moved since it last
        scored; False when it cannot (it must be dropped)."""
        moved = moved_since(self._learning, self._versions[key])  # set when it was built
        if not moved:
            return True
        if not batch.rescore(pod, moved):
            return False
        self._versions[key] = scoring_versions(self._learning)
        return True

    def _batch_for(self, key: Hashable, pod: PodView) -> SignatureBatch | None:
        if key in self._batches:
            return self._batches[key]
        batch: SignatureBatch | None = None
        members = self._members.get(key, 0)
        if members >= 2 and (self._batching == "always" or self._worth_it(members)):
            batch = build_batch(self._runner, pod, self._snapshot, self._within)
            self._versions[key] = scoring_versions(self._learning)
        self._batches[key] = batch
        return batch

    def _worth_it(self, members: int) -> bool:
        nodes = len(self._snapshot) if self._within is None else len(self._within.nodes)
        percentage = self._runner.profile.percentage_of_nodes_to_score
        wanted = num_feasible_nodes_to_find(percentage, nodes)
        return members * min(wanted, nodes) > nodes

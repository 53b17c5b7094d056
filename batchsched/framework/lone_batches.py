"""Opportunistic batching across cycles: lone pods that share a signature, one after another.

A Deployment's or a Job's pods arrive together and differ only in name: kube-scheduler 1.35
(KEP-5598) keeps one pod's filter and score results for the next pod with the same
scheduling signature. `SignatureBatch` (framework/batch.py) does that inside a gang trial;
here the same batch is kept from one cycle to the next, under the same rules and with the
same result as the runner: every node a cycle changed in between is evaluated again.

What "changed" means across cycles:
- a pod placed on, or taken off, a node (ours, a binding confirmed, a pod that finished, a
  trial undone) changes that node's generation: the batch evaluates that node again;
- a learning scorer's `scoring_version` (GpuTopology's fragmentation target moved) changes
  that scorer's PreScore and raw scores and nothing else: no Filter and no other Score
  plugin reads what it learns. The batch runs that PreScore again and re-scores the
  feasible nodes with it alone (`SignatureBatch.rescore`), as a rebuild would score them;
- anything else (a node added, updated or removed, measured topology or load, pods with
  inter-pod affinity, DRA objects) may change what PreFilter, PreScore and Score computed
  once for the signature: the batch is dropped and the next pod of that signature builds a
  new one.

A signature gets a batch on its second pod: building one evaluates every candidate node
(the runner filters only a sample), which pays only when more pods follow. A runner that
evaluates every node anyway (percentageOfNodesToScore 100: the simulator's paper method)
builds it on the first pod, for the cost of the cycle it replaces; that batch waits apart,
with the signatures seen once, until a second pod promotes it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Final, TypeVar

from batchsched.framework.batch import SignatureBatch
from batchsched.framework.batch_build import build_batch
from batchsched.framework.interfaces import VersionedScoring
from batchsched.framework.runner import ProfileRunner, ScheduleResult
from batchsched.framework.signature import signature
from batchsched.model.pod import PodView
from batchsched.snapshot import Snapshot

# Signatures remembered (seen once, or with a batch): the most recent ones. A batch holds a
# few lists as long as the candidate list (~0.6 MB at 5000 nodes); the simulator keeps more.
KEPT: Final = 64

World = tuple[int, int, int, int, int]
Learning = tuple[tuple[str, VersionedScoring], ...]  # (name, plugin) of the scorers that learn
V = TypeVar("V")


def world_of(snapshot: Snapshot) -> World:
    """The snapshot-wide facts a signature's PreFilter and PreScore may have read."""
    return (
        snapshot.version,
        len(snapshot.nodes),
        snapshot.pods_with_affinity,
        snapshot.pods_with_required_anti_affinity,
        snapshot.dra.version,
    )


@dataclass(slots=True)
class _Kept:
    runner: ProfileRunner
    snapshot: Snapshot
    world: World
    batch: SignatureBatch | None  # None: the signature cannot be batched in this world
    mark: int  # the snapshot's change log when the batch last looked (change_mark)
    seen: int  # the newest node generation then: a node changed since has a newer one
    learning: Learning  # the runner's scorers that learn
    versions: tuple[int, ...]  # their scoring versions when the batch was built or rescored

    def valid_for(self, runner: ProfileRunner, snapshot: Snapshot) -> bool:
        """Built for this runner and snapshot, in the same world (its scorers may have
        learned since: `moved`)."""
        return (
            self.runner is runner and self.snapshot is snapshot and self.world == world_of(snapshot)
        )

    def moved(self) -> frozenset[str]:
        """The learning scorers whose scoring moved since the batch last scored."""
        return moved_since(self.learning, self.versions)

    def catch_up(self, batch: SignatureBatch) -> None:
        """Mark the nodes whose generation moved since the last pick: those in the
        snapshot's change log since then, or, when the log was cut short, every node with a
        newer generation than the newest seen (generations only grow)."""
        snapshot = self.snapshot
        changed = snapshot.changed_since(self.mark)
        seen = self.seen
        if changed is None:
            changed = [info for info in snapshot.nodes if info.generation > seen]
        batch.changed_nodes(changed)
        self.seen = max(seen, max((info.generation for info in changed), default=seen))
        self.mark = snapshot.change_mark()


class LoneBatches:
    """The batches kept for lone pods, by signature (module doc)."""

    __slots__ = ("_kept", "_limit", "_seen", "batched", "built", "rescored")

    def __init__(self, kept: int = KEPT) -> None:
        self._limit = kept  # signatures remembered, with a batch and seen once alike
        self._kept: OrderedDict[Hashable, _Kept] = OrderedDict()
        # Signatures seen once, with their first pod's batch where one was built then.
        self._seen: OrderedDict[Hashable, _Kept | None] = OrderedDict()
        self.batched = 0  # pods answered from a batch (tests and profiling read these two)
        self.built = 0  # batches built
        self.rescored = 0  # batches kept with a learning scorer's scores recomputed

    def schedule(self, runner: ProfileRunner, pod: PodView, snapshot: Snapshot) -> ScheduleResult:
        """What `runner.schedule_one(pod, snapshot)` returns, the same way."""
        key = signature(pod)
        batch = self._batch_for(key, runner, pod, snapshot) if key is not None else None
        result = batch.schedule(pod) if batch is not None else None
        if result is not None:
            self.batched += 1
            return result
        if batch is not None:
            self._kept.pop(key, None)  # it handed the pod back: the runner answers, fresh
            self._seen.pop(key, None)
        return runner.schedule_one(pod, snapshot)

    def _batch_for(
        self, key: Hashable, runner: ProfileRunner, pod: PodView, snapshot: Snapshot
    ) -> SignatureBatch | None:
        kept = self._kept.get(key)
        if kept is None and (first := self._seen.get(key)) is not None:
            kept = first  # its second pod: the first one's batch is kept from now on
            del self._seen[key]
            _remember(self._kept, key, kept, self._limit)
        if kept is not None and kept.valid_for(runner, snapshot):
            batch, moved = kept.batch, kept.moved()
            if batch is not None:
                kept.catch_up(batch)
            # Only a learning scorer moved: its scores alone are recomputed, not the batch.
            if not moved or (batch is not None and batch.rescore(pod, moved)):
                if moved:
                    self.rescored += 1
                    kept.versions = scoring_versions(kept.learning)
                self._kept.move_to_end(key)
                return batch
        if kept is None and key not in self._seen:
            # Its first pod: a batch only where a cycle would evaluate every node anyway,
            # kept apart (`_seen`) until a second pod comes, so one-off signatures do not
            # push out the batches of those that recur.
            first = self._build(runner, pod, snapshot) if _scores_every_node(runner) else None
            _remember(self._seen, key, first, self._limit)
            return None if first is None else first.batch
        self._seen.pop(key, None)
        kept = self._build(runner, pod, snapshot)
        _remember(self._kept, key, kept, self._limit)
        return kept.batch

    def _build(self, runner: ProfileRunner, pod: PodView, snapshot: Snapshot) -> _Kept:
        world = world_of(snapshot)
        batch = build_batch(runner, pod, snapshot, None)
        self.built += 1
        mark = snapshot.change_mark()
        seen = max((info.generation for info in snapshot.nodes), default=0)
        learning = learning_scorers(runner)
        versions = scoring_versions(learning)
        return _Kept(runner, snapshot, world, batch, mark, seen, learning, versions)

    def clear(self) -> None:
        self._kept.clear()
        self._seen.clear()


def learning_scorers(runner: ProfileRunner) -> Learning:
    """The runner's Score plugins whose scores may move with no node changing, by name."""
    return tuple(
        (s.plugin.name, s.plugin)
        for s in runner.profile.score
        if isinstance(s.plugin, VersionedScoring)
    )


def scoring_versions(learning: Learning) -> tuple[int, ...]:
    """The learning scorers' scoring versions now, in order."""
    return tuple(p.scoring_version for _, p in learning)


def moved_since(learning: Learning, versions: tuple[int, ...]) -> frozenset[str]:
    """The learning scorers whose scoring version is no longer the one in `versions`."""
    return frozenset(
        name for (name, p), v in zip(learning, versions, strict=True) if p.scoring_version != v
    )


def _scores_every_node(runner: ProfileRunner) -> bool:
    """The runner filters and scores every node (percentageOfNodesToScore 100, the paper's
    method): a first cycle costs what building the batch costs."""
    return (runner.profile.percentage_of_nodes_to_score or 0) >= 100


def _remember(memory: OrderedDict[Hashable, V], key: Hashable, value: V, limit: int) -> None:
    memory[key] = value
    memory.move_to_end(key)
    while len(memory) > limit:
        memory.popitem(last=False)

"""Backfill in the live scheduler: gangs that do not fit get reservations, later gangs start
only where they delay none of them.

A gang (or single pod) whose cycle finds no room is `blocked`. The first K blocked gangs in
queue order (priority, then how long they have waited), and any that waited past the
starvation limit, get a reservation from `batchsched.backfill.Planner`: the earliest time and
nodes at which it can start, from running pods' expected ends. Before another gang or pod is
bound, `conflict` asks whether its start would make a reservation no longer fit; if so it
waits. A reservation holds back only gangs behind its own in line (priority, then how
long blocked): a gang of higher priority, or one blocked earlier, goes first.

The plan is rebuilt from the snapshot when the blocked set changes and every `refresh_s`
(pods end early, other schedulers bind); between rebuilds, pods that start are added to it.
Times are on the scheduler's monotonic clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from batchsched.backfill import (
    GangDemand,
    Planner,
    Reservation,
    Running,
    vector,
)
from batchsched.backfill_verdicts import NodeVerdicts
from batchsched.clock import Clock
from batchsched.model.pod import PodView
from batchsched.snapshot import Snapshot

logger = logging.getLogger(__name__)

ESTIMATE_LIMIT = 64  # gangs beyond the protected ones that still get an estimated start
EndsAt = Callable[[PodView], float | None]  # expected end of a running pod (monotonic)
Eligible = Callable[[PodView], tuple[str, ...]]  # nodes a pending pod may use at all


@dataclass(slots=True)
class _Blocked:
    key: str
    pods: tuple[PodView, ...]
    priority: int
    since: float
    runtime: float | None
    domains: tuple[frozenset[str], ...] = ()  # a required topology level's domains


class LiveBackfill:
    def __init__(
        self,
        clock: Clock,
        reservations: int = 4,
        starvation_s: float = 3600.0,
        refresh_s: float = 5.0,
    ) -> None:
        self.clock = clock
        self.limit = reservations
        self.starvation_s = starvation_s
        self.refresh_s = refresh_s
        self._blocked: dict[str, _Blocked] = {}
        self._planner: Planner | None = None
        self._planned_at = float("-inf")
        # Reserved gang -> its place in line: (-priority, blocked since, key). A reservation
        # holds back only gangs behind it in that order, never one ahead of it.
        self._rank: dict[str, tuple[int, float, str]] = {}
        self._added: list[str] = []  # blocked since the plan was built, not planned yet

    def set_limits(self, reservations: int, starvation_s: float) -> None:
        self.limit, self.starvation_s = reservations, starvation_s
        self._planner = None

    def block(
        self,
        key: str,
        pods: Sequence[PodView],
        runtime: float | None,
        domains: tuple[frozenset[str], ...] = (),
    ) -> None:
        """The gang `key` found no room this cycle; `domains`: it must start inside one of
        these (its required topology level's domains)."""
        known = self._blocked.get(key)
        since = known.since if known is not None else self.clock.now()
        priority = max(p.priority for p in pods)
        self._blocked[key] = _Blocked(key, tuple(pods), priority, since, runtime, domains)
        if known is not None and known.pods != tuple(pods):
            self._planner = None  # the gang changed: plan it again from the start
        elif known is None and self._planner is not None:
            self._added.append(key)  # planned on top at the next question, not from scratch

    def unblock(self, key: str) -> None:
        """Placed, deleted, or refused by quota: it no longer waits for capacity. Its
        reservation is taken out of the plan; the plan is rebuilt in full every refresh_s."""
        if self._blocked.pop(key, None) is None:
            return
        if self._planner is not None:
            self._planner.release(key)
        self._rank.pop(key, None)

    def conflict(
        self,
        key: str,
        priority: int,
        starting: Sequence[Running],
        snapshot: Snapshot,
        ends_at: EndsAt,
        eligible: Eligible,
        placing: Collection[str] = (),
    ) -> Reservation | None:
        """The first reservation that `starting` (gang `key`'s pods, placed now) would delay;
        None when they may start. `placing`: the uids of those pods, which the runner has
        already reserved in the snapshot; a plan rebuilt now must not count them as running,
        or the reservation would move behind them and they would always pass."""
        planner = self._plan(snapshot, ends_at, eligible, placing)
        if planner is None:
            return None
        ahead = self._ahead_of(planner, key, priority)
        for reservation in planner.conflicts(starting):
            if reservation.key in ahead:
                return reservation
        return None

    def verdicts(
        self,
        key: str,
        priority: int,
        requests: Mapping[str, int],
        pod_ends_at: float | None,
        snapshot: Snapshot,
        ends_at: EndsAt,
        eligible: Eligible,
    ) -> NodeVerdicts | None:
        """Where a pod of gang `key` must not start now (None: no reservation ahead of it)."""
        planner = self._plan(snapshot, ends_at, eligible)
        if planner is None:
            return None
        ahead = self._ahead_of(planner, key, priority)
        return NodeVerdicts(planner, ahead, requests, pod_ends_at) if ahead else None

    def _ahead_of(self, planner: Planner, key: str, priority: int) -> frozenset[str]:
        """Protected reservations ahead of gang `key` in line (never its own)."""
        known = self._blocked.get(key)
        # A gang never blocked is behind every blocked gang of its priority.
        mine = (-priority, known.since if known is not None else float("inf"), key)
        return frozenset(
            r.key
            for r in planner.reservations
            if r.protected and r.key != key and self._rank.get(r.key, mine) < mine
        )

    def started(self, key: str, starting: Sequence[Running]) -> None:
        self.unblock(key)
        if self._planner is not None:
            self._planner.start(starting)

    def estimates(
        self, snapshot: Snapshot, ends_at: EndsAt, eligible: Eligible
    ) -> Mapping[str, float]:
        """Planned start (monotonic) of each gang that holds a reservation."""
        planner = self._plan(snapshot, ends_at, eligible)
        if planner is None:
            return {}
        return {r.key: r.start for r in planner.reservations}

    def protected(self, snapshot: Snapshot, ends_at: EndsAt, eligible: Eligible) -> frozenset[str]:
        """The gangs whose reservations hold others back (the first K, and starving ones)."""
        planner = self._plan(snapshot, ends_at, eligible)
        if planner is None:
            return frozenset()
        return frozenset(r.key for r in planner.reservations if r.protected)

    def holding(self) -> frozenset[str]:
        """The gangs whose reservations hold others back in the plan as it stands (no
        rebuild): when one leaves, the pods it held back may start."""
        if self._planner is None:
            return frozenset()
        return frozenset(r.key for r in self._planner.reservations if r.protected)

    def blocked_keys(self) -> list[str]:
        return sorted(self._blocked)

    def _plan(
        self,
        snapshot: Snapshot,
        ends_at: EndsAt,
        eligible: Eligible,
        placing: Collection[str] = (),
    ) -> Planner | None:
        now = self.clock.now()
        if not self._blocked:
            self._planner = None
            return None
        if self._planner is not None and now - self._planned_at < self.refresh_s:
            self._plan_added(self._planner, eligible, now)
            return self._planner
        allocatable = {
            i.name: vector(i.node.allocatable, i.node.allocatable.pods) for i in snapshot.nodes
        }
        running = [
            Running(info.name, vector(pod.requests), ends_at(pod))
            for info in snapshot.nodes
            for pod in info.pods.values()
            if pod.uid not in placing
        ]
        planner = Planner(allocatable, running, now)
        self._rank = {}
        for blocked, protected in self._chosen(now):
            self._reserve(planner, blocked, eligible, protected)
        self._planner, self._planned_at = planner, now
        self._added = []
        logger.debug(
            "backfill plan reservations=%s",
            ",".join(f"{r.key}@{r.start - now:.0f}s" for r in planner.reservations),
        )
        return planner

    def _plan_added(self, planner: Planner, eligible: Eligible, now: float) -> None:
        """Gangs blocked since the plan was built go on top of it, in the order they came:
        protected while fewer than K are (or when starving), else for an estimate only. The
        next full rebuild puts everyone back in priority order."""
        added, self._added = self._added, []
        for key in added:
            blocked = self._blocked.get(key)
            if blocked is None or key in self._rank:
                continue
            held = sum(1 for r in planner.reservations if r.protected)
            protected = held < self.limit or now - blocked.since >= self.starvation_s
            if not protected and len(planner.reservations) - held >= ESTIMATE_LIMIT:
                continue
            self._reserve(planner, blocked, eligible, protected)

    def _reserve(
        self, planner: Planner, blocked: _Blocked, eligible: Eligible, protected: bool
    ) -> None:
        demand = GangDemand(
            blocked.key,
            tuple(vector(p.requests) for p in blocked.pods),
            eligible(blocked.pods[0]),
            blocked.runtime,
            protected,
            blocked.domains,
        )
        planner.reserve(demand)
        self._rank[blocked.key] = (-blocked.priority, blocked.since, blocked.key)

    def _chosen(self, now: float) -> list[tuple[_Blocked, bool]]:
        """Protected: the first K blocked gangs by priority then wait, and every starving one.
        Then, for an estimated start only (nothing is held back for them), the others in line,
        up to ESTIMATE_LIMIT."""
        ordered = sorted(self._blocked.values(), key=lambda b: (-b.priority, b.since, b.key))
        rest = ordered[self.limit :]
        protected = ordered[: self.limit] + [b for b in rest if now - b.since >= self.starvation_s]
        chosen = {b.key for b in protected}
        others = [b for b in rest if b.key not in chosen][:ESTIMATE_LIMIT]
        return [(b, True) for b in protected] + [(b, False) for b in others]

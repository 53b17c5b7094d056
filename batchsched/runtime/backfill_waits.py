"""Backfill in the live scheduler: the workload cycle's Holds policy (would starting these
placements now delay a reservation?), the BackfillReservations plugin's verdicts, and what
the reservations learn from each cycle (started, blocked).

The checks are the pure ones (`batchsched.backfill`); this module gives them the live inputs
(expected runtimes, start times). A bad expected-runtime annotation is reported once.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from batchsched.backfill import (
    Running,
    vector,
)
from batchsched.backfill_verdicts import NodeVerdicts
from batchsched.expected_runtime import InvalidRuntime, gang_runtime, human_duration
from batchsched.gang.core import eligible_nodes
from batchsched.gang.podgroup import pod_group_of
from batchsched.model.pod import PodView
from batchsched.preemption.domains import required_domains
from batchsched.runtime.live import Live

logger = logging.getLogger(__name__)


class BackfillWaits:
    def __init__(self, live: Live) -> None:
        self.live = live
        self._reported: set[str] = set()  # objects whose bad runtime annotation was reported
        # The last `starting` result and its pods' uids: `held_back` is asked about it next.
        self._placing: tuple[list[Running], frozenset[str]] = ([], frozenset())

    # Backfill

    def key_of(self, pod: PodView) -> str:
        group = pod_group_of(pod)
        return group if group is not None else f"pod:{pod.key}"

    def starting(self, placed: Sequence[tuple[PodView, str]]) -> list[Running]:
        now = self.live.clock.now()
        out = []
        for pod, node in placed:
            runtime = self.runtime_of(pod)
            out.append(
                Running(node, vector(pod.requests), None if runtime is None else now + runtime)
            )
        self._placing = (out, frozenset(pod.uid for pod, _ in placed))
        return out

    def held_back(self, key: str, priority: int, starting: Sequence[Running]) -> str:
        """Why these pods may not start now (a reservation they would delay), or ""."""
        backfill = self.live.backfill
        if backfill is None or not starting:
            return ""
        last, uids = self._placing
        reservation = backfill.conflict(
            key,
            priority,
            starting,
            self.live.cache.snapshot,
            self.ends_at,
            self.eligible,
            placing=uids if starting is last else (),
        )
        if reservation is None:
            return ""
        wait = max(0.0, reservation.start - self.live.clock.now())
        nodes = ",".join(sorted(reservation.nodes)[:4])
        return (
            f"backfill: starting now would delay {reservation.key}, which holds a reservation "
            f"to start in {human_duration(wait)} on {nodes}"
        )

    def verdicts(self, pod: PodView) -> NodeVerdicts | None:
        """The BackfillReservations plugin's question: where must this pod not start now?"""
        backfill = self.live.backfill
        if backfill is None:
            return None
        runtime = self.runtime_of(pod)
        end = None if runtime is None else self.live.clock.now() + runtime
        return backfill.verdicts(
            self.key_of(pod),
            pod.priority,
            vector(pod.requests),
            end,
            self.live.cache.snapshot,
            self.ends_at,
            self.eligible,
        )

    def started(self, key: str, starting: Sequence[Running]) -> None:
        backfill = self.live.backfill
        if backfill is not None:
            if backfill.holding() - {key}:  # another gang's reservation holds capacity
                self.live.metrics.backfilled_pods.inc(len(starting))
            backfill.started(key, starting)

    def blocked(self, key: str, pods: Sequence[PodView]) -> None:
        backfill = self.live.backfill
        if backfill is None or not pods:
            return
        if self.preempting(key):
            backfill.unblock(key)  # its capacity is held while the victims go: no reservation
            return
        backfill.block(key, pods, self.runtime_of(pods[0]), self.domains_of(pods[0]))

    def domains_of(self, pod: PodView) -> tuple[frozenset[str], ...]:
        """The domains (node names) of the level the pod's gang requires, as its profile's
        TopologyDomains resolves it: its reservation must lie inside one. Empty: anywhere."""
        key = pod_group_of(pod)
        group = self.live.gangs.group(key) if key is not None else None
        if group is None:
            return ()
        profile = self.live.runner_for(pod).profile
        return required_domains(profile, group, self.live.cache.snapshot.nodes)

    def preempting(self, key: str) -> bool:
        return self.live.preempting_now(key)

    def runtime_of(self, pod: PodView) -> float | None:
        """The expected runtime: the PodGroup's annotation, the pod's, activeDeadlineSeconds."""
        key = pod_group_of(pod)
        group = self.live.gangs.group(key) if key is not None else None
        try:
            return gang_runtime(pod, group.annotations if group is not None else None)
        except InvalidRuntime as err:
            self._report_bad_runtime(key or pod.key, pod, str(err))
            return None

    def ends_at(self, pod: PodView) -> float | None:
        """When a running pod is expected to end, on the monotonic clock; None: unknown."""
        runtime = self.runtime_of(pod)
        if runtime is None:
            return None
        now = self.live.clock.now()
        tenants = self.live.tenants
        began = tenants.started.get(pod.uid) if tenants is not None else None
        if began is None:
            wall = pod.start_time or pod.creation_time
            began = now - max(0.0, self.live.clock.wall() - wall) if wall else now
        return began + runtime

    def eligible(self, pod: PodView) -> tuple[str, ...]:
        runner = self.live.runner_for(pod)
        return tuple(i.name for i in eligible_nodes(runner, pod, self.live.cache.snapshot))

    def _report_bad_runtime(self, key: str, pod: PodView, why: str) -> None:
        if key in self._reported:
            return
        self._reported.add(key)
        logger.warning("invalid expected runtime object=%s error=%s", key, why)
        self.live.metrics.invalid_annotations.labels(annotation="expected-runtime").inc()
        note = f"{why}; runtime unknown"
        self.live.record(pod, "Warning", "InvalidAnnotation", "Scheduling", note)

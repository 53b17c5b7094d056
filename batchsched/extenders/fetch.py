"""Asking the configured extenders about the pods of the next cycle, before it runs.

kube-scheduler calls extenders inside its scheduling cycle; batchsched's cycle is pure and
synchronous (docs/architecture.md, "HTTP extenders"), so the runtime awaits `prefetch` for
the workload's pods first and the Extenders plugin reads the answers as data. The semantics
are kube's (pkg/scheduler/extender.go and schedule_one.go):

- an extender is asked only about pods it is interested in (managedResources);
- filter: extenders run in order, each on the nodes the previous ones let through; a node in
  FailedAndUnresolvableNodes is unresolvable (preemption cannot help), one in FailedNodes or
  left out is unschedulable; an error or timeout skips an `ignorable` extender and otherwise
  fails the pod's cycle with the error;
- prioritize: the nodes that passed, every interested extender at once; a failing prioritizer
  is skipped whatever `ignorable` says; each score is scaled by weight * 100 / 10.

A gang's members are asked before its trial, and the trial applies each member's verdict as
it places that member. Members that share a scheduling signature (framework/batch.py: same
namespace, requests, constraints, labels and annotations; names and uids differ) are asked
once, with the first one's Pod, and share the answer: an N-member gang of identical pods
costs one filter and one prioritize call per extender, not N, and the gang trial may batch
them (the Extenders plugin is node-local for one signature).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable, Iterable, Sequence

from batchsched.extenders.client import ExtenderClient, ExtenderUnavailable, Observe
from batchsched.extenders.preempt import ExtenderPreemption
from batchsched.extenders.protocol import (
    ProtocolError,
    extender_args,
    parse_filter_result,
    parse_priorities,
    scaled,
)
from batchsched.extenders.settings import ExtenderSettings
from batchsched.framework.signature import signature
from batchsched.model.node import NodeView
from batchsched.model.pod import PodView
from batchsched.plugins.extenders import ExtenderVerdict

logger = logging.getLogger(__name__)

NOT_FETCHED = "no extender verdict was fetched for this pod before its cycle"
# Pods asked about at once: a gang of members that share no signature (anti-affinity, say)
# would otherwise send them all together, and the last ones wait out the timeout in the
# extender's queue (kube-scheduler asks about one pod at a time).
MAX_ASKED_AT_ONCE = 8


class ExtenderSet:
    """The configured extenders, and the verdicts fetched for the coming cycle's pods."""

    def __init__(
        self, clients: Sequence[ExtenderClient], preemption: ExtenderPreemption | None = None
    ) -> None:
        self.clients = tuple(clients)  # those that filter or prioritize
        self.preemption = preemption  # those with a preemptVerb (extenders/preempt.py)
        self._verdicts: dict[str, ExtenderVerdict] = {}

    @classmethod
    def of(
        cls, extenders: Sequence[ExtenderSettings], observe: Observe | None = None
    ) -> ExtenderSet | None:
        """The extenders that filter or prioritize, and those that preempt (a bind-only one
        is the binder's)."""
        asked = [e for e in extenders if e.filter_verb or e.prioritize_verb]
        preemption = ExtenderPreemption.of(extenders, observe)
        if not asked and preemption is None:
            return None
        if observe is None:
            return cls([ExtenderClient(e) for e in asked], preemption)
        return cls([ExtenderClient(e, observe=observe) for e in asked], preemption)

    @property
    def weight(self) -> int:
        return sum(c.settings.weight for c in self.clients if c.settings.prioritize_verb)

    def interested(self, pod: PodView) -> list[ExtenderClient]:
        return [c for c in self.clients if c.settings.is_interested(pod)]

    def verdict(self, pod: PodView) -> ExtenderVerdict | None:
        """The Extenders plugin's VerdictSource."""
        if not self.interested(pod):
            return None
        return self._verdicts.get(pod.uid, ExtenderVerdict(error=NOT_FETCHED))

    def forget(self) -> None:
        self._verdicts.clear()

    def unasked(self, pods: Iterable[PodView]) -> list[PodView]:
        """The pods of these an extender is interested in and no verdict was fetched for."""
        return [p for p in pods if p.uid not in self._verdicts and self.interested(p)]

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.clients))
        if self.preemption is not None:
            await self.preemption.close()

    async def prefetch(self, pods: Iterable[PodView], nodes: Sequence[NodeView]) -> None:
        """Ask about each distinct signature of these pods (MAX_ASKED_AT_ONCE at a time)
        and keep the verdicts, by pod, until `forget`."""
        alike: dict[Hashable, list[PodView]] = {}
        for pod in pods:
            if self.interested(pod):
                key = signature(pod)
                alike.setdefault(("pod", pod.uid) if key is None else key, []).append(pod)
        if not alike:
            return
        groups = list(alike.values())
        room = asyncio.Semaphore(MAX_ASKED_AT_ONCE)

        async def asked(pod: PodView) -> ExtenderVerdict:
            async with room:
                return await self.ask(pod, nodes)

        verdicts = await asyncio.gather(*(asked(group[0]) for group in groups))
        for group, verdict in zip(groups, verdicts, strict=True):
            for pod in group:
                self._verdicts[pod.uid] = verdict

    async def ask(self, pod: PodView, nodes: Sequence[NodeView]) -> ExtenderVerdict:
        clients = self.interested(pod)
        filtered = await _filter(clients, pod, nodes)
        if isinstance(filtered, str):
            return ExtenderVerdict(error=filtered)
        feasible, verdict = filtered
        scores = await _prioritize(clients, pod, feasible)
        return ExtenderVerdict(
            allowed=verdict.allowed,
            failed=verdict.failed,
            unresolvable=verdict.unresolvable,
            scores=scores,
            weight=self.weight,
        )


async def _filter(
    clients: Sequence[ExtenderClient], pod: PodView, nodes: Sequence[NodeView]
) -> tuple[list[NodeView], ExtenderVerdict] | str:
    """The nodes every filtering extender let through, with why the others failed; or the
    error of a non-ignorable extender."""
    feasible = list(nodes)
    failed: dict[str, str] = {}
    unresolvable: dict[str, str] = {}
    filtering = False
    for client in clients:
        settings = client.settings
        if not settings.filter_verb:
            continue
        body = extender_args(pod, feasible, settings.node_cache_capable)
        try:
            answer = parse_filter_result(
                await client.post(settings.filter_verb, body), settings.node_cache_capable
            )
        except (ExtenderUnavailable, ProtocolError) as err:
            if settings.ignorable:
                logger.warning("skipping ignorable extender pod=%s error=%s", pod.key, err)
                continue
            return f"extender {client.name} filter failed: {err}"
        filtering = True
        unresolvable.update(answer.unresolvable)
        failed.update((n, why) for n, why in answer.failed.items() if n not in unresolvable)
        feasible = [n for n in feasible if n.name in answer.passed]
    allowed = frozenset(n.name for n in feasible) if filtering else None
    return feasible, ExtenderVerdict(allowed, failed, unresolvable)


async def _prioritize(
    clients: Sequence[ExtenderClient], pod: PodView, feasible: Sequence[NodeView]
) -> dict[str, int]:
    prioritizers = [c for c in clients if c.settings.prioritize_verb]
    if not prioritizers or not feasible:
        return {}
    answers = await asyncio.gather(
        *(_priorities(c, pod, feasible) for c in prioritizers), return_exceptions=False
    )
    totals: dict[str, int] = {}
    for client, scores in zip(prioritizers, answers, strict=True):
        weight = client.settings.weight
        for host, score in scores.items():
            totals[host] = totals.get(host, 0) + scaled(score, weight)
    return totals


async def _priorities(
    client: ExtenderClient, pod: PodView, feasible: Sequence[NodeView]
) -> dict[str, int]:
    settings = client.settings
    body = extender_args(pod, feasible, settings.node_cache_capable)
    try:
        return parse_priorities(await client.post(settings.prioritize_verb, body))
    except (ExtenderUnavailable, ProtocolError) as err:
        logger.warning("skipping a failed prioritize pod=%s error=%s", pod.key, err)
        return {}

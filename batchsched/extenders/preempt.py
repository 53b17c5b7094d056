"""Asking the extenders with a preemptVerb about a preemption plan before it starts
(ExtenderPreemptionArgs -> ExtenderPreemptionResult), with kube-scheduler's semantics
(pkg/scheduler/framework/preemption: callExtenders):

- only extenders with a preemptVerb that are interested in the preemptor (managedResources);
- in order, each with the candidates the previous one left: a node it leaves out is no
  candidate any more, and once none is left the others are not asked;
- a node it keeps with no victims is dropped when it is ignorable, and is an error otherwise
  ("expected at least one victim pod on node");
- an error, a timeout or a bad answer skips an ignorable extender and otherwise fails the
  preemption.

One difference: batchsched evicts at most the victims its planner chose. A victim the
extender leaves out is not evicted; a pod it adds is not evicted either (it is logged).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from batchsched.extenders.client import ExtenderClient, ExtenderUnavailable, Observe
from batchsched.extenders.protocol import (
    ProtocolError,
    parse_preemption_result,
    preemption_args,
)
from batchsched.extenders.settings import ExtenderSettings
from batchsched.model.pod import PodView

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node the preemptor could go to once these victims are gone."""

    victims: tuple[PodView, ...]
    pdb_violations: int = 0


# The candidates the extenders kept (node -> victims), or why the preemption must not start.
Answer = dict[str, Candidate] | str


class ExtenderPreemption:
    """The extenders with a preemptVerb, in the config's order."""

    def __init__(self, clients: Sequence[ExtenderClient]) -> None:
        self.clients = tuple(clients)

    @classmethod
    def of(
        cls, extenders: Sequence[ExtenderSettings], observe: Observe | None = None
    ) -> ExtenderPreemption | None:
        preempting = [e for e in extenders if e.preempt_verb]
        if not preempting:
            return None
        if observe is None:
            return cls([ExtenderClient(e) for e in preempting])
        return cls([ExtenderClient(e, observe=observe) for e in preempting])

    def interested(self, pod: PodView) -> bool:
        return any(c.settings.is_interested(pod) for c in self.clients)

    async def close(self) -> None:
        for client in self.clients:
            await client.close()

    async def process(self, pod: PodView, candidates: Mapping[str, Candidate]) -> Answer:
        left = dict(candidates)
        for client in self.clients:
            if not left:
                break
            if not client.settings.is_interested(pod):
                continue
            answer = await _ask(client, pod, left)
            if isinstance(answer, str):
                if client.settings.ignorable:
                    logger.warning("skipping ignorable extender pod=%s error=%s", pod.key, answer)
                    continue
                return answer
            left = answer
        return left


async def _ask(client: ExtenderClient, pod: PodView, left: Mapping[str, Candidate]) -> Answer:
    """One extender's answer, narrowed to the victims batchsched proposed; or its error."""
    settings = client.settings
    body = preemption_args(
        pod,
        {node: (c.victims, c.pdb_violations) for node, c in left.items()},
        settings.node_cache_capable,
    )
    try:
        kept = parse_preemption_result(await client.post(settings.preempt_verb, body))
    except (ExtenderUnavailable, ProtocolError) as err:
        return f"extender {client.name} preempt failed: {err}"
    narrowed: dict[str, Candidate] = {}
    for node, uids in kept.items():
        where = (client.name, node)
        proposed = left.get(node)
        if proposed is None:
            logger.warning("extender named a node not asked about extender=%s node=%s", *where)
            continue
        victims = tuple(v for v in proposed.victims if v.uid in uids)
        added = uids - {v.uid for v in proposed.victims}
        if added:
            logger.warning(
                "extender named victims batchsched did not choose; not evicted extender=%s "
                "node=%s uids=%s",
                *where,
                ",".join(sorted(added)),
            )
        if not victims:
            if settings.ignorable:
                continue
            return f"extender {client.name} preempt failed: expected a victim pod on node {node}"
        narrowed[node] = Candidate(victims, proposed.pdb_violations)
    return narrowed

"""Why a pod fits nowhere, aggregated the way kube-scheduler prints it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from itertools import chain

from batchsched.framework.status import Status
from batchsched.model.pod import PodView


@dataclass(frozen=True, slots=True)
class FitError:
    pod: PodView
    num_all_nodes: int
    node_statuses: Mapping[str, Status]
    pre_filter_message: str = ""
    post_filter_message: str = ""

    def histogram(self) -> Counter[str]:
        """How many nodes gave each reason; a node with several reasons counts for each."""
        # One count over all reasons, not an update per node: a pod that fits nowhere on a
        # 500-node cluster builds this for every failed cycle (PreemptionBasic: each
        # preemptor's), and 500 Counter.update calls cost more than the filter verdicts.
        return Counter(chain.from_iterable(s.reasons for s in self.node_statuses.values()))

    def message(self) -> str:
        """E.g. "0/40 nodes are available: 32 Insufficient nvidia.com/gpu, 8 node(s) had
        untolerated taint {gpu: bad}." — reasons sorted as strings, as kube-scheduler does."""
        text = f"0/{self.num_all_nodes} nodes are available:"
        if self.pre_filter_message:
            text += f" {self.pre_filter_message}."
        reasons = sorted(f"{count} {reason}" for reason, count in self.histogram().items())
        if reasons:
            text += " " + ", ".join(reasons) + "."
        if self.post_filter_message:
            text += f" {self.post_filter_message}"
        return text

    def with_post_filter(self, message: str) -> FitError:
        return replace(self, post_filter_message=message)

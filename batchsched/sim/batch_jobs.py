"""A gang as the batch simulator sees it: its members, tenant, arrival and runtimes.

Its own module so that the simulator's bookkeeping (`batch_state`) and pass order
(`batch_shapes`) can name it without importing the simulator that imports them.
"""

from __future__ import annotations

from dataclasses import dataclass

from batchsched.gang.podgroup import PodGroupView
from batchsched.gang.topology import TopologyRequest
from batchsched.model.pod import PodView
from batchsched.model.resources import Resources


@dataclass(frozen=True, slots=True)
class BatchJob:
    key: str  # "namespace/name" of its PodGroup
    tenant: str
    members: tuple[PodView, ...]
    arrival: float
    runtime: float
    priority: int = 0
    expected_runtime: float | None = -1.0  # -1: the real runtime; None: unknown
    job_class: str = ""
    topology: TopologyRequest | None = None  # all members in one network domain

    @property
    def expected(self) -> float | None:
        return self.runtime if self.expected_runtime == -1.0 else self.expected_runtime

    def pod_group(self) -> PodGroupView:
        """The PodGroup the gang core reads: every member needed at once, no minimum resources,
        the job's topology request."""
        parts = self.key.split("/")
        return PodGroupView(
            parts[0],
            parts[1],
            self.key,
            len(self.members),
            Resources(),
            None,
            self.arrival,
            {},
            {},
            topology=self.topology,
        )

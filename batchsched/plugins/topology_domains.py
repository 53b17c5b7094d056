"""TopologyDomains: the network-topology levels of the cluster, for gangs that ask to be kept
in one domain (one NVLink clique, rack, block or zone).

The plugin decides nothing per pod: its PreFilter SKIPs. It carries the configuration the
workload cycle reads from the profile (batchsched/cycle/domains.py): the levels, tightest
first, and how many candidate domains per level a gang is tried on. With the plugin disabled,
gangs' topology requests are ignored (logged once per profile).

Args, as pluginConfig in a KubeSchedulerConfiguration:

    - name: TopologyDomains
      args:
        levels: [nvidia.com/gpu.clique, topology.batchsched.io/rack, topology.kubernetes.io/zone]
        maxDomainsPerLevel: 8

`levels` also takes Kueue's Topology shape, `[{nodeLabel: ...}, ...]`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from pydantic import Field, field_validator

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import PreFilterResult
from batchsched.framework.registry import PluginArgs
from batchsched.framework.status import SKIP, Status
from batchsched.gang.domains import TopologyLevels
from batchsched.gang.topology import DEFAULT_LEVELS
from batchsched.model.pod import PodView
from batchsched.snapshot import Snapshot


class TopologyDomainsArgs(PluginArgs):
    levels: tuple[str, ...] = DEFAULT_LEVELS
    # Candidate domains tried per level (best fit first): bounds a gang cycle's work.
    max_domains_per_level: int = Field(default=8, ge=1, le=1024)

    @field_validator("levels", mode="before")
    @classmethod
    def _kueue_shape(cls, value: object) -> object:
        """Kueue's `levels: [{nodeLabel: key}]` read as `levels: [key]`."""
        if not isinstance(value, Sequence) or isinstance(value, str):
            return value
        return [_node_label(item) if isinstance(item, Mapping) else item for item in value]

    @field_validator("levels")
    @classmethod
    def _valid(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        TopologyLevels(value)
        return value


def _node_label(item: Mapping[object, object]) -> object:
    if set(item) != {"nodeLabel"}:
        keys = ", ".join(sorted(map(str, item)))
        raise ValueError(f"a level is a node label key or {{nodeLabel: key}}, got keys {keys}")
    return item["nodeLabel"]


class TopologyDomains:
    name: ClassVar[str] = "TopologyDomains"

    def __init__(self, args: TopologyDomainsArgs | None = None) -> None:
        args = args if args is not None else TopologyDomainsArgs()
        self.levels = TopologyLevels(args.levels)
        self.max_domains_per_level = args.max_domains_per_level

    def pre_filter(
        self, state: CycleState, pod: PodView, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        return None, SKIP

"""PreferLabel: a Score plugin that prefers nodes whose label `key` has one of `values`.

The package's entry point (pyproject.toml) names `SPEC`: the plugin's name, its factory and
its args model. batchsched validates `pluginConfig` args against the model and builds one
plugin per profile.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import MAX_NODE_SCORE
from batchsched.framework.registry import PluginArgs, PluginSpec
from batchsched.model.pod import PodView
from batchsched.snapshot import NodeInfo

__all__ = ["SPEC", "PreferLabel", "PreferLabelArgs"]


class PreferLabelArgs(PluginArgs):
    key: str = "example.com/pool"
    values: tuple[str, ...] = Field(default=("preferred",), min_length=1)


class PreferLabel:
    name: ClassVar[str] = "PreferLabel"

    def __init__(self, args: PreferLabelArgs) -> None:
        self.key = args.key
        self.values = frozenset(args.values)

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        return MAX_NODE_SCORE if node.node.labels.get(self.key) in self.values else 0


SPEC = PluginSpec("PreferLabel", PreferLabel, PreferLabelArgs)

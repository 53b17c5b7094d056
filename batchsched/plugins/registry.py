"""Every built-in plugin, listed explicitly, and kube-scheduler's default plugin set."""

from __future__ import annotations

from typing import Final

from batchsched.framework.registry import (
    EnabledPlugin,
    NoArgs,
    PluginBuilder,
    PluginSpec,
    Registry,
)
from batchsched.plugins.backfill_reservations import BackfillReservations
from batchsched.plugins.balanced_allocation import (
    BalancedAllocationArgs,
    NodeResourcesBalancedAllocation,
)
from batchsched.plugins.cost_aware import CostAware, CostAwareArgs
from batchsched.plugins.default_binder import DefaultBinder
from batchsched.plugins.dynamic_resources import DynamicResources
from batchsched.plugins.dynamic_resources_guard import DynamicResourcesGuard
from batchsched.plugins.gang_sort import GangSort
from batchsched.plugins.gpu_load_aware import GpuLoadAware, GpuLoadAwareArgs
from batchsched.plugins.gpu_topology import GpuTopology
from batchsched.plugins.gpu_topology_args import GpuTopologyArgs
from batchsched.plugins.image_locality import ImageLocality
from batchsched.plugins.inter_pod_affinity import InterPodAffinity, InterPodAffinityArgs
from batchsched.plugins.network_latency import NetworkLatency, NetworkLatencyArgs
from batchsched.plugins.node_affinity import NodeAffinity, NodeAffinityArgs
from batchsched.plugins.node_name import NodeName
from batchsched.plugins.node_ports import NodePorts
from batchsched.plugins.node_resources_fit import NodeResourcesFit, NodeResourcesFitArgs
from batchsched.plugins.node_unschedulable import NodeUnschedulable
from batchsched.plugins.pod_topology_spread import PodTopologySpread, PodTopologySpreadArgs
from batchsched.plugins.priority_sort import PrioritySort
from batchsched.plugins.scheduling_gates import SchedulingGates
from batchsched.plugins.taint_toleration import TaintToleration
from batchsched.plugins.team_affinity import TeamAffinity, TeamAffinityArgs
from batchsched.plugins.topology_domains import TopologyDomains, TopologyDomainsArgs


def builtin_specs() -> list[PluginBuilder]:
    return [
        PluginSpec("PrioritySort", PrioritySort, NoArgs),
        PluginSpec("GangSort", GangSort, NoArgs),
        PluginSpec("SchedulingGates", SchedulingGates, NoArgs),
        PluginSpec("NodeUnschedulable", NodeUnschedulable, NoArgs),
        PluginSpec("NodeName", NodeName, NoArgs),
        PluginSpec("TaintToleration", TaintToleration, NoArgs),
        PluginSpec("NodeAffinity", NodeAffinity, NodeAffinityArgs),
        PluginSpec("NodePorts", NodePorts, NoArgs),
        PluginSpec("NodeResourcesFit", NodeResourcesFit, NodeResourcesFitArgs),
        PluginSpec(
            "NodeResourcesBalancedAllocation",
            NodeResourcesBalancedAllocation,
            BalancedAllocationArgs,
        ),
        PluginSpec("ImageLocality", ImageLocality, NoArgs),
        PluginSpec("InterPodAffinity", InterPodAffinity, InterPodAffinityArgs),
        PluginSpec("PodTopologySpread", PodTopologySpread, PodTopologySpreadArgs),
        PluginSpec("GpuTopology", GpuTopology, GpuTopologyArgs),
        PluginSpec("BackfillReservations", BackfillReservations, NoArgs),
        PluginSpec("DynamicResources", DynamicResources, NoArgs),
        PluginSpec("DynamicResourcesGuard", DynamicResourcesGuard, NoArgs),
        PluginSpec("TopologyDomains", TopologyDomains, TopologyDomainsArgs),
        PluginSpec("DefaultBinder", DefaultBinder, NoArgs),
        # Reference plugins (#18): registered, in no default list; a profile enables them.
        PluginSpec("GpuLoadAware", GpuLoadAware, GpuLoadAwareArgs),
        PluginSpec("CostAware", CostAware, CostAwareArgs),
        PluginSpec("TeamAffinity", TeamAffinity, TeamAffinityArgs),
        PluginSpec("NetworkLatency", NetworkLatency, NetworkLatencyArgs),
    ]


def default_registry() -> Registry:
    return Registry(builtin_specs())


def _enabled(*names: str) -> list[EnabledPlugin]:
    return [EnabledPlugin(n) for n in names]


# kube-scheduler's default plugins (v1.30+), limited to those we implement: volume plugins
# are absent because batch pods here use no scheduler-managed volumes yet.
DEFAULT_PLUGINS: Final[dict[str, list[EnabledPlugin]]] = {
    # GangSort, not kube's PrioritySort: a gang's members stay together in the queue (for a
    # pod without a gang it orders by priority, then age, like PrioritySort by creation time).
    "queueSort": _enabled("GangSort"),
    # GpuTopology admits every pod: it counts the arriving pods into its workload estimate.
    "preEnqueue": _enabled("SchedulingGates", "GpuTopology"),
    # DynamicResources last at PreFilter and Filter: device allocation is the dearest
    # check, so the cheap ones prune the nodes first (kube's order too). TopologyDomains
    # SKIPs every pod: it is here to carry the cluster's topology levels to the gang cycle.
    "preFilter": _enabled(
        "TopologyDomains",
        "NodeName",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "GpuTopology",
        "BackfillReservations",
        "DynamicResources",
    ),
    "filter": _enabled(
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "GpuTopology",
        "BackfillReservations",
        "DynamicResources",
    ),
    "preScore": _enabled(
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
        "GpuTopology",
        "DynamicResources",
    ),
    "score": [
        EnabledPlugin("TaintToleration", 3),
        EnabledPlugin("NodeAffinity", 2),
        EnabledPlugin("NodeResourcesFit", 1),
        EnabledPlugin("PodTopologySpread", 2),
        EnabledPlugin("InterPodAffinity", 2),
        EnabledPlugin("NodeResourcesBalancedAllocation", 1),
        EnabledPlugin("ImageLocality", 1),
        # Ours, not kube's: GPU set quality, then FGD fragmentation, rank-normalized. At 100,
        # one rank of it outweighs what the spreading scorers above can add up to in most
        # cases, so GPU placement decides and they break its ties (docs/configuration.md).
        EnabledPlugin("GpuTopology", 100),
        # The same for GPUs allocated through DRA claims: the set's connectivity, then packing.
        EnabledPlugin("DynamicResources", 100),
    ],
    "reserve": _enabled("GpuTopology", "DynamicResources"),
    "preBind": _enabled("DynamicResources"),
    "bind": _enabled("DefaultBinder"),
}

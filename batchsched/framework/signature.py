"""A pod's scheduling signature: what node-local plugins read of it (framework/batch.py).

Two pods with the same signature get the same Filter verdict and raw Score from every plugin
in `NODE_LOCAL_PLUGINS` on every node, so one pod's results serve the other (kube-scheduler
1.35's opportunistic batching, KEP-5598). Names and uids are left out; labels stay in (default
spread constraints select by them) and so do annotations (GPU requests are read from them).
"""

from __future__ import annotations

from collections.abc import Hashable

from batchsched.model.pod import PodView

# Plugins whose Filter verdict and raw Score for a node depend only on the pod's signature and
# that node's own state (its allocatable, pods, GPUs, labels, taints, images), and whose
# PreFilter/PreScore read only the pod and snapshot-wide facts no placement changes.
NODE_LOCAL_PLUGINS = frozenset(
    {
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
        "GpuTopology",
        "DynamicResources",  # its Filter SKIPs and its Score is 0 without resource claims
        "Extenders",  # HTTP extenders' verdicts, fetched once per signature (extenders/fetch.py)
    }
)


def signature(pod: PodView) -> Hashable | None:
    """What node-local plugins read of a pod, or None when the pod may not be batched."""
    if (
        pod.pod_affinity is not None
        or pod.pod_anti_affinity is not None
        or pod.spread_constraints
        or pod.host_ports
        or pod.resource_claims
        or pod.node_name
    ):
        return None
    key = (
        pod.namespace,
        pod.scheduler_name,
        pod.priority,
        pod.preemption_policy,
        pod.requests,
        pod.non_zero_milli_cpu,
        pod.non_zero_memory,
        tuple(sorted(pod.node_selector.items())),
        pod.node_affinity,
        pod.tolerations,
        pod.images,
        tuple(sorted(pod.annotations.items())),
        tuple(sorted(pod.labels.items())),
    )
    try:
        hash(key)
    except TypeError:
        return None
    return key

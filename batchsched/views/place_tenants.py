"""`batchsched place --quota`: the live scheduler's tenant layer over a cluster dump.

The tenant layer is the live scheduler's (batchsched/tenants.py); here it is fed the dump
instead of a cache: `place_pending` attaches it to its snapshot and counts the bound pods of
our profiles and each placement it makes. A PodGroup's queue (Volcano's spec.queue) names
the tenant of its pods, as in the live scheduler.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from batchsched.clock import FakeClock
from batchsched.cluster_file import ClusterState
from batchsched.framework.profile import Profile
from batchsched.gang.podgroup import pod_group_of
from batchsched.model.pod import PodView
from batchsched.tenants import TenantLayer
from queues.model import QuotaPolicy


def what_if_tenants(
    policy: QuotaPolicy, profiles: Mapping[str, Profile], state: ClusterState
) -> TenantLayer:
    """A tenant layer on a clock standing at the time of the call (usage history starts
    there: fair share ranks tenants by what they hold now)."""
    clock = FakeClock(time.monotonic(), time.time() - time.monotonic())
    layer = TenantLayer(policy, clock, lambda pod: pod.scheduler_name in profiles)
    queues = {group.key: group.queue for group in state.pod_groups}

    def producer_queue(pod: PodView) -> str:
        key = pod_group_of(pod)
        return queues.get(key, "") if key is not None else ""

    layer.producer_queue = producer_queue
    return layer

"""The App's gang informers: one per gang API (batchsched/gang/encodings.py), all feeding the
same GangTracker, whose keys tell the APIs apart.

scheduler-plugins' PodGroup is watched from the start (deploy/ installs its CRD); the upstream
`scheduling.k8s.io/v1alpha2` PodGroup (Kubernetes 1.36 with the GenericWorkload gate) and
Volcano's PodGroup are watched once the API server serves them (kube/served.py). Kueue
plain-pod groups need no informer: their pods describe them.
"""

from __future__ import annotations

from kubernetes_asyncio.client import ApiClient

from batchsched.gang.encodings import parse_k8s_pod_group, parse_volcano_pod_group
from batchsched.gang.podgroup import PodGroupView, parse_pod_group
from batchsched.kube.informer import Informer
from batchsched.kube.podgroups import (
    GROUP_VERSIONS,
    K8S_POD_GROUPS,
    POD_GROUPS,
    VOLCANO_POD_GROUPS,
)
from batchsched.kube.served import WhenServed
from batchsched.model.gang_ref import GangApi
from batchsched.runtime.app_invalid import InvalidObjects
from batchsched.runtime.gangs import GangTracker


def gang_informers(
    api: ApiClient, gangs: GangTracker, invalid: InvalidObjects
) -> list[Informer[PodGroupView] | WhenServed]:
    plugins = Informer(
        api,
        POD_GROUPS,
        parse_pod_group,
        gangs,
        key=lambda g: g.key,
        on_invalid=invalid.pod_group,
    )
    optional: list[Informer[PodGroupView] | WhenServed] = []
    for gang_api, spec, parse in (
        (GangApi.KUBERNETES, K8S_POD_GROUPS, parse_k8s_pod_group),
        (GangApi.VOLCANO, VOLCANO_POD_GROUPS, parse_volcano_pod_group),
    ):
        informer = Informer(
            api, spec, parse, gangs, key=lambda g: g.key, on_invalid=invalid.pod_group_in(gang_api)
        )
        optional.append(WhenServed(api, informer, GROUP_VERSIONS[gang_api], "podgroups"))
    return [plugins, *optional]

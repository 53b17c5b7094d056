"""Dynamic Resource Allocation for `batchsched run`: the claim writer the DynamicResources
plugin's PreBind uses, and informers for DeviceClasses, ResourceSlices and ResourceClaims.

They are optional like PodGroups: an API server that does not serve resource.k8s.io/v1
leaves them retrying, and pods with claims wait with a reason (their claims are unknown).
"""

from __future__ import annotations

from collections.abc import Mapping

from kubernetes_asyncio.client import ApiClient

from batchsched.cache import SchedulerCache
from batchsched.dra.objects import DeviceClass, ResourceClaim, ResourceSlice
from batchsched.dra.parse import parse_device_class, parse_resource_claim, parse_resource_slice
from batchsched.framework.profile import Profile
from batchsched.kube.claims import KubeClaimWriter
from batchsched.kube.informer import (
    DEVICE_CLASSES,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    Informer,
)
from batchsched.plugins.dynamic_resources import DynamicResources
from batchsched.runtime.app_invalid import InvalidObjects
from batchsched.runtime.dra_events import (
    DeviceClassEvents,
    ResourceClaimEvents,
    ResourceSliceEvents,
)
from batchsched.runtime.queue import SchedulingQueue

API_VERSION = "resource.k8s.io/v1"


def device_informers(
    api: ApiClient,
    profiles: Mapping[str, Profile],
    cache: SchedulerCache,
    queue: SchedulingQueue,
    invalid: InvalidObjects,
) -> list[Informer[DeviceClass] | Informer[ResourceSlice] | Informer[ResourceClaim]]:
    writer = KubeClaimWriter(api)
    for profile in profiles.values():
        for plugin in profile.pre_bind:
            if isinstance(plugin, DynamicResources):
                plugin.writer = writer
    classes = Informer(
        api,
        DEVICE_CLASSES,
        parse_device_class,
        DeviceClassEvents(cache, queue),
        key=lambda c: c.name,
        on_invalid=invalid.of(API_VERSION, "DeviceClass"),
    )
    slices = Informer(
        api,
        RESOURCE_SLICES,
        parse_resource_slice,
        ResourceSliceEvents(cache, queue),
        key=lambda s: s.name,
        on_invalid=invalid.of(API_VERSION, "ResourceSlice"),
    )
    claims = Informer(
        api,
        RESOURCE_CLAIMS,
        parse_resource_claim,
        ResourceClaimEvents(cache, queue),
        key=lambda c: c.key,
        on_invalid=invalid.of(API_VERSION, "ResourceClaim"),
    )
    return [classes, slices, claims]

"""Purely computational: the ResourceClaim the resourceclaim controller makes for a pod's claim
entry from a ResourceClaimTemplate.

The controller names it `<pod>-<entry>-<random suffix>`; here the name is deterministic,
`<pod>-<entry>`, numbered (`-2`, `-3`, ...) when that name is taken. The claim carries the
template's spec, the `resource.kubernetes.io/pod-claim-name` annotation and the pod as its
controlling owner, as the controller's does. `batchsched place` and `batchsched simulate`
both make claims this way.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Final

from batchsched.dra.objects import POD_CLAIM_NAME_ANNOTATION, ResourceClaim
from batchsched.dra.parse import parse_resource_claim
from batchsched.model.pod import PodView
from batchsched.model.pod_spec import PodResourceClaim

RESOURCE_API: Final = "resource.k8s.io/v1"


def claim_name(pod: PodView, entry: PodResourceClaim, taken: Container[str] = ()) -> str:
    """`<pod>-<entry>`, numbered from 2 while "namespace/name" is in `taken`."""
    name, suffix = f"{pod.name}-{entry.name}", 1
    while f"{pod.namespace}/{name}" in taken:
        suffix += 1
        name = f"{pod.name}-{entry.name}-{suffix}"
    return name


def template_claim(
    pod: PodView,
    entry: PodResourceClaim,
    spec: Mapping[str, object],
    taken: Container[str] = (),
) -> ResourceClaim:
    """The claim made from a template whose `spec.spec` is `spec` (a ResourceClaim's spec);
    raises InvalidObject naming the claim when the spec is not one."""
    owner = {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid}
    return parse_resource_claim(
        {
            "apiVersion": RESOURCE_API,
            "kind": "ResourceClaim",
            "metadata": {
                "name": claim_name(pod, entry, taken),
                "namespace": pod.namespace,
                "annotations": {POD_CLAIM_NAME_ANNOTATION: entry.name},
                "ownerReferences": [{**owner, "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": spec,
        }
    )

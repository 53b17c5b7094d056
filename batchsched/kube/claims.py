"""Writing a ResourceClaim's allocation and reservation (resource.k8s.io/v1), as kube-scheduler
does at PreBind: the delete-protection finalizer first (so a claim that holds devices cannot
vanish before the resourceclaim controller frees them), then `status.allocation` and the pod
in `status.reservedFor`, each an update against the resourceVersion just read; a conflict
reads the claim again and retries.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Final

from kubernetes_asyncio.client import ApiClient

from batchsched.dra.objects import Allocation, OpaqueConfig, ResourceClaim
from batchsched.dra.parse import parse_resource_claim
from batchsched.kube.client import ApiError, request_json
from batchsched.model.pod import PodView
from batchsched.model.selectors import NodeSelectorTerm, Requirement

logger = logging.getLogger(__name__)

FINALIZER: Final = "resource.kubernetes.io/delete-protection"
GROUP_PATH: Final = "/apis/resource.k8s.io/v1"
CONFLICT_TRIES: Final = 5


class ClaimChanged(Exception):
    """The claim the API holds now rules the pod out (another allocation, gone, deleted)."""


class KubeClaimWriter:
    def __init__(self, api: ApiClient) -> None:
        self.api = api

    async def reserve(self, claim: ResourceClaim, allocation: Allocation, pod: PodView) -> None:
        path = f"{GROUP_PATH}/namespaces/{claim.namespace}/resourceclaims/{claim.name}"
        for attempt in range(CONFLICT_TRIES):
            current = await request_json(self.api, "GET", path)
            try:
                await self._write(path, current, claim, allocation, pod)
                return
            except ApiError as err:
                if err.status != 409 or attempt == CONFLICT_TRIES - 1:
                    raise
                logger.debug("claim write conflict claim=%s attempt=%d", claim.key, attempt)

    async def _write(
        self,
        path: str,
        current: dict[str, object],
        claim: ResourceClaim,
        allocation: Allocation,
        pod: PodView,
    ) -> None:
        seen = parse_resource_claim(current)
        if seen.uid != claim.uid or seen.deleting:
            raise ClaimChanged(f"ResourceClaim {claim.key} was deleted or replaced")
        if seen.allocation is not None and _devices(seen.allocation) != _devices(allocation):
            raise ClaimChanged(f"ResourceClaim {claim.key} was allocated other devices meanwhile")
        if seen.reserved_for_pod(pod.uid) and seen.allocation is not None:
            return
        body = dict(current)
        if seen.allocation is None:
            meta = dict(_as_map(body.get("metadata")))
            finalizers = list(_as_list(meta.get("finalizers")))
            if FINALIZER not in finalizers:
                meta["finalizers"] = [*finalizers, FINALIZER]
                body["metadata"] = meta
                body = await request_json(self.api, "PUT", path, body=body)
        status = dict(_as_map(body.get("status")))
        if seen.allocation is None:
            status["allocation"] = allocation_json(allocation)
        reserved = list(_as_list(status.get("reservedFor")))
        if not seen.reserved_for_pod(pod.uid):
            reserved.append({"resource": "pods", "name": pod.name, "uid": pod.uid})
        status["reservedFor"] = reserved
        body["status"] = status
        await request_json(self.api, "PUT", f"{path}/status", body=body)


def allocation_json(allocation: Allocation) -> dict[str, object]:
    results: list[dict[str, object]] = []
    for device in allocation.devices:
        result: dict[str, object] = {
            "request": device.request,
            "driver": device.driver,
            "pool": device.pool,
            "device": device.device,
        }
        if device.admin_access:
            result["adminAccess"] = True
        results.append(result)
    devices: dict[str, object] = {"results": results}
    if allocation.config:
        devices["config"] = [_config_json(source, c) for source, c in allocation.config]
    body: dict[str, object] = {"devices": devices}
    if allocation.node_selector:
        body["nodeSelector"] = {
            "nodeSelectorTerms": [_term_json(t) for t in allocation.node_selector]
        }
    return body


def _config_json(source: str, config: OpaqueConfig) -> dict[str, object]:
    found: dict[str, object] = {
        "source": source,
        "opaque": {"driver": config.driver, "parameters": json.loads(config.parameters_json)},
    }
    if config.requests:
        found["requests"] = list(config.requests)
    return found


def _term_json(term: NodeSelectorTerm) -> dict[str, object]:
    body: dict[str, object] = {}
    if term.match_expressions:
        body["matchExpressions"] = [_requirement_json(r) for r in term.match_expressions]
    if term.match_fields:
        body["matchFields"] = [_requirement_json(r) for r in term.match_fields]
    return body


def _requirement_json(req: Requirement) -> dict[str, object]:
    body: dict[str, object] = {"key": req.key, "operator": req.operator}
    if req.values:
        body["values"] = list(req.values)
    return body


def _devices(allocation: Allocation) -> frozenset[str]:
    return frozenset(d.id for d in allocation.devices)


def _as_map(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _as_list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []

"""PodGroups on the wire: the informer's ResourceSpec and the status writer.

Status writes are best effort, like the pod status writer's: logged, never raised into the
scheduling loop, and skipped when they would repeat what we last wrote.
"""

from __future__ import annotations

import copy
import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Final

from kubernetes_asyncio.client import ApiClient

from batchsched.gang.podgroup import PodGroupView
from batchsched.kube.client import MERGE_PATCH, ApiError, ApiUnavailable, request_json
from batchsched.kube.informer import ResourceSpec

__all__ = ["POD_GROUPS", "PodGroupStatusWriter", "pod_group_path"]

log = logging.getLogger(__name__)

_API: Final = "/apis/scheduling.x-k8s.io/v1alpha1"
POD_GROUPS: Final = ResourceSpec("PodGroup", f"{_API}/podgroups")
# A bounded memory: a cluster that churns through gangs must not grow it without end.
MAX_REMEMBERED: Final = 10_000


def pod_group_path(namespace: str, name: str) -> str:
    return f"{_API}/namespaces/{namespace}/podgroups/{name}"


class PodGroupStatusWriter:
    """Writes a PodGroup's status subresource with a JSON merge patch, only when it changes.

    What we last wrote is remembered per PodGroup uid: the scheduler recomputes a gang's status
    on every cycle, and a repeat write would change nothing but the API server's load. A merge
    patch leaves the status fields we do not write (another controller's) as they are.

    The status subresource ignores metadata, so a uid in the patch is no precondition (as it is
    for pods): a same-named PodGroup created since our view was taken gets the write. That is
    detected from the answer and not remembered, so the successor's own status, written once
    the informer delivers it, is not suppressed.
    """

    def __init__(self, api: ApiClient, *, timeout: float = 30.0) -> None:
        self._api = api
        self._timeout = timeout
        self._written: OrderedDict[str, dict[str, object]] = OrderedDict()

    async def update(self, group: PodGroupView, status: Mapping[str, object]) -> bool:
        """Write `status` unless it is what we wrote last; False when the write failed (the
        caller tries again later)."""
        wanted = copy.deepcopy(dict(status))  # the caller may reuse and mutate its mapping
        if self._written.get(group.uid) == wanted:
            return True
        if not await self._patch(group, wanted):
            return False
        self._written[group.uid] = wanted
        self._written.move_to_end(group.uid)
        while len(self._written) > MAX_REMEMBERED:
            self._written.popitem(last=False)
        return True

    def forget(self, uid: str) -> None:
        """The PodGroup is gone: drop what we remembered about it."""
        self._written.pop(uid, None)

    async def _patch(self, group: PodGroupView, status: Mapping[str, object]) -> bool:
        path = f"{pod_group_path(group.namespace, group.name)}/status"
        try:
            written = await request_json(
                self._api,
                "PATCH",
                path,
                body={"status": status},
                content_type=MERGE_PATCH,
                timeout=self._timeout,
            )
        except (ApiError, ApiUnavailable) as err:
            gone = isinstance(err, ApiError) and err.status == 404
            log.log(
                logging.DEBUG if gone else logging.WARNING,
                "pod group status write failed group=%s uid=%s error=%s",
                group.key,
                group.uid,
                err,
            )
            return False
        meta = written.get("metadata")
        uid = meta.get("uid") if isinstance(meta, Mapping) else None
        if uid != group.uid:
            log.debug("pod group status went to a successor group=%s uid=%s", group.key, uid)
            return False
        return True

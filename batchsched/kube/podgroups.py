"""PodGroups on the wire, in every gang API: the informers' ResourceSpecs and the status writer.

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
from batchsched.gang.status import StatusWrite, shows
from batchsched.kube.client import (
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    ApiError,
    ApiUnavailable,
    request_json,
)
from batchsched.kube.informer import ResourceSpec
from batchsched.model.gang_ref import GangApi, split_gang_key

__all__ = [
    "GROUP_VERSIONS",
    "K8S_POD_GROUPS",
    "POD_GROUPS",
    "VOLCANO_POD_GROUPS",
    "PodGroupStatusWriter",
    "gang_object_path",
    "pod_group_path",
]

log = logging.getLogger(__name__)

_API: Final = "/apis/scheduling.x-k8s.io/v1alpha1"
POD_GROUPS: Final = ResourceSpec("PodGroup", f"{_API}/podgroups")
K8S_POD_GROUPS: Final = ResourceSpec("PodGroup", "/apis/scheduling.k8s.io/v1alpha2/podgroups")
VOLCANO_POD_GROUPS: Final = ResourceSpec(
    "PodGroup", "/apis/scheduling.volcano.sh/v1beta1/podgroups"
)
# Where each API's objects live.
GROUP_VERSIONS: Final = {
    GangApi.SCHEDULER_PLUGINS: _API,
    GangApi.KUBERNETES: "/apis/scheduling.k8s.io/v1alpha2",
    GangApi.VOLCANO: "/apis/scheduling.volcano.sh/v1beta1",
}
# Volcano's PodGroup CRD has no status subresource: its status is written on the object.
_STATUS_SUBRESOURCE: Final = frozenset({GangApi.SCHEDULER_PLUGINS, GangApi.KUBERNETES})
# A bounded memory: a cluster that churns through gangs must not grow it without end.
MAX_REMEMBERED: Final = 10_000
# Remembered after a failed write: equal to no status, so the next one is always written.
_UNKNOWN: Final[dict[str, object]] = {}


def gang_object_path(key: str) -> str | None:
    """Where the object describing the gang with this key lives; None for a Kueue group
    (its pods describe it, there is no object)."""
    api, namespace, name = split_gang_key(key)
    return pod_group_path(namespace, name, api) if api in GROUP_VERSIONS else None


def pod_group_path(namespace: str, name: str, api: GangApi = GangApi.SCHEDULER_PLUGINS) -> str:
    return f"{GROUP_VERSIONS[api]}/namespaces/{namespace}/podgroups/{name}"


class PodGroupStatusWriter:
    """Writes a PodGroup's status subresource with a JSON merge patch, only when it changes.

    What we last wrote is remembered per PodGroup uid: the scheduler recomputes a gang's status
    on every cycle, and a repeat write would change nothing but the API server's load. A merge
    patch leaves the status fields we do not write (another controller's) as they are.

    With nothing of ours remembered for a PodGroup (none written yet, or a new leader), the
    object as last read is the baseline: a status it already shows is not written
    (`gang.status.shows`; a PodGroup without a status reads as Pending, so the Pending a gang
    starts in costs no write). While a write is in flight, or after one whose outcome is
    unknown, the object as read may be stale, so it is not trusted then.

    The status subresource ignores metadata, so a uid in the patch is no precondition (as it is
    for pods): a same-named PodGroup created since our view was taken gets the write. That is
    detected from the answer and not remembered, so the successor's own status, written once
    the informer delivers it, is not suppressed.
    """

    def __init__(self, api: ApiClient, *, timeout: float = 30.0) -> None:
        self._api = api
        self._timeout = timeout
        self._written: OrderedDict[str, dict[str, object]] = OrderedDict()
        self._writing: set[str] = set()  # uids with a write in flight
        self.skipped = 0  # writes not sent: what we last wrote, or what the object shows

    def needed(self, group: PodGroupView, write: StatusWrite) -> bool:
        """Whether `write` would change the PodGroup's status: not what we wrote last, nor
        (with nothing of ours remembered or in flight) what the object shows."""
        uid = group.uid
        before = self._written.get(uid)
        if before is not None:
            same = before == write.fingerprint()
        else:
            same = uid not in self._writing and shows(group, write)
        self.skipped += same
        return not same

    async def update(self, group: PodGroupView, status: Mapping[str, object] | StatusWrite) -> bool:
        """Write `status` unless it is what we wrote last (or the object shows it); False
        when the write failed (the caller tries again later)."""
        write = status if isinstance(status, StatusWrite) else StatusWrite(status)
        if not self.needed(group, write):
            return True
        # The caller may reuse and mutate its mapping.
        wanted = copy.deepcopy(write.fingerprint())
        if group.api not in GROUP_VERSIONS:
            return False
        self._writing.add(group.uid)
        try:
            written = await self._patch(group, write)
        finally:
            self._writing.discard(group.uid)
        # A failed write may still have landed: until one succeeds, the object as read
        # is not trusted and every status is written.
        self._remember(group.uid, wanted if written else _UNKNOWN)
        return written

    def _remember(self, uid: str, fingerprint: dict[str, object]) -> None:
        self._written[uid] = fingerprint
        self._written.move_to_end(uid)
        while len(self._written) > MAX_REMEMBERED:
            self._written.popitem(last=False)

    def forget(self, uid: str) -> None:
        """The PodGroup is gone: drop what we remembered about it."""
        self._written.pop(uid, None)

    async def _patch(self, group: PodGroupView, write: StatusWrite) -> bool:
        path = pod_group_path(group.namespace, group.name, group.api)
        if group.api in _STATUS_SUBRESOURCE:
            path += "/status"
        try:
            written = await request_json(
                self._api,
                "PATCH",
                path,
                body={"status": dict(write.status)},
                content_type=STRATEGIC_MERGE_PATCH if write.merge_conditions else MERGE_PATCH,
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

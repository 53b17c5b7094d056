"""Writes the scheduler's decisions back: Binding, PodScheduled condition, nominated node, Events.

Only `bind` raises (its caller must forget the assumed pod and retry); status and Event writes
are best effort, logged and never raised into the scheduling loop.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping

from kubernetes_asyncio.client import ApiClient

from batchsched.kube.client import (
    ApiError,
    ApiUnavailable,
    NotLeading,
    micro_time,
    request_json,
    request_unread,
)
from batchsched.kube.events import REPORTING_CONTROLLER, EventRecorder, ObjectRef
from batchsched.kube.pod_status import PodStatusWriter, pod_path

__all__ = [
    "REPORTING_CONTROLLER",
    "BindError",
    "EventRecorder",
    "KubeBinder",
    "ObjectRef",
    "PodStatusWriter",
    "micro_time",
]

log = logging.getLogger(__name__)


BIND_CHECK_TRIES = 3  # reads of a pod whose Binding got no answer, a second apart
BIND_CHECK_PAUSE_S = 1.0


class BindError(Exception):
    """A failed Binding; `reason` is snake_case (conflict, not_found, unavailable, ...)."""

    def __init__(self, reason: str, status: int, message: str = "") -> None:
        self.reason = reason
        self.status = status
        self.message = message
        super().__init__(f"{reason} ({status}): {message}" if message else f"{reason} ({status})")


def _snake(reason: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", reason).lower()


class KubeBinder:
    """Satisfies `batchsched.plugins.default_binder.BindingClient`."""

    def __init__(self, api: ApiClient, *, timeout: float = 30.0) -> None:
        self._api = api
        self._timeout = timeout

    async def bind(self, namespace: str, name: str, uid: str, node_name: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            # The uid makes the server refuse to bind a same-named pod created since.
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        path = f"{pod_path(namespace, name)}/binding"
        try:
            # The answer is a Status saying it worked: not decoded.
            await request_unread(self._api, "POST", path, body=body, timeout=self._timeout)
        except ApiError as err:
            if err.status >= 500 and await self._bound_anyway(namespace, name, uid, node_name):
                return
            raise BindError(_snake(err.reason), err.status, err.message) from err
        except NotLeading as err:
            raise BindError("not_leading", 0, str(err)) from err
        except ApiUnavailable as err:
            if await self._bound_anyway(namespace, name, uid, node_name):
                return
            raise BindError("unavailable", 0, str(err)) from err

    async def _bound_anyway(self, namespace: str, name: str, uid: str, node_name: str) -> bool:
        """A Binding whose answer was lost (no answer, a timeout, a 5xx) may have been applied:
        read the pod before calling it failed. Forgetting a pod that is in fact bound would
        free its GPUs for the next cycle, and the watch would bring it back too late: an
        over-commit (seen in the chaos soak around an API server restart)."""
        for attempt in range(BIND_CHECK_TRIES):
            if attempt:
                await asyncio.sleep(BIND_CHECK_PAUSE_S)
            try:
                pod = await request_json(
                    self._api, "GET", pod_path(namespace, name), timeout=self._timeout
                )
            except ApiError as err:
                if err.status == 404:
                    return False  # deleted: nothing to count
                continue
            except ApiUnavailable:
                continue
            meta, spec = pod.get("metadata"), pod.get("spec")
            if not isinstance(meta, Mapping) or not isinstance(spec, Mapping):
                return False
            bound = meta.get("uid") == uid and spec.get("nodeName") == node_name
            if bound:
                log.info(
                    "binding answered late but applied pod=%s/%s node=%s",
                    namespace,
                    name,
                    node_name,
                )
            return bound
        return False

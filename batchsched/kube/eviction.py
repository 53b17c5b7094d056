"""Preemption's victims leave through the Eviction API (policy/v1), never a plain delete.

An eviction is refused with 429 when it would break a PodDisruptionBudget (or while the
disruption controller has not processed the budget yet): the API server, not our own view of
the budgets, has the last word, so a plan made on a stale view can never break a budget that
the planner meant to respect. The answer is a value, not an exception: the caller decides
what a refusal means (runtime/preempting.py: before the plan's first eviction, the plan is
not started; after it, the victim is tried again after a backoff). A 429 that names no
budget (API Priority and Fairness throttling) is a failure worth retrying, not a refusal.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum

from kubernetes_asyncio.client import ApiClient

from batchsched.kube.client import ApiError, ApiUnavailable, request_unread

__all__ = ["EvictionOutcome", "EvictionResult", "KubeEvictor"]

log = logging.getLogger(__name__)


class EvictionOutcome(Enum):
    EVICTED = "evicted"  # accepted: the pod terminates with its grace period
    GONE = "gone"  # deleted already, or a same-named successor (uid precondition failed)
    REFUSED = "refused"  # 429 naming a budget: a PodDisruptionBudget does not allow it now
    FAILED = "failed"  # any other error, or no answer


@dataclass(frozen=True, slots=True)
class EvictionResult:
    outcome: EvictionOutcome
    message: str = ""

    @property
    def accepted(self) -> bool:
        """The victim is on its way out (or already gone): its capacity will free."""
        return self.outcome in (EvictionOutcome.EVICTED, EvictionOutcome.GONE)


class KubeEvictor:
    """POST pods/<name>/eviction with the victim's uid as a precondition."""

    def __init__(self, api: ApiClient, *, timeout: float = 30.0) -> None:
        self._api = api
        self._timeout = timeout

    async def evict(self, namespace: str, name: str, uid: str) -> EvictionResult:
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            # A same-named pod created since the plan was made is not the victim.
            "deleteOptions": {"preconditions": {"uid": uid}},
        }
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/eviction"
        try:
            await request_unread(self._api, "POST", path, body=body, timeout=self._timeout)
        except ApiError as err:
            return _classify(err)
        except ApiUnavailable as err:
            log.warning("eviction failed pod=%s/%s error=%s", namespace, name, err)
            return EvictionResult(EvictionOutcome.FAILED, str(err))
        return EvictionResult(EvictionOutcome.EVICTED)


def _classify(err: ApiError) -> EvictionResult:
    """Purely computational: an API failure of an eviction, as an outcome."""
    if err.status == 429 and "disruption budget" in err.message.lower():
        return EvictionResult(EvictionOutcome.REFUSED, err.message)
    if err.status == 404 or (err.status == 409 and "uid" in err.message.lower()):
        return EvictionResult(EvictionOutcome.GONE, err.message)
    log.warning("eviction failed status=%d reason=%s error=%s", err.status, err.reason, err.message)
    return EvictionResult(EvictionOutcome.FAILED, f"{err.status} {err.reason}: {err.message}")

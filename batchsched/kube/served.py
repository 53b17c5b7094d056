"""Informers for APIs a cluster may not serve: Volcano's CRDs, alpha Kubernetes groups.

An informer of a resource the API server does not serve would retry every few seconds with a
warning, forever, on every cluster that does not install it. `WhenServed` asks API discovery
instead, quietly, and starts the informer once the resource appears (a CRD installed after the
scheduler started is picked up within `interval`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Final, Protocol

from kubernetes_asyncio.client import ApiClient

from batchsched.kube.client import ApiError, ApiUnavailable, request_json
from batchsched.kube.informer import ResourceSpec

log = logging.getLogger(__name__)

DISCOVERY_INTERVAL_S: Final = 30.0


class _Informer(Protocol):
    resource: ResourceSpec
    synced: asyncio.Event

    async def run(self) -> None: ...

    async def wait_synced(self) -> None: ...

    async def resync(self) -> None: ...


async def is_served(api: ApiClient, group_version: str, resource: str) -> bool:
    """Whether discovery at `group_version` (e.g. /apis/scheduling.volcano.sh/v1beta1) lists
    `resource` (the plural name); False when the group is unknown or unreachable."""
    try:
        document = await request_json(api, "GET", group_version, timeout=10.0, fenced=False)
    except (ApiError, ApiUnavailable):
        return False
    resources = document.get("resources")
    names = (
        {r.get("name") for r in resources if isinstance(r, Mapping)}
        if isinstance(resources, list)
        else set()
    )
    return resource in names


class WhenServed:
    """An informer that starts once its resource is served (see the module docstring)."""

    def __init__(
        self,
        api: ApiClient,
        informer: _Informer,
        group_version: str,
        resource: str,
        interval: float = DISCOVERY_INTERVAL_S,
    ) -> None:
        self._api = api
        self._informer = informer
        self._group_version = group_version
        self._resource = resource
        self._interval = interval
        self.resource = informer.resource
        self.synced = informer.synced
        self.served = False
        self.checked = asyncio.Event()  # discovery has answered once (served or not)

    async def run(self) -> None:
        told = False
        while not await self._check():
            if not told:
                log.info(
                    "api not served; looking again every %.0fs group_version=%s resource=%s",
                    self._interval,
                    self._group_version,
                    self._resource,
                )
                told = True
            await asyncio.sleep(self._interval)
        log.info(
            "api served; watching group_version=%s resource=%s", self._group_version, self._resource
        )
        self.served = True
        await self._informer.run()

    async def _check(self) -> bool:
        served = await is_served(self._api, self._group_version, self._resource)
        self.served = served
        self.checked.set()
        return served

    def settled(self) -> bool:
        """Whether there is nothing more to wait for at start-up: discovery answered and the
        resource is not served, or it is and the informer has synced."""
        return self.checked.is_set() and (not self.served or self.synced.is_set())

    async def wait_synced(self) -> None:
        await self._informer.wait_synced()

    async def resync(self) -> None:
        # Nothing to list afresh while the API is not served (and no store to wait for).
        if self.served:
            await self._informer.resync()

"""One coordination.k8s.io/v1 Lease, read and written as raw JSON for leader election."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kubernetes_asyncio.client import ApiClient

from batchsched.kube.client import ApiError, ApiUnavailable, request_json


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The Lease spec fields leader election reads and writes (client-go's election record)."""

    holder: str
    lease_duration_seconds: int
    acquire_time: str  # MicroTime strings, written by us and compared only for equality
    renew_time: str
    transitions: int

    @classmethod
    def from_spec(cls, spec: Mapping[str, object]) -> LeaseRecord:
        def text(key: str) -> str:
            value = spec.get(key)
            return value if isinstance(value, str) else ""

        def number(key: str) -> int:
            value = spec.get(key)
            return value if isinstance(value, int) else 0

        return cls(
            text("holderIdentity"),
            number("leaseDurationSeconds"),
            text("acquireTime"),
            text("renewTime"),
            number("leaseTransitions"),
        )

    def to_spec(self) -> dict[str, object]:
        spec: dict[str, object] = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.transitions,
        }
        # An empty MicroTime is not valid JSON for the API server: leave the field out.
        if self.acquire_time:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time:
            spec["renewTime"] = self.renew_time
        return spec


class LeaseApiError(Exception):
    """A Lease request failed for a reason other than the expected 404/409 outcomes."""


class LeaseApi:
    """Raw JSON reads and writes of one Lease. It remembers the metadata it last saw, so that
    `replace` is conditional on its resourceVersion (client-go's LeaseLock does the same)."""

    def __init__(self, api: ApiClient, namespace: str, name: str, timeout: float) -> None:
        self._api = api
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self._namespace, self._name, self._timeout = namespace, name, timeout
        self._metadata: dict[str, object] | None = None

    def switch_client(self, api: ApiClient) -> ApiClient:
        """Make further requests through `api` (a client of the loop that renews); returns
        the client used until now. The metadata last seen stays."""
        previous, self._api = self._api, api
        return previous

    async def get(self) -> LeaseRecord | None:
        """The current record, or None when the Lease does not exist."""
        status, body = await self._request("GET", f"{self._collection}/{self._name}", None)
        if status == 404:
            self._metadata = None
            return None
        return self._accept(status, body, "read")

    async def create(self, record: LeaseRecord) -> LeaseRecord | None:
        """The created record, or None when another candidate created the Lease first."""
        meta: dict[str, object] = {"name": self._name, "namespace": self._namespace}
        status, body = await self._request("POST", self._collection, self._object(meta, record))
        return None if status == 409 else self._accept(status, body, "create")

    async def replace(self, record: LeaseRecord) -> LeaseRecord | None:
        """The written record, or None when the Lease changed (409) or vanished since we saw it."""
        if self._metadata is None:
            return None
        path = f"{self._collection}/{self._name}"
        status, body = await self._request("PUT", path, self._object(self._metadata, record))
        return None if status in (404, 409) else self._accept(status, body, "update")

    @staticmethod
    def _object(metadata: Mapping[str, object], record: LeaseRecord) -> dict[str, object]:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": dict(metadata),
            "spec": record.to_spec(),
        }

    def _accept(self, status: int, body: Mapping[str, object], verb: str) -> LeaseRecord:
        metadata, spec = body.get("metadata"), body.get("spec")
        if status // 100 != 2 or not isinstance(metadata, dict):
            raise LeaseApiError(
                f"{verb} lease {self._name}: HTTP {status}: {body.get('message', 'no message')}"
            )
        self._metadata = {k: v for k, v in metadata.items() if k != "managedFields"}
        return LeaseRecord.from_spec(spec if isinstance(spec, dict) else {})

    async def _request(
        self, method: str, path: str, body: Mapping[str, object] | None
    ) -> tuple[int, dict[str, object]]:
        # 404 and 409 are outcomes here, not errors: hand back the status with the body.
        try:
            return 200, await request_json(
                self._api, method, path, body=body, timeout=self._timeout, fenced=False
            )
        except ApiError as err:
            return err.status, {"message": err.message}
        except ApiUnavailable as err:
            raise LeaseApiError(str(err)) from err

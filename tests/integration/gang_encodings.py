"""Gangs in the encodings other tools produce, on the real API server: Volcano PodGroups
(scheduling.volcano.sh/v1beta1, from a stand-in CRD under fixtures/) and Kueue plain-pod
groups (labels and an annotation on the pods, no object).

Tests run batchsched with `live.running_scheduler`, which waits for an informer of an API the
server may not serve (Volcano's, the upstream PodGroup) only where discovery says it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from kubernetes_asyncio import client

from batchsched.kube.client import ApiError, request_json
from batchsched.model.gang_ref import (
    KUEUE_GROUP_LABEL,
    KUEUE_TOTAL_ANNOTATION,
    VOLCANO_GROUP_ANNOTATION,
)
from tests.builders import PodBuilder, make_pod
from tests.integration.control_plane import ControlPlane
from tests.integration.helpers import wait_for
from tests.integration.kwok import succeeding_pod
from tests.integration.live import events_for

NS: Final = "default"
VOLCANO_CRD: Final = Path(__file__).parent / "fixtures" / "volcano-podgroups-crd.yaml"
VOLCANO_API: Final = "scheduling.volcano.sh/v1beta1"
VOLCANO_GROUPS: Final = f"/apis/{VOLCANO_API}/namespaces/{NS}/podgroups"
SYNC_TIMEOUT_S: Final = 30.0


def install_volcano_crd(plane: ControlPlane) -> None:
    """The Volcano PodGroup CRD, established (the API server serves it once this returns)."""
    plane.kubectl("apply", "--server-side", "-f", str(VOLCANO_CRD))
    plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(VOLCANO_CRD))


async def delete_volcano_groups(api: client.ApiClient) -> None:
    """Every Volcano PodGroup in the test namespace, so none leaks into the next test."""
    await request_json(api, "DELETE", VOLCANO_GROUPS)

    async def none_left() -> bool:
        listing = await request_json(api, "GET", VOLCANO_GROUPS)
        return not listing.get("items")

    await wait_for(none_left, timeout=30, what="every Volcano PodGroup deleted")


# Volcano PodGroups


async def create_volcano_group(
    api: client.ApiClient, name: str, min_member: int, **spec: Any
) -> dict[str, Any]:
    body = {
        "apiVersion": VOLCANO_API,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"minMember": min_member, **spec},
    }
    return await request_json(api, "POST", VOLCANO_GROUPS, body=body)


async def volcano_status(api: client.ApiClient, name: str) -> dict[str, Any]:
    body = await request_json(api, "GET", f"{VOLCANO_GROUPS}/{name}")
    status = body.get("status")
    return status if isinstance(status, dict) else {}


def condition(status: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for found in status.get("conditions") or []:
        if isinstance(found, dict) and found.get("type") == kind:
            return found
    return None


def volcano_member(gang: str, index: int, gpus: int = 1, seconds: float = 0) -> PodBuilder:
    """A pod of Volcano PodGroup `gang`, as a Volcano Job would annotate it; it runs `seconds`
    on kwok and then succeeds (0: until deleted)."""
    name = f"{gang}-{index}"
    builder = succeeding_pod(name, seconds, NS) if seconds else make_pod(name, NS)
    return builder.gpus(gpus).cpu("1").annotation(VOLCANO_GROUP_ANNOTATION, gang)


def kueue_member(group: str, index: int, total: str, gpus: int = 1) -> PodBuilder:
    """A pod of a Kueue plain-pod group of `total` pods (a string: Kueue's annotation is)."""
    return (
        make_pod(f"{group}-{index}", NS)
        .gpus(gpus)
        .cpu("1")
        .label(KUEUE_GROUP_LABEL, group)
        .annotation(KUEUE_TOTAL_ANNOTATION, total)
    )


# What the API server holds


async def pods_named(api: client.ApiClient, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """name -> pod, for those of `names` that exist."""
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        try:
            out[name] = await request_json(api, "GET", f"/api/v1/namespaces/{NS}/pods/{name}")
        except ApiError as err:
            if err.status != 404:
                raise
    return out


async def bound_count(api: client.ApiClient, names: Iterable[str]) -> int:
    pods = await pods_named(api, names)
    return sum(1 for p in pods.values() if p.get("spec", {}).get("nodeName"))


async def phases_of(api: client.ApiClient, names: Iterable[str]) -> dict[str, str]:
    pods = await pods_named(api, names)
    return {name: str(p.get("status", {}).get("phase", "")) for name, p in pods.items()}


def pod_scheduled(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The pod's PodScheduled condition, if it has one."""
    return condition(pod.get("status") or {}, "PodScheduled")


async def notes(
    api: client.ApiClient, name: str, reason: str, type_: str | None = None
) -> list[str]:
    """The notes of the Events with this reason about objects named `name` in NS."""
    return [
        str(e.get("note", ""))
        for e in await events_for(api, NS, name)
        if e.get("reason") == reason and (type_ is None or e.get("type") == type_)
    ]

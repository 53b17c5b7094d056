"""A real 429: API Priority and Fairness on the test API server turns away a ServiceAccount
squeezed into a priority level of about 3 seats that rejects instead of queueing; the
client waits out each Retry-After and every request ends answered."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client

from batchsched.kube.client import Throttle, api_client, limit_requests, request_json
from batchsched.kube.throttle import RetryPolicy
from tests.integration.control_plane import ControlPlane
from tests.integration.test_secure_serving import service_account_token

FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
NS = "default"


async def squeeze(api: client.ApiClient, name: str) -> None:
    """`name` may list namespaces, in a priority level of 1 share that rejects."""
    level = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "PriorityLevelConfiguration",
        "metadata": {"name": name},
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": 1,
                "lendablePercent": 0,
                "borrowingLimitPercent": 0,
                "limitResponse": {"type": "Reject"},
            },
        },
    }
    rule: dict[str, Any] = {
        "subjects": [{"kind": "ServiceAccount", "serviceAccount": {"name": name, "namespace": NS}}],
        "resourceRules": [
            {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": True}
        ],
    }
    schema = {
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
        "kind": "FlowSchema",
        "metadata": {"name": name},
        "spec": {
            "priorityLevelConfiguration": {"name": name},
            "matchingPrecedence": 500,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [rule],
        },
    }
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NS}],
    }
    await request_json(api, "POST", f"{FLOWCONTROL}/prioritylevelconfigurations", body=level)
    await request_json(api, "POST", f"{FLOWCONTROL}/flowschemas", body=schema)
    await request_json(api, "POST", f"{RBAC}/clusterroles", body=role)
    await request_json(api, "POST", f"{RBAC}/clusterrolebindings", body=binding)


async def unsqueeze(api: client.ApiClient, name: str) -> None:
    for path in (
        f"{FLOWCONTROL}/flowschemas/{name}",
        f"{FLOWCONTROL}/prioritylevelconfigurations/{name}",
        f"{RBAC}/clusterrolebindings/{name}",
        f"{RBAC}/clusterroles/{name}",
    ):
        await request_json(api, "DELETE", path)


def token_kubeconfig(plane: ControlPlane, token: str, path: Path) -> str:
    cluster = {"server": plane.url, "certificate-authority": str(plane.state_dir / "pki/ca.crt")}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return str(path)


async def test_a_429_from_priority_and_fairness_is_waited_out_and_counted(
    control_plane: ControlPlane, api: client.ApiClient, tmp_path: Path
) -> None:
    name = f"squeezed-{uuid.uuid4().hex[:6]}"
    token = await service_account_token(api, name)
    await squeeze(api, name)
    retried: list[tuple[int, str]] = []
    try:
        squeezed = await api_client(token_kubeconfig(control_plane, token, tmp_path / "kc"))
        async with squeezed:
            policy = RetryPolicy(max_retries=30, max_wait=2.0)
            limit_requests(squeezed, Throttle(None, policy, lambda c, v: retried.append((c, v))))

            async def one() -> None:
                await request_json(squeezed, "GET", "/api/v1/namespaces", timeout=120)

            results = await asyncio.gather(*(one() for _ in range(300)), return_exceptions=True)
    finally:
        await unsqueeze(api, name)
    print(f"300 requests squeezed into one share: {len(retried)} answered 429 and retried")
    failures = [r for r in results if isinstance(r, BaseException)]
    assert not failures, failures[:3]
    assert retried, "no 429 came back: the priority level did not reject anything"
    assert {code for code, _ in retried} == {429}

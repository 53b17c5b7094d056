"""ClusterRole batchsched-viewer (deploy/scheduler/viewer-rbac.yaml) on a real API server: a
user bound to it as docs/operating.md says can run `batchsched queue`, `explain` and `gpus`
with nothing else, and can write nothing.

The user is a ServiceAccount with a TokenRequest token, the CLI runs with a kubeconfig holding
that token alone; `kubectl auth can-i --as` (a SubjectAccessReview) checks the writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client

from batchsched.cli import main
from batchsched.kube.client import ApiError, request_json
from tests.builders import make_node, make_pod
from tests.integration.conftest import ignore_gone
from tests.integration.control_plane import ROOT, ControlPlane
from tests.integration.helpers import create_node, create_pod, wait_for
from tests.integration.test_deploy import token_kubeconfig
from tests.integration.test_rbac import can_i, request_token

NS = "default"
VIEWER = "batchsched-viewer-test"
USER = f"system:serviceaccount:{NS}:{VIEWER}"
QUOTAS = "batchsched-system/batchsched-tenant-quotas"
MANIFESTS = ("namespace.yaml", "scheduler/viewer-rbac.yaml", "scheduler/quotas.yaml")
BINDINGS = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"


def cli(kubeconfig: Path, *args: str) -> int:
    return main([*args, "--kubeconfig", str(kubeconfig)])


async def run(kubeconfig: Path, *args: str) -> int:
    """The CLI as the user runs it: its own event loop, in a thread."""
    return await asyncio.to_thread(cli, kubeconfig, *args)


@pytest.fixture
async def viewer(
    control_plane: ControlPlane, api: client.ApiClient, tmp_path: Path
) -> AsyncIterator[Path]:
    """A kubeconfig with the token of a ServiceAccount bound to nothing yet."""
    control_plane.kubectl(
        "apply", "--server-side", *(f"-f={ROOT / 'deploy' / m}" for m in MANIFESTS)
    )
    body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": VIEWER}}
    try:
        await request_json(api, "POST", f"/api/v1/namespaces/{NS}/serviceaccounts", body=body)
    except ApiError as err:
        if err.status != 409:
            raise
    token = await request_token(api, VIEWER, namespace=NS)
    await create_node(api, make_node("gpu-0").gpus(8))
    await create_pod(api, make_pod("waits").gpus(16))  # fits no node: pending, explainable
    yield token_kubeconfig(control_plane, token, tmp_path / "kubeconfig")
    await ignore_gone(request_json(api, "DELETE", f"{BINDINGS}/{VIEWER}"))


async def bind_viewer(api: client.ApiClient) -> None:
    """docs/operating.md: kubectl create clusterrolebinding ... --clusterrole=batchsched-viewer."""
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": VIEWER},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "batchsched-viewer",
        },
        "subjects": [{"kind": "ServiceAccount", "name": VIEWER, "namespace": NS}],
    }
    await request_json(api, "POST", BINDINGS, body=binding)


async def wait_bound(plane: ControlPlane) -> None:
    """Until the authorizer has seen the binding (it watches RBAC objects)."""

    async def bound() -> bool:
        return await asyncio.to_thread(can_i, plane, USER, "list", "pods", None)

    await wait_for(bound, timeout=30, what="the viewer binding in force")


VIEWS = [
    ("queue", "--quota-configmap", QUOTAS),
    ("queue", "-o", "wide"),
    ("explain", "pod/waits", "-n", NS, "--quota-configmap", QUOTAS),
    ("gpus",),
]


async def test_the_views_are_refused_without_the_role_and_run_with_it(
    viewer: Path,
    api: client.ApiClient,
    control_plane: ControlPlane,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert await run(viewer, "queue") == 2  # bound to nothing: the API server says 403
    assert "forbidden" in capsys.readouterr().err.lower()

    await bind_viewer(api)

    await wait_bound(control_plane)
    for args in VIEWS:
        code = await run(viewer, *args)
        out, err = capsys.readouterr()
        assert code == 0, f"batchsched {' '.join(args)}: {err}"
    assert "waits" in out or "gpu-0" in out


# (what the sentence says, verb, resource[:subresource], namespace or None for all)
VIEWER_MAY_NOT = [
    ("create pods", "create", "pods", NS),
    ("delete pods", "delete", "pods", NS),
    ("bind pods", "create", "pods:binding", NS),
    ("evict pods", "create", "pods:eviction", NS),
    ("change nodes", "patch", "nodes", None),
    ("change a PodGroup", "update", "podgroups.scheduling.x-k8s.io", NS),
    ("write PodGroup status", "patch", "podgroups.scheduling.x-k8s.io:status", NS),
    ("write GPU topology", "create", "noderesourcetopologies.topology.node.k8s.io", None),
    ("change ResourceClaims", "update", "resourceclaims.resource.k8s.io", NS),
    ("take the scheduler's Lease", "update", "leases.coordination.k8s.io", "batchsched-system"),
    ("change the quota ConfigMap", "patch", "configmaps", "batchsched-system"),
    ("list every ConfigMap", "list", "configmaps", None),
    ("read Secrets", "get", "secrets", NS),
    ("read pod logs", "get", "pods:log", NS),
    ("exec into pods", "create", "pods:exec", NS),
]
VIEWER_MAY = [
    ("list pods everywhere", "list", "pods", None),
    ("watch nodes", "watch", "nodes", None),
    ("list ResourceSlices", "list", "resourceslices.resource.k8s.io", None),
    ("list events.k8s.io Events", "list", "events.events.k8s.io", None),
]


async def test_a_bound_viewer_reads_what_operators_look_at_and_can_write_nothing(
    viewer: Path, api: client.ApiClient, control_plane: ControlPlane
) -> None:
    assert not can_i(control_plane, USER, "list", "pods", None)  # bound to nothing yet
    await bind_viewer(api)

    await wait_bound(control_plane)
    wrong = [f"may {s}" for s, v, r, n in VIEWER_MAY if not can_i(control_plane, USER, v, r, n)]
    wrong += [
        f"may not {s}" for s, v, r, n in VIEWER_MAY_NOT if can_i(control_plane, USER, v, r, n)
    ]

    # APIs this API server does not serve (kubectl cannot name them): a SubjectAccessReview.
    wrong += [f"may list {r}.{g}" for g, r in NOT_INSTALLED if not await may_list(api, g, r)]

    assert wrong == []


# The views list these whether installed or not; RBAC is checked before the API server finds
# out that a resource does not exist, so a missing rule is a 403 the views cannot skip.
NOT_INSTALLED = [
    ("scheduling.volcano.sh", "podgroups"),
    ("scheduling.k8s.io", "podgroups"),
    ("scheduling.k8s.io", "workloads"),
]


async def may_list(api: client.ApiClient, group: str, resource: str) -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": USER,
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NS}"],
            "resourceAttributes": {"verb": "list", "group": group, "resource": resource},
        },
    }
    path = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    answer = await request_json(api, "POST", path, body=review)
    status = answer.get("status")
    return isinstance(status, dict) and status.get("allowed") is True

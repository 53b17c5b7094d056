"""The agent's admission policy holds in whatever namespace deploy/ is installed.

An operator's kustomize overlay with `namespace: gpu-ops` over deploy/ moves the agent's
ServiceAccount there. A policy that named batchsched-system would no longer match the agent's
requests, and a policy that does not match does not check: the agent on node-a could write
node-c's NodeResourceTopology (the API server answered 201). Applied through such an overlay
to a real API server, the agent's own node's object is accepted and another node's refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from batchsched.kube.client import request_json
from tests.builders import make_node
from tests.integration.control_plane import ROOT, ControlPlane
from tests.integration.helpers import create_node
from tests.integration.test_rbac import (
    NRT,
    POLICY,
    as_token,
    denial,
    request_token,
    topology,
    wait_policy_enforced,
)

OVERLAY_NAMESPACE = "gpu-ops"
DEPLOY = ROOT / "deploy"
# What the overlay changes that other test modules rely on: restored from deploy/ afterwards.
CLUSTER_KINDS = frozenset(
    {"ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
     "ValidatingAdmissionPolicyBinding"}
)  # fmt: skip


def write_overlay(directory: Path) -> Path:
    """An operator's overlay: deploy/ as it is, into another namespace."""
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "namespace": OVERLAY_NAMESPACE,
        # kustomize takes only relative paths to a base
        "resources": [os.path.relpath(DEPLOY, directory)],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return directory


def cluster_scoped(plane: ControlPlane, directory: Path) -> str:
    """The rendered cluster-scoped RBAC and policy objects of a kustomization, as YAML."""
    docs = yaml.safe_load_all(plane.kubectl("kustomize", str(directory)))
    return yaml.safe_dump_all(d for d in docs if d and d["kind"] in CLUSTER_KINDS)


# What the test needs of the overlay's objects. Not its workloads: a PodDisruptionBudget or
# Deployment left in gpu-ops would be seen by later modules' informers (a scheduler counting
# the cluster's budgets), and no namespace controller runs here to delete them with gpu-ops.
APPLIED_KINDS = CLUSTER_KINDS | {"Namespace", "ServiceAccount"}


@pytest.fixture(scope="module")
def overlaid(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    overlay = write_overlay(tmp_path_factory.mktemp("overlay"))
    rendered = yaml.safe_load_all(control_plane.kubectl("kustomize", str(overlay)))
    needed = yaml.safe_dump_all(d for d in rendered if d and d["kind"] in APPLIED_KINDS)
    control_plane.kubectl("apply", "--server-side", "-f", "-", stdin=needed)
    yield control_plane
    # What the tests wrote: the agent pods (no kubelet finalises them) and the topology.
    control_plane.kubectl(
        "delete", "pods", "--all", "-n", OVERLAY_NAMESPACE, "--grace-period=0", "--force"
    )
    control_plane.kubectl("delete", "noderesourcetopologies.topology.node.k8s.io", "--all")
    # The ClusterRoleBindings now name gpu-ops' ServiceAccounts: give them back to
    # batchsched-system for the modules that follow (the namespace stays: no controller
    # here would finish deleting it).
    control_plane.kubectl(
        "apply", "--server-side", "-f", "-", stdin=cluster_scoped(control_plane, DEPLOY)
    )


async def agent_token_on(api: client.ApiClient, node: str) -> str:
    """The token the DaemonSet's pod on `node` mounts: bound to a Pod there (no kubelet runs
    it; spec.nodeName is set as the scheduler would)."""
    pod: Any = await request_json(
        api,
        "POST",
        f"/api/v1/namespaces/{OVERLAY_NAMESPACE}/pods",
        body={
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"batchsched-agent-{node}", "namespace": OVERLAY_NAMESPACE},
            "spec": {
                "nodeName": node,
                "serviceAccountName": "batchsched-agent",
                "containers": [{"name": "agent", "image": "batchsched:0.1.0"}],
            },
        },
    )
    return await request_token(api, "batchsched-agent", pod, namespace=OVERLAY_NAMESPACE)


@pytest.fixture
async def token(overlaid: ControlPlane, api: client.ApiClient) -> str:
    await request_json(api, "DELETE", NRT)  # every node's object, from earlier tests
    for name in ("node-a", "node-c"):
        await create_node(api, make_node(name))
    found = await agent_token_on(api, "node-a")
    await wait_policy_enforced(overlaid, found)
    return found


def test_the_overlay_moves_the_agent_but_the_policy_still_names_it(
    overlaid: ControlPlane, tmp_path: Path
) -> None:
    rendered = list(yaml.safe_load_all(overlaid.kubectl("kustomize", str(write_overlay(tmp_path)))))
    accounts = [d for d in rendered if d["kind"] == "ServiceAccount"]
    policy = next(d for d in rendered if d["kind"] == "ValidatingAdmissionPolicy")

    assert {a["metadata"]["namespace"] for a in accounts} == {OVERLAY_NAMESPACE}
    assert "batchsched-system" not in yaml.safe_dump(policy["spec"])


async def test_the_agent_in_another_namespace_writes_its_own_nodes_topology(
    overlaid: ControlPlane, api: client.ApiClient, token: str
) -> None:
    async with as_token(overlaid, token) as agent:
        err = await denial(agent, "POST", NRT, body=topology("node-a"))

    assert err is None
    assert await request_json(api, "GET", f"{NRT}/node-a")


async def test_the_agent_in_another_namespace_cannot_write_another_nodes_topology(
    overlaid: ControlPlane, api: client.ApiClient, token: str
) -> None:
    async with as_token(overlaid, token) as agent:
        err = await denial(agent, "POST", NRT, body=topology("node-c"))

    assert err is not None and err.status == 403, err
    assert f"ValidatingAdmissionPolicy '{POLICY}'" in err.message
    assert "may write only the NodeResourceTopology named node-a, not node-c" in err.message
    listing: Any = await request_json(api, "GET", NRT)
    assert [o["metadata"]["name"] for o in listing["items"]] == []

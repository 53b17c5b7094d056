"""Least privilege, enforced by a real API server with deploy/'s RBAC and admission policy.

- `kubectl auth can-i` as the scheduler's and the agent's ServiceAccounts: what each needs is
  allowed, Secrets and everything else are not.
- The agent's identity, a ServiceAccount token from the TokenRequest API bound to a Pod on
  node-a (as the kubelet mounts it in the DaemonSet's pod), may write the
  NodeResourceTopology named node-a and is refused node-b's by the ValidatingAdmissionPolicy.
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client

from batchsched.kube.client import MERGE_PATCH, ApiError, open_stream, request_json
from gpu.agent import PublishError
from gpu.agent_cli import KubePublisher
from tests.builders import make_node
from tests.integration.control_plane import ROOT, ControlPlane
from tests.integration.helpers import create_node, wait_for

NAMESPACE = "batchsched-system"
SCHEDULER = f"system:serviceaccount:{NAMESPACE}:batchsched-scheduler"
AGENT = f"system:serviceaccount:{NAMESPACE}:batchsched-agent"
POLICY = "batchsched-agent-own-node-topology"
NRT = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
WORKLOADS = "ml-research"  # any namespace: the scheduler's rights there are cluster-wide
MANIFESTS = (
    "deploy/namespace.yaml",
    "deploy/scheduler/rbac.yaml",
    "deploy/scheduler/flowschema.yaml",
    "deploy/agent/rbac.yaml",
    "deploy/agent/admission-policy.yaml",
)
FLOW_CONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
RBAC_SYNC_S = 30.0  # the authorizer and the policy plugin see new objects through informers


def can_i(plane: ControlPlane, user: str, verb: str, resource: str, namespace: str | None) -> bool:
    """`kubectl auth can-i` as `user` (impersonated by the admin); namespace None: all."""
    resource, _, subresource = resource.partition(":")
    args = ["auth", "can-i", verb, resource, f"--as={user}"]
    args += [f"--subresource={subresource}"] if subresource else []
    args += [f"--namespace={namespace}"] if namespace else ["--all-namespaces"]
    done = subprocess.run(
        [str(plane.bin_dir / "kubectl"), "--kubeconfig", str(plane.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    answer = done.stdout.strip()
    if answer not in ("yes", "no"):
        raise RuntimeError(f"kubectl {' '.join(args)}: {answer} {done.stderr.strip()}")
    return answer == "yes"


@pytest.fixture(scope="module")
def installed(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """deploy/'s namespace, RBAC and admission policy, created for real."""
    files = [arg for path in MANIFESTS for arg in ("-f", str(ROOT / path))]
    control_plane.kubectl("apply", "--server-side", *files)
    deadline = time.monotonic() + RBAC_SYNC_S
    while not can_i(control_plane, SCHEDULER, "create", "pods:binding", WORKLOADS):
        assert time.monotonic() < deadline, "the scheduler's RBAC never took effect"
        time.sleep(0.1)
    yield control_plane


# (what the sentence says, verb, resource[:subresource] or resource/name, namespace or None)
SCHEDULER_MAY = [
    ("lists and watches nodes", "list", "nodes", None),
    ("lists and watches nodes", "watch", "nodes", None),
    ("lists pods in every namespace", "list", "pods", None),
    ("watches pods in every namespace", "watch", "pods", None),
    ("binds pods", "create", "pods:binding", WORKLOADS),
    ("writes a pod's PodScheduled condition", "patch", "pods:status", WORKLOADS),
    ("evicts preemption victims", "create", "pods:eviction", WORKLOADS),
    ("watches PodDisruptionBudgets", "watch", "poddisruptionbudgets.policy", None),
    ("lists PodDisruptionBudgets", "list", "poddisruptionbudgets.policy", None),
    ("records events.k8s.io Events", "create", "events.events.k8s.io", WORKLOADS),
    ("bumps an Event's series", "patch", "events.events.k8s.io", WORKLOADS),
    ("watches PriorityClasses", "watch", "priorityclasses.scheduling.k8s.io", None),
    ("watches PodGroups", "watch", "podgroups.scheduling.x-k8s.io", None),
    ("writes PodGroup status", "patch", "podgroups.scheduling.x-k8s.io:status", WORKLOADS),
    ("annotates a PodGroup's estimated start", "patch", "podgroups.scheduling.x-k8s.io", WORKLOADS),
    ("annotates a pod's estimated start", "patch", "pods", WORKLOADS),
    ("watches GPU topology", "watch", "noderesourcetopologies.topology.node.k8s.io", None),
    ("watches ResourceSlices", "watch", "resourceslices.resource.k8s.io", None),
    ("watches DeviceClasses", "watch", "deviceclasses.resource.k8s.io", None),
    ("watches ResourceClaims", "watch", "resourceclaims.resource.k8s.io", None),
    ("protects a claim it allocates", "update", "resourceclaims.resource.k8s.io", WORKLOADS),
    ("writes a claim's allocation", "update", "resourceclaims.resource.k8s.io:status", WORKLOADS),
    ("authenticates its callers", "create", "tokenreviews.authentication.k8s.io", None),
    ("authorizes its callers", "create", "subjectaccessreviews.authorization.k8s.io", None),
    ("creates its Lease", "create", "leases.coordination.k8s.io", NAMESPACE),
    ("renews its Lease", "update", "leases.coordination.k8s.io/gpu-scheduler", NAMESPACE),
    ("reads its quota ConfigMap", "get", "configmaps/batchsched-tenant-quotas", NAMESPACE),
]
SCHEDULER_MAY_NOT = [
    ("read a Secret in its own namespace", "get", "secrets", NAMESPACE),
    ("list Secrets anywhere", "list", "secrets", None),
    ("watch Secrets anywhere", "watch", "secrets", None),
    ("read other ConfigMaps", "get", "configmaps/kube-root-ca.crt", NAMESPACE),
    ("list ConfigMaps", "list", "configmaps", None),
    ("create pods", "create", "pods", WORKLOADS),
    ("delete pods (it only evicts announced preemption victims)", "delete", "pods", WORKLOADS),
    ("change a pod's spec", "update", "pods", WORKLOADS),
    ("change a PodDisruptionBudget", "update", "poddisruptionbudgets.policy", WORKLOADS),
    ("change nodes", "patch", "nodes", None),
    ("delete nodes", "delete", "nodes", None),
    ("change a PodGroup's spec", "update", "podgroups.scheduling.x-k8s.io", WORKLOADS),
    ("write GPU topology", "create", "noderesourcetopologies.topology.node.k8s.io", None),
    ("create ResourceClaims", "create", "resourceclaims.resource.k8s.io", WORKLOADS),
    ("delete ResourceClaims", "delete", "resourceclaims.resource.k8s.io", WORKLOADS),
    ("change ResourceSlices", "update", "resourceslices.resource.k8s.io", None),
    (
        "take kube-scheduler's Lease",
        "update",
        "leases.coordination.k8s.io/kube-scheduler",
        NAMESPACE,
    ),
    ("create Leases elsewhere", "create", "leases.coordination.k8s.io", "kube-system"),
    ("write core/v1 Events", "create", "events", WORKLOADS),
    ("mint ServiceAccount tokens", "create", "serviceaccounts:token", NAMESPACE),
    ("do anything", "*", "*", None),
]
AGENT_MAY = [
    ("creates topology objects", "create", "noderesourcetopologies.topology.node.k8s.io", None),
    ("applies topology objects", "patch", "noderesourcetopologies.topology.node.k8s.io", None),
    ("reads topology objects back", "get", "noderesourcetopologies.topology.node.k8s.io", None),
]
AGENT_MAY_NOT = [
    ("delete topology objects", "delete", "noderesourcetopologies.topology.node.k8s.io", None),
    ("list topology objects", "list", "noderesourcetopologies.topology.node.k8s.io", None),
    ("list Secrets", "list", "secrets", None),
    ("read a Secret in its own namespace", "get", "secrets", NAMESPACE),
    ("read nodes", "get", "nodes", None),
    ("change nodes", "patch", "nodes", None),
    ("list pods", "list", "pods", None),
    ("create pods", "create", "pods", NAMESPACE),
]
CASES = [
    *((f"the scheduler {s}", SCHEDULER, v, r, n, True) for s, v, r, n in SCHEDULER_MAY),
    *((f"the scheduler cannot {s}", SCHEDULER, v, r, n, False) for s, v, r, n in SCHEDULER_MAY_NOT),
    *((f"the agent {s}", AGENT, v, r, n, True) for s, v, r, n in AGENT_MAY),
    *((f"the agent cannot {s}", AGENT, v, r, n, False) for s, v, r, n in AGENT_MAY_NOT),
]


@pytest.mark.parametrize(
    ("user", "verb", "resource", "namespace", "allowed"),
    [case[1:] for case in CASES],
    ids=[f"{case[0]} ({case[2]} {case[3]})" for case in CASES],
)
def test_kubectl_auth_can_i(
    installed: ControlPlane,
    user: str,
    verb: str,
    resource: str,
    namespace: str | None,
    allowed: bool,
) -> None:
    assert can_i(installed, user, verb, resource, namespace) is allowed


# The agent's own credentials, as the API server sees them.


@dataclass(frozen=True)
class Identities:
    on_node_a: str  # a token bound to a Pod on node-a: what the DaemonSet's pod there mounts
    unbound: str  # a token bound to nothing: no node claim
    scheduler: str


async def request_token(
    api: client.ApiClient,
    account: str,
    bound_pod: dict[str, Any] | None = None,
    namespace: str = NAMESPACE,
) -> str:
    spec: dict[str, object] = {"expirationSeconds": 600}
    if bound_pod is not None:
        meta = bound_pod["metadata"]
        spec["boundObjectRef"] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta["name"],
            "uid": meta["uid"],
        }
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token"
    answer: Any = await request_json(api, "POST", path, body=body)
    return str(answer["status"]["token"])


@asynccontextmanager
async def as_token(plane: ControlPlane, token: str) -> AsyncIterator[client.ApiClient]:
    """A client that authenticates with the token alone (no client certificate)."""
    cfg = client.Configuration(host=plane.url)
    cfg.ssl_ca_cert = str(plane.state_dir / "pki" / "ca.crt")
    cfg.api_key = {"BearerToken": token}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    async with client.ApiClient(cfg) as api:
        yield api


def topology(name: str) -> dict[str, object]:
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha2",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name},
        "zones": [{"name": "node-0", "type": "Node"}],
    }


async def denial(api: client.ApiClient, method: str, path: str, **kw: Any) -> ApiError | None:
    try:
        await request_json(api, method, path, **kw)
    except ApiError as err:
        return err
    return None


async def wait_policy_enforced(plane: ControlPlane, token: str) -> None:
    """A dry-run create of a foreign object until the policy refuses it (it is loaded from an
    informer a moment after it is created)."""

    async def refused() -> bool:
        async with as_token(plane, token) as agent:
            err = await denial(
                agent, "POST", NRT, body=topology("policy-probe"), query=[("dryRun", "All")]
            )
        return err is not None and POLICY in err.message

    await wait_for(refused, timeout=RBAC_SYNC_S, what="the admission policy to be enforced")


@pytest.fixture
async def identities(installed: ControlPlane, api: client.ApiClient) -> Identities:
    """node-a and node-b, an agent Pod on node-a (no kubelet: created with spec.nodeName), the
    tokens, node-b's object created by the admin and node-a's absent."""
    await request_json(api, "DELETE", NRT)  # every node's object, from earlier tests
    for name in ("node-a", "node-b"):
        await create_node(api, make_node(name))
    pod: Any = await request_json(
        api,
        "POST",
        f"/api/v1/namespaces/{NAMESPACE}/pods",
        body={
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "batchsched-agent-node-a", "namespace": NAMESPACE},
            "spec": {
                "nodeName": "node-a",
                "serviceAccountName": "batchsched-agent",
                "containers": [{"name": "agent", "image": "batchsched:0.1.0"}],
            },
        },
    )
    await request_json(api, "POST", NRT, body=topology("node-b"))
    found = Identities(
        on_node_a=await request_token(api, "batchsched-agent", pod),
        unbound=await request_token(api, "batchsched-agent"),
        scheduler=await request_token(api, "batchsched-scheduler"),
    )
    await wait_policy_enforced(installed, found.on_node_a)
    return found


def claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return decoded


async def test_the_agents_token_carries_the_node_its_pod_runs_on(
    installed: ControlPlane, identities: Identities
) -> None:
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    async with as_token(installed, identities.on_node_a) as agent:
        answer: Any = await request_json(
            agent, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=review
        )

    user = answer["status"]["userInfo"]
    assert user["username"] == AGENT
    assert user["extra"]["authentication.kubernetes.io/node-name"] == ["node-a"]
    assert claims(identities.on_node_a)["kubernetes.io"]["node"]["name"] == "node-a"
    assert "node" not in claims(identities.unbound)["kubernetes.io"]


@dataclass(frozen=True)
class Write:
    how: str  # APPLY: the agent's own publisher (server-side apply); POST, PATCH: raw requests
    name: str
    own_exists: bool = False  # node-a's object created (by the admin) beforehand
    token: str = "on_node_a"


async def write_as(agent: client.ApiClient, write: Write) -> ApiError | None:
    """The write, as the agent; the API server's refusal, or None when it was accepted."""
    if write.how == "APPLY":
        try:
            await KubePublisher(api=agent).apply(topology(write.name))
        except PublishError as err:
            assert isinstance(err.__cause__, ApiError), err
            return err.__cause__
        return None
    if write.how == "POST":
        return await denial(agent, "POST", NRT, body=topology(write.name))
    patch = {"metadata": {"annotations": {"batchsched.io/heartbeat": "now"}}}
    path = f"{NRT}/{write.name}"
    return await denial(agent, "PATCH", path, body=patch, content_type=MERGE_PATCH)


OTHER_NODE = "may write only the NodeResourceTopology named node-a, not node-b"
NO_NODE = "not bound to a Pod on a node"
ALLOWED = [
    ("the agent's publisher creates node-a's object", Write("APPLY", "node-a")),
    ("the agent's publisher updates node-a's object", Write("APPLY", "node-a", own_exists=True)),
    ("the agent creates node-a's object", Write("POST", "node-a")),
    ("the agent patches node-a's object", Write("PATCH", "node-a", own_exists=True)),
]
DENIED = [
    ("the agent's publisher cannot update node-b's object", Write("APPLY", "node-b"), OTHER_NODE),
    ("the agent cannot create node-c's object", Write("POST", "node-c"), "not node-c"),
    ("the agent cannot patch node-b's object", Write("PATCH", "node-b"), OTHER_NODE),
    ("a token bound to no pod cannot write", Write("APPLY", "node-a", token="unbound"), NO_NODE),
]


async def version(api: client.ApiClient, name: str) -> str | None:
    """The object's resourceVersion, None when it does not exist."""
    try:
        found: Any = await request_json(api, "GET", f"{NRT}/{name}")
    except ApiError as err:
        if err.status == 404:
            return None
        raise
    return str(found["metadata"]["resourceVersion"])


async def attempt(
    plane: ControlPlane, api: client.ApiClient, identities: Identities, write: Write
) -> ApiError | None:
    if write.own_exists:
        await request_json(api, "POST", NRT, body=topology("node-a"))
    async with as_token(plane, getattr(identities, write.token)) as agent:
        return await write_as(agent, write)


@pytest.mark.parametrize("write", [w for _, w in ALLOWED], ids=[s for s, _ in ALLOWED])
async def test_the_agent_writes_its_own_nodes_topology(
    installed: ControlPlane, api: client.ApiClient, identities: Identities, write: Write
) -> None:
    before = await version(api, "node-a") if write.own_exists else None

    err = await attempt(installed, api, identities, write)

    assert err is None
    assert await version(api, "node-a") not in (None, before)


@pytest.mark.parametrize(
    ("write", "why"), [(w, y) for _, w, y in DENIED], ids=[s for s, _, _ in DENIED]
)
async def test_the_api_server_refuses_the_agent_other_nodes_topology(
    installed: ControlPlane, api: client.ApiClient, identities: Identities, write: Write, why: str
) -> None:
    before = await version(api, write.name)

    err = await attempt(installed, api, identities, write)

    assert err is not None and err.status == 403, err
    assert f"ValidatingAdmissionPolicy '{POLICY}'" in err.message
    assert why in err.message
    assert await version(api, write.name) == before


async def test_rbac_refuses_the_agent_a_delete_even_of_its_own_object(
    installed: ControlPlane, api: client.ApiClient, identities: Identities
) -> None:
    await request_json(api, "POST", NRT, body=topology("node-a"))

    async with as_token(installed, identities.on_node_a) as agent:
        err = await denial(agent, "DELETE", f"{NRT}/node-a")

    assert err is not None and err.status == 403
    assert 'cannot delete resource "noderesourcetopologies"' in err.message


async def test_the_schedulers_token_is_refused_secrets(
    installed: ControlPlane, identities: Identities
) -> None:
    async with as_token(installed, identities.scheduler) as scheduler:
        nodes = await denial(scheduler, "GET", "/api/v1/nodes")
        everywhere = await denial(scheduler, "GET", "/api/v1/secrets")
        own = await denial(scheduler, "GET", f"/api/v1/namespaces/{NAMESPACE}/secrets")

    assert nodes is None  # the token works: what it may do, it can
    for err in (everywhere, own):
        assert err is not None and err.status == 403
        assert 'cannot list resource "secrets"' in err.message


async def classification(api: client.ApiClient) -> tuple[str | None, str | None]:
    """The FlowSchema and priority level the API server put a request of `api` in, from the
    answer headers API Priority and Fairness adds."""
    resp = await open_stream(api, "/version", [], aiohttp.ClientTimeout(30))  # anyone may
    try:
        headers = resp.headers
        pair = headers.get("X-Kubernetes-PF-FlowSchema-UID")
        return pair, headers.get("X-Kubernetes-PF-PriorityLevel-UID")
    finally:
        resp.release()


async def test_the_schedulers_requests_queue_at_kube_schedulers_priority_level(
    installed: ControlPlane, identities: Identities, api: client.ApiClient
) -> None:
    schema: Any = await request_json(api, "GET", f"{FLOW_CONTROL}/flowschemas/batchsched-scheduler")
    level: Any = await request_json(
        api, "GET", f"{FLOW_CONTROL}/prioritylevelconfigurations/workload-high"
    )
    wanted = (schema["metadata"]["uid"], level["metadata"]["uid"])
    async with as_token(installed, identities.scheduler) as scheduler:

        async def classified() -> bool:
            return await classification(scheduler) == wanted

        # The API server's classifier sees a new FlowSchema through an informer.
        await wait_for(classified, RBAC_SYNC_S, "the scheduler's requests in its FlowSchema")
    async with as_token(installed, identities.unbound) as agent:
        other = await classification(agent)
    assert other[0] is not None and other[0] != wanted[0]  # only the scheduler's identity

"""The I/O edge of the views: list each kind once from the API server (GET only), parse,
compute the view, print. `batchsched queue|explain|gpus`, also `kubectl batchsched ...`.

Needs only get/list on nodes, pods, namespaces, priorityclasses, the PodGroup APIs and
NodeResourceTopologies (and get on the quota ConfigMap with --quota-configmap): the
read-only RBAC a cluster viewer has. An API group that is not installed (404) is skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

from kubernetes_asyncio.client import ApiClient

from batchsched.cluster_file import ClusterFileError, ClusterObjects, resolve
from batchsched.config import ConfigError, default_config, load_config
from batchsched.framework.profile import Profile
from batchsched.gang.encodings import parse_k8s_pod_group, parse_volcano_pod_group
from batchsched.gang.podgroup import PodGroupView, parse_pod_group
from batchsched.kube.client import ApiError, KubeConfigError, api_client, request_json
from batchsched.model.errors import InvalidObject
from batchsched.model.fields import as_list, as_map
from batchsched.views import render
from batchsched.views.explain import NotFound, explain, find_workload
from batchsched.views.gpus import gpu_view
from batchsched.views.queue import queue_view
from batchsched.views.state import LiveState
from gpu.nrt import parse_nrt
from gpu.topology import NodeTopology
from queues.config import load_quota_file, parse_quota_config
from queues.model import QuotaPolicy, single_tenant_policy

EXIT_BAD_INPUT: Final = 2
_PAGE: Final = "500"
_GROUP_APIS: Final[tuple[tuple[str, Callable[[Mapping[str, object]], PodGroupView]], ...]] = (
    ("/apis/scheduling.x-k8s.io/v1alpha1/podgroups", parse_pod_group),
    ("/apis/scheduling.k8s.io/v1alpha2/podgroups", parse_k8s_pod_group),
    ("/apis/scheduling.volcano.sh/v1beta1/podgroups", parse_volcano_pod_group),
)
_NRT: Final = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"


class ViewError(Exception):
    """Bad input or an unreachable API server: printed as one line, exit 2."""


def run_view(args: argparse.Namespace) -> int:
    try:
        profiles = _profiles(args.config)
        if getattr(args, "quota", None) is not None:
            _check_quota_file(args.quota)  # a bad file fails before any connection
        text = asyncio.run(_view(args, profiles))
    except (ViewError, KubeConfigError) as err:
        print(f"batchsched {args.command}: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(text)
    return 0


async def _view(args: argparse.Namespace, profiles: Mapping[str, Profile]) -> str:
    api = await api_client(args.kubeconfig)
    try:
        state = await read_state(api)
        policy = await _policy(api, args) if args.command != "gpus" else single_tenant_policy()
    except ApiError as err:
        raise ViewError(f"API server: {err}") from err
    finally:
        await api.close()
    return compute(args, state, profiles, policy)


def compute(
    args: argparse.Namespace,
    state: LiveState,
    profiles: Mapping[str, Profile],
    policy: QuotaPolicy,
) -> str:
    """The view the command asks for, as text."""
    json_out = args.output == "json"
    if args.command == "gpus":
        gview = gpu_view(state)
        return render.as_json(gview) if json_out else render.gpus_text(gview)
    if args.command == "explain":
        try:
            pods = find_workload(state, args.name, args.namespace)
            found = explain(state, profiles, policy, pods, args.seed)
        except NotFound as err:
            raise ViewError(str(err)) from err
        return render.as_json(found) if json_out else render.explain_text(found)
    view = queue_view(state, profiles, policy, args.seed)
    if args.namespace:
        kept = tuple(r for r in view.rows if _namespace(r.workload) == args.namespace)
        view = type(view)(kept, view.tenants)
    if args.tenant:
        view = type(view)(
            tuple(r for r in view.rows if r.tenant == args.tenant),
            tuple(t for t in view.tenants if t.tenant == args.tenant),
        )
    return render.as_json(view) if json_out else render.queue_text(view, args.output == "wide")


def _namespace(workload: str) -> str:
    return workload.split(":")[-1].split("/", 1)[0]


def _profiles(config: Path | None) -> Mapping[str, Profile]:
    try:
        loaded = load_config(config) if config is not None else default_config()
        return loaded.build_profiles()
    except ConfigError as err:
        raise ViewError(str(err)) from err


def _check_quota_file(path: Path) -> None:
    try:
        load_quota_file(path)
    except ConfigError as err:
        raise ViewError(str(err)) from err


async def _policy(api: ApiClient, args: argparse.Namespace) -> QuotaPolicy:
    try:
        if args.quota is not None:
            return load_quota_file(args.quota)
        if args.quota_configmap:
            namespace, _, name = str(args.quota_configmap).partition("/")
            if not namespace or not name:
                raise ViewError(f"--quota-configmap {args.quota_configmap!r}: expected NS/NAME")
            path = f"/api/v1/namespaces/{namespace}/configmaps/{name}"
            data = as_map((await request_json(api, "GET", path)).get("data"), "data")
            key = "quotas.yaml" if "quotas.yaml" in data or len(data) != 1 else next(iter(data))
            if key not in data:
                raise ViewError(f"ConfigMap {namespace}/{name} has no key quotas.yaml")
            return parse_quota_config(str(data[key]), f"ConfigMap {namespace}/{name} {key}")
    except ConfigError as err:
        raise ViewError(str(err)) from err
    return single_tenant_policy()


async def list_items(api: ApiClient, path: str, optional: bool = False) -> list[dict[str, object]]:
    """Every object at `path`, page by page; [] for an API group not installed."""
    items: list[dict[str, object]] = []
    token = ""
    while True:
        query = [("limit", _PAGE)] + ([("continue", token)] if token else [])
        try:
            page = await request_json(api, "GET", path, query=query)
        except ApiError as err:
            if optional and err.status == 404:
                return []
            raise
        items.extend(i for i in as_list(page.get("items"), "items") if isinstance(i, dict))
        token = str(as_map(page.get("metadata"), "metadata").get("continue") or "")
        if not token:
            return items


async def read_state(api: ApiClient) -> LiveState:
    """One list of each kind, parsed as `batchsched place` parses a dump."""
    nodes = await list_items(api, "/api/v1/nodes")
    pods = await list_items(api, "/api/v1/pods")
    namespaces = await list_items(api, "/api/v1/namespaces")
    classes = await list_items(api, "/apis/scheduling.k8s.io/v1/priorityclasses")
    raw_groups = [(parse, await list_items(api, path, True)) for path, parse in _GROUP_APIS]
    nrts = await list_items(api, _NRT, optional=True)
    objects = ClusterObjects(
        nodes=list(nodes),
        pods=[(f"pod {_name(p)}", p) for p in pods],
        priority_classes=list(classes),
        namespaces=list(namespaces),
    )
    try:
        cluster = resolve(objects)
        groups = [parse(g) for parse, items in raw_groups for g in items]
        topologies = _topologies(nrts)
    except (ClusterFileError, InvalidObject) as err:
        raise ViewError(str(err)) from err
    return LiveState(
        nodes=cluster.nodes,
        pods=cluster.pods,
        pod_groups=groups,
        namespace_labels=cluster.namespace_labels,
        topologies=topologies,
        scheduled_messages=scheduled_messages(pods),
        now=time.time(),
    )


def _topologies(nrts: Sequence[Mapping[str, object]]) -> dict[str, NodeTopology]:
    out = {}
    for raw in nrts:
        measured = parse_nrt(raw)
        if measured.topology is not None:
            out[measured.node] = measured.topology
    return out


def _name(obj: Mapping[str, object]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return "<unnamed>"
    return f"{meta.get('namespace', '')}/{meta.get('name', '<unnamed>')}"


def scheduled_messages(pods: Sequence[Mapping[str, object]]) -> dict[str, str]:
    """Pod key -> the message of its PodScheduled=False condition."""
    out = {}
    for pod in pods:
        status = pod.get("status")
        conditions = status.get("conditions") if isinstance(status, Mapping) else None
        for condition in conditions if isinstance(conditions, list) else []:
            if (
                isinstance(condition, Mapping)
                and condition.get("type") == "PodScheduled"
                and condition.get("status") == "False"
            ):
                out[_name(pod)] = str(condition.get("message") or condition.get("reason") or "")
    return out

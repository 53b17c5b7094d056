"""deploy/ as an operator applies it: every manifest is accepted by a real API server
(server-side dry run), and the pieces agree with each other and with the code they run.

Namespaces and CRDs are created for real first (the conftest installs deploy/crds; the
ServiceMonitor CRD here is a test fixture standing in for the Prometheus Operator's): a dry
run cannot create a namespace or a kind that later objects of the same apply need.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from batchsched.cli import build_parser
from batchsched.config import config_from_mapping
from batchsched.kube.client import ApiError, request_json
from batchsched.metrics import SchedulerMetrics
from gpu.agent_cli import build_parser as agent_parser
from gpu.agent_metrics import AgentMetrics
from queues.config import parse_quota_config
from tests.builders import make_node
from tests.integration.control_plane import ROOT, ControlPlane
from tests.integration.helpers import create_node, wait_for
from tests.integration.test_rbac import as_token, request_token

DEPLOY = ROOT / "deploy"
EXAMPLES = DEPLOY / "examples"
FIXTURES = Path(__file__).parent / "fixtures"
KUSTOMIZATIONS = (DEPLOY, DEPLOY / "monitoring")
KIND_CLUSTER = DEPLOY / "kind" / "cluster.yaml"
KIND_AGENT_PATCH = DEPLOY / "kind" / "agent-fake.patch.yaml"
# Files under deploy/ that are not API objects for `kubectl apply`.
NOT_API_OBJECTS = frozenset({KIND_CLUSTER, KIND_AGENT_PATCH})
# The Helm chart and the release manifests render these kustomizations again; their own tests
# (test_helm_chart.py, test_release_manifest.py) hold them to the same objects.
RENDERED_ELSEWHERE = (DEPLOY / "helm", DEPLOY / "release")
NAMESPACES = (DEPLOY / "namespace.yaml", EXAMPLES / "namespace.yaml")
SYSTEM = "batchsched-system"
WORKLOADS = "ml-research"
QUOTAS = "batchsched-tenant-quotas"
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{SYSTEM}/leases"
DRY_RUN = ("apply", "--dry-run=server", "--server-side")  # as kubectl, like a re-apply


def load_objects(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [doc for doc in yaml.safe_load_all(f) if doc]


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def applied_names(output: str) -> list[str]:
    """`deployment.apps/batchsched-scheduler serverside-applied (server dry run)` lines -> the
    object names, in order; every line must be a dry-run apply."""
    lines = [line for line in output.splitlines() if line.strip()]
    assert all(line.endswith("serverside-applied (server dry run)") for line in lines), output
    return sorted(line.split()[0].partition("/")[2] for line in lines)


@pytest.fixture(scope="module")
def plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    files = [arg for path in (*NAMESPACES, *FIXTURES.glob("*.yaml")) for arg in ("-f", str(path))]
    control_plane.kubectl("apply", "--server-side", *files)
    crds = [arg for path in FIXTURES.glob("*.yaml") for arg in ("-f", str(path))]
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", *crds)
    yield control_plane


def render(plane: ControlPlane, directory: Path) -> list[dict[str, Any]]:
    """The objects `kubectl apply -k <directory>` creates, as kustomize renders them."""
    return [doc for doc in yaml.safe_load_all(plane.kubectl("kustomize", str(directory))) if doc]


@pytest.fixture(scope="module")
def core(plane: ControlPlane) -> list[dict[str, Any]]:
    return render(plane, DEPLOY)


@pytest.mark.parametrize(
    "directory",
    KUSTOMIZATIONS,
    ids=["the core install applies", "the monitoring install applies"],
)
def test_each_kustomization_applies_with_a_server_side_dry_run(
    plane: ControlPlane, directory: Path
) -> None:
    rendered = render(plane, directory)

    output = plane.kubectl(*DRY_RUN, "-k", str(directory))

    assert applied_names(output) == sorted(o["metadata"]["name"] for o in rendered)


def test_the_examples_apply_with_a_server_side_dry_run(plane: ControlPlane) -> None:
    expected = [o for path in sorted(EXAMPLES.glob("*.yaml")) for o in load_objects(path)]

    output = plane.kubectl(*DRY_RUN, "-f", str(EXAMPLES))

    assert applied_names(output) == sorted(o["metadata"]["name"] for o in expected)
    assert {o["kind"] for o in expected} >= {"PodGroup", "Job", "Pod"}


def test_the_kind_patch_runs_the_agent_in_fake_mode_without_the_nvidia_runtime(
    plane: ControlPlane,
) -> None:
    # A DaemonSet is only an object here (no controller-manager makes pods of it).
    plane.kubectl("apply", "--server-side", "-f", str(DEPLOY / "agent" / "daemonset.yaml"))

    patch = ("--type=json", f"--patch-file={KIND_AGENT_PATCH}", "--dry-run=server", "-o=yaml")
    patched = yaml.safe_load(
        plane.kubectl("-n=batchsched-system", "patch", "daemonset/batchsched-agent", *patch)
    )

    pod = patched["spec"]["template"]["spec"]
    assert "runtimeClassName" not in pod
    assert any(arg.startswith("--fake") for arg in pod["containers"][0]["args"])


def kustomized_files(directory: Path) -> set[Path]:
    spec = yaml.safe_load((directory / "kustomization.yaml").read_text(encoding="utf-8"))
    files: set[Path] = set()
    for entry in spec.get("resources", []):
        target = (directory / entry).resolve()
        files |= kustomized_files(target) if target.is_dir() else {target}
    for generator in spec.get("configMapGenerator", []):
        files |= {(directory / f.rpartition("=")[2]).resolve() for f in generator.get("files", [])}
    return files


def test_every_manifest_is_installed_by_a_kustomization_or_is_an_example() -> None:
    on_disk = {
        p.resolve()
        for p in DEPLOY.rglob("*")
        if p.suffix in {".yaml", ".yml", ".json"}
        and p.name != "kustomization.yaml"
        and not any(p.is_relative_to(d) for d in RENDERED_ELSEWHERE)
    }
    examples = {p.resolve() for p in EXAMPLES.glob("*")}
    installed = set().union(*(kustomized_files(d) for d in KUSTOMIZATIONS))

    forgotten = on_disk - installed - examples - {p.resolve() for p in NOT_API_OBJECTS}

    assert not forgotten, f"in no kustomization: {sorted(map(str, forgotten))}"
    assert not installed - on_disk, "a kustomization names a file that does not exist"


def container(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    containers: list[dict[str, Any]] = find(objects, kind, name)["spec"]["template"]["spec"][
        "containers"
    ]
    assert len(containers) == 1
    return containers[0]


def mounted_file(objects: list[dict[str, Any]], path: str) -> str:
    """The text of a file the scheduler's container reads: the ConfigMap key behind `path`."""
    pod = find(objects, "Deployment", "batchsched-scheduler")["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
    directory, _, key = path.rpartition("/")
    volume = next(v for v in pod["volumes"] if v["name"] == mounts[directory])
    data: str = find(objects, "ConfigMap", volume["configMap"]["name"])["data"][key]
    return data


def test_the_scheduler_runs_with_flags_batchsched_run_accepts(core: list[dict[str, Any]]) -> None:
    scheduler = container(core, "Deployment", "batchsched-scheduler")

    args = build_parser().parse_args(scheduler["args"])  # exits (fails) on an unknown flag

    # Probes and scrapes on the secure port, as kube-scheduler's; no unauthenticated listener.
    assert args.http_address is None
    assert [p["containerPort"] for p in scheduler["ports"]] == [args.secure_port] == [10259]
    probes = {name: scheduler[name]["httpGet"] for name in ("livenessProbe", "readinessProbe")}
    assert probes["livenessProbe"]["path"] == "/healthz"
    assert probes["readinessProbe"]["path"] == "/readyz"
    assert {p["port"] for p in probes.values()} == {scheduler["ports"][0]["name"]}
    assert {p["scheme"] for p in probes.values()} == {"HTTPS"}
    service = find(core, "Service", "batchsched-scheduler")["spec"]["ports"]
    assert [(p["port"], p["targetPort"]) for p in service] == [(10259, "https-metrics")]
    assert args.leader_elect is True
    assert scheduler["securityContext"]["readOnlyRootFilesystem"] is True


def test_the_scheduler_config_loads_and_elects_in_the_schedulers_namespace(
    core: list[dict[str, Any]],
) -> None:
    args = build_parser().parse_args(container(core, "Deployment", "batchsched-scheduler")["args"])

    config = config_from_mapping(yaml.safe_load(mounted_file(core, str(args.config))))

    assert [p.scheduler_name for p in config.profiles] == ["gpu-scheduler"]
    lease = config.leader_election
    role = find(core, "Role", "batchsched-scheduler")
    assert lease.resource_namespace == role["metadata"]["namespace"] == "batchsched-system"
    assert any(lease.resource_name in rule.get("resourceNames", []) for rule in role["rules"])


def test_the_quota_example_loads_and_maps_the_examples_namespace(
    core: list[dict[str, Any]],
) -> None:
    args = build_parser().parse_args(container(core, "Deployment", "batchsched-scheduler")["args"])

    policy = parse_quota_config(mounted_file(core, str(args.quota)), "quotas.yaml")

    assert policy.tenant_of("ml-research", {}) == "research/llm"
    namespace, _, name = args.quota_configmap.partition("/")
    assert find(core, "ConfigMap", name)["metadata"]["namespace"] == namespace


def test_the_agent_runs_what_batchsched_agent_accepts(core: list[dict[str, Any]]) -> None:
    agent = container(core, "DaemonSet", "batchsched-agent")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    fake = yaml.safe_load(KIND_AGENT_PATCH.read_text(encoding="utf-8"))[-1]["value"]

    args = agent_parser().parse_args(agent.get("args", []))
    agent_parser().parse_args(fake)  # exits (fails) on an unknown flag or machine

    assert agent["command"] == ["batchsched-agent"]
    assert "batchsched-agent" in pyproject["project"]["scripts"]
    port = int(args.http_address.rpartition(":")[2])
    assert [p["containerPort"] for p in agent["ports"]] == [port]
    assert agent["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert agent["readinessProbe"]["httpGet"]["path"] == "/readyz"
    env = {e["name"]: e.get("valueFrom", e.get("value")) for e in agent["env"]}
    assert env["NODE_NAME"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    mounts = {m["mountPath"]: m for m in agent["volumeMounts"]}
    socket_dir = str(args.pod_resources_socket.parent)
    assert mounts[socket_dir]["readOnly"] is True


SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def exported_series() -> set[str]:
    """Every series name the scheduler and the agent can export."""
    names: set[str] = set()
    for registry in (SchedulerMetrics().registry, AgentMetrics().registry):
        for family in registry.collect():
            names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
    return names


def test_the_dashboard_queries_only_series_that_are_exported() -> None:
    dashboard = json.loads((DEPLOY / "monitoring/dashboards/batchsched.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]

    queried = {m for e in exprs for m in re.findall(r"\b(?:scheduler|batchsched|leader)_\w+", e)}

    assert queried
    assert queried <= exported_series(), queried - exported_series()


def labels_of_kind_workers() -> list[Mapping[str, str]]:
    cluster = yaml.safe_load(KIND_CLUSTER.read_text(encoding="utf-8"))
    assert (cluster["apiVersion"], cluster["kind"]) == ("kind.x-k8s.io/v1alpha4", "Cluster")
    return [n.get("labels", {}) for n in cluster["nodes"] if n["role"] == "worker"]


def test_the_agent_lands_on_the_kind_clusters_gpu_workers(core: list[dict[str, Any]]) -> None:
    selector = find(core, "DaemonSet", "batchsched-agent")["spec"]["template"]["spec"][
        "nodeSelector"
    ]

    workers = labels_of_kind_workers()

    assert workers
    assert all(selector.items() <= labels.items() for labels in workers)


# The scheduler as deployed: the Deployment's flags and files, the ServiceAccount's rights.

SCHEDULER_MANIFESTS = ("scheduler/rbac.yaml", "scheduler/config.yaml", "scheduler/quotas.yaml")
GANG = EXAMPLES / "pytorchjob-pods.yaml"
H100 = "NVIDIA-H100-80GB-HBM3"


def token_kubeconfig(plane: ControlPlane, token: str, path: Path) -> Path:
    """What the in-cluster config amounts to: the API server, its CA and the token alone."""
    cluster = {"server": plane.url, "certificate-authority": str(plane.state_dir / "pki/ca.crt")}
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": cluster}],
        "users": [{"name": "scheduler", "user": {"token": token}}],
        "contexts": [
            {"name": "in-cluster", "context": {"cluster": "cluster", "user": "scheduler"}}
        ],
        "current-context": "in-cluster",
    }
    path.write_text(yaml.safe_dump(kubeconfig), encoding="utf-8")
    return path


def deployed_args(core: list[dict[str, Any]], directory: Path, port: int) -> list[str]:
    """The Deployment's args, with its mounted files written to `directory`, its secure port
    on `port` (runs share this host) bound to loopback."""
    args = []
    for arg in container(core, "Deployment", "batchsched-scheduler")["args"]:
        flag, _, value = arg.partition("=")
        if flag in ("--config", "--quota"):
            local = directory / Path(value).name
            local.write_text(mounted_file(core, value), encoding="utf-8")
            arg = f"{flag}={local}"
        elif flag == "--secure-port":
            arg = f"{flag}={port}"
        args.append(arg)
    return [*args, "--bind-address=127.0.0.1"]


async def node_of(api: client.ApiClient, name: str) -> str:
    pod: Any = await request_json(api, "GET", f"/api/v1/namespaces/{WORKLOADS}/pods/{name}")
    return str(pod["spec"].get("nodeName") or "")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_rbac(plane: ControlPlane, token: str) -> None:
    """Until the authorizer has seen the ClusterRole and the Role (it watches them)."""
    async with as_token(plane, token) as scheduler:

        async def allowed() -> bool:
            for path in ("/api/v1/nodes", f"/api/v1/namespaces/{SYSTEM}/configmaps/{QUOTAS}"):
                try:
                    await request_json(scheduler, "GET", path)
                except ApiError:
                    return False
            return True

        await wait_for(allowed, timeout=30, what="the scheduler's RBAC in force")


async def test_the_deployed_scheduler_places_a_gang_with_only_its_own_rights(
    plane: ControlPlane, core: list[dict[str, Any]], api: client.ApiClient, tmp_path: Path
) -> None:
    plane.kubectl("apply", "--server-side", *(f"-f={DEPLOY / m}" for m in SCHEDULER_MANIFESTS))
    token = await request_token(api, "batchsched-scheduler")
    await wait_rbac(plane, token)
    for name in ("gpu-0", "gpu-1"):
        await create_node(api, make_node(name).gpus(8).label("nvidia.com/gpu.product", H100))
    args = deployed_args(core, tmp_path, free_port())
    kubeconfig = token_kubeconfig(plane, token, tmp_path / "kubeconfig")
    log = tmp_path / "scheduler.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "batchsched.cli", *args, f"--kubeconfig={kubeconfig}"],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        plane.kubectl("apply", "--server-side", "-f", str(GANG))
        names = [o["metadata"]["name"] for o in load_objects(GANG) if o["kind"] == "Pod"]

        async def bound() -> bool:
            return all([await node_of(api, name) for name in names])

        await wait_for(lambda: bound() if proc.poll() is None else True, timeout=60, what="gang")
        assert proc.poll() is None, log.read_text()
        lease: Any = await request_json(api, "GET", f"{LEASES}/gpu-scheduler")
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)

    output = log.read_text()
    assert code == 0, output
    assert lease["spec"]["holderIdentity"]
    assert "forbidden" not in output.lower(), output

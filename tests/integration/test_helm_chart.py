"""The Helm chart (deploy/helm/batchsched) with a real `helm` (the `helm` fixture builds it
from the Go module proxy with scripts/helm.sh): it lints, renders the same objects as
deploy/'s kustomizations with its default values (this is what keeps the two in step when
deploy/ changes), its values change what they say, and what it renders is accepted by a real
API server (server-side dry run).
"""

from __future__ import annotations

import json
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.control_plane import ROOT, ControlPlane

CHART = ROOT / "deploy" / "helm" / "batchsched"
DEPLOY = ROOT / "deploy"
FIXTURES = Path(__file__).parent / "fixtures"
# Labels the chart adds to every object's metadata for Helm (not to selectors or pods).
HELM_LABELS = frozenset(
    {
        "helm.sh/chart",
        "app.kubernetes.io/managed-by",
        "app.kubernetes.io/instance",
        "app.kubernetes.io/version",
    }
)
# A pod annotation the chart adds so that `helm upgrade` with a new config rolls the pods.
CHECKSUM = "checksum/config"
Key = tuple[str, str, str]  # kind, namespace ("" when cluster scoped), name


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm), *args], capture_output=True, text=True, timeout=120, check=False
    )


def template(helm: Path, *args: str) -> list[dict[str, Any]]:
    """`helm template` with the CRDs, as objects; fails the test on a render error."""
    done = run_helm(helm, "template", "batchsched", str(CHART), "--include-crds", *args)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def kustomize(plane: ControlPlane, *directories: Path) -> list[dict[str, Any]]:
    return [
        doc
        for directory in directories
        for doc in yaml.safe_load_all(plane.kubectl("kustomize", str(directory)))
        if doc
    ]


def key(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def _parsed(name: str, text: str) -> object:
    """A ConfigMap's file, compared by content: YAML or JSON parsed, comments and layout not."""
    if name.endswith((".yaml", ".yml")):
        return yaml.safe_load(text)
    if name.endswith(".json"):
        return json.loads(text)
    return text


def normalised(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what only Helm adds, ConfigMap files parsed."""
    obj = json.loads(json.dumps(obj))  # a deep copy
    meta = obj["metadata"]
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k not in HELM_LABELS}
    meta.pop("labels", None)
    if labels:
        meta["labels"] = labels
    pod_meta = obj.get("spec", {}).get("template", {}).get("metadata", {})
    annotations = pod_meta.get("annotations") or {}
    annotations.pop(CHECKSUM, None)
    if not annotations:
        pod_meta.pop("annotations", None)
    if obj["kind"] == "ConfigMap":
        obj["data"] = {name: _parsed(name, text) for name, text in obj.get("data", {}).items()}
    return obj


def by_key(objects: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    found = {key(o): normalised(o) for o in objects}
    assert len(found) == len(objects), "two objects of one kind, namespace and name"
    return found


def assert_same_objects(chart: list[dict[str, Any]], kustomized: list[dict[str, Any]]) -> None:
    ours, theirs = by_key(chart), by_key(kustomized)
    assert sorted(ours) == sorted(theirs), "the chart and deploy/ render different objects"
    for k in sorted(theirs):
        assert ours[k] == theirs[k], f"{'/'.join(k)} differs between the chart and deploy/"


def test_helm_lint_passes_strict(helm: Path) -> None:
    done = run_helm(helm, "lint", "--strict", str(CHART))

    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


def test_the_chart_and_the_package_have_one_version(helm: Path) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

    assert chart["version"] == chart["appVersion"] == project


def test_default_values_render_the_objects_of_deploy(
    helm: Path, control_plane: ControlPlane
) -> None:
    assert_same_objects(template(helm), kustomize(control_plane, DEPLOY))


def test_monitoring_enabled_adds_the_objects_of_deploy_monitoring(
    helm: Path, control_plane: ControlPlane
) -> None:
    chart = template(helm, "--set", "monitoring.enabled=true")

    assert_same_objects(chart, kustomize(control_plane, DEPLOY, DEPLOY / "monitoring"))


def objects_of(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def only(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objects_of(objects, kind) if o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


def scheduler_args(objects: list[dict[str, Any]]) -> list[str]:
    pod = only(objects, "Deployment", "batchsched-scheduler")["spec"]["template"]["spec"]
    args: list[str] = pod["containers"][0]["args"]
    return args


def scheduler_config(objects: list[dict[str, Any]]) -> dict[str, Any]:
    data = only(objects, "ConfigMap", "batchsched-scheduler-config")["data"]["config.yaml"]
    parsed: dict[str, Any] = yaml.safe_load(data)
    return parsed


def test_the_namespace_value_moves_every_namespaced_object_and_reference(helm: Path) -> None:
    objects = template(helm, "--set", "namespace.name=gpu-ops", "--set", "monitoring.enabled=true")

    namespaced = [o for o in objects if "namespace" in o["metadata"]]
    bindings = objects_of(objects, "ClusterRoleBinding") + objects_of(objects, "RoleBinding")
    monitors = objects_of(objects, "ServiceMonitor")
    assert {o["metadata"]["namespace"] for o in namespaced} == {"gpu-ops"}
    assert len(namespaced) == 15
    assert only(objects, "Namespace", "gpu-ops")
    assert {s["namespace"] for b in bindings for s in b["subjects"]} == {"gpu-ops"}
    assert scheduler_config(objects)["leaderElection"]["resourceNamespace"] == "gpu-ops"
    assert "--quota-configmap=gpu-ops/batchsched-tenant-quotas" in scheduler_args(objects)
    assert {m["spec"]["namespaceSelector"]["matchNames"][0] for m in monitors} == {"gpu-ops"}
    assert "batchsched-system" not in yaml.safe_dump_all(objects)


def test_image_values_set_both_workloads_image(helm: Path) -> None:
    objects = template(
        helm, "--set", "image.repository=registry.example.com/batchsched", "--set",
        "image.tag=0.2.0-rc1", "--set", "image.pullPolicy=Always",
    )  # fmt: skip

    pods = [
        o["spec"]["template"]["spec"] for o in objects if o["kind"] in ("Deployment", "DaemonSet")
    ]
    containers = [c for pod in pods for c in pod["containers"]]
    assert len(containers) == 2
    assert {c["image"] for c in containers} == {"registry.example.com/batchsched:0.2.0-rc1"}
    assert {c["imagePullPolicy"] for c in containers} == {"Always"}


def test_leader_election_off_runs_one_replica_without_a_lease(helm: Path) -> None:
    objects = template(
        helm, "--set", "scheduler.leaderElection.enabled=false", "--set", "scheduler.replicas=1"
    )

    assert only(objects, "Deployment", "batchsched-scheduler")["spec"]["replicas"] == 1
    assert "--leader-elect" not in scheduler_args(objects)
    assert scheduler_config(objects)["leaderElection"]["leaderElect"] is False
    assert objects_of(objects, "PodDisruptionBudget") == []  # it would block every drain


def test_two_replicas_without_leader_election_are_refused(helm: Path) -> None:
    done = run_helm(
        helm,
        "template",
        "batchsched",
        str(CHART),
        "--set",
        "scheduler.leaderElection.enabled=false",
    )

    assert done.returncode != 0
    assert "scheduler.replicas > 1 needs scheduler.leaderElection.enabled" in done.stderr


def test_the_lease_name_is_the_one_the_role_allows(helm: Path) -> None:
    objects = template(helm, "--set", "scheduler.leaderElection.leaseName=batch-leader")

    role = only(objects, "Role", "batchsched-scheduler")
    named = [r.get("resourceNames") for r in role["rules"] if "leases" in r["resources"]]
    assert scheduler_config(objects)["leaderElection"]["resourceName"] == "batch-leader"
    assert ["batch-leader"] in named


def test_scheduler_config_quota_file_and_resources_come_from_values(
    helm: Path, tmp_path: Path
) -> None:
    quotas = tmp_path / "quotas.yaml"
    quotas.write_text("apiVersion: batchsched.io/v1alpha1\nkind: QuotaConfig\ntenants: []\n")
    values = tmp_path / "values.yaml"
    values.write_text(
        yaml.safe_dump(
            {
                "scheduler": {
                    "config": {
                        "profiles": [{"schedulerName": "batch"}],
                        "percentageOfNodesToScore": 50,
                    },
                    "resources": {"requests": {"cpu": "2", "memory": "4Gi"}},
                },
                "agent": {"resources": {"limits": {"memory": "1Gi"}}},
            }
        )
    )

    objects = template(helm, "-f", str(values), "--set-file", f"quotas={quotas}")

    config = scheduler_config(objects)
    pods = {
        o["kind"]: o["spec"]["template"]["spec"] for o in objects if "template" in o.get("spec", {})
    }
    data = only(objects, "ConfigMap", "batchsched-tenant-quotas")["data"]["quotas.yaml"]
    assert config["profiles"] == [{"schedulerName": "batch"}]
    assert config["percentageOfNodesToScore"] == 50
    assert config["leaderElection"]["leaderElect"] is True
    assert data == quotas.read_text()
    # Helm merges maps: a value given replaces that key, the others keep their defaults.
    assert pods["Deployment"]["containers"][0]["resources"] == {
        "requests": {"cpu": "2", "memory": "4Gi"},
        "limits": {"memory": "2Gi"},
    }
    assert pods["DaemonSet"]["containers"][0]["resources"] == {
        "requests": {"cpu": "10m", "memory": "64Mi"},
        "limits": {"memory": "1Gi"},
    }


def test_service_monitor_and_alert_rule_labels_come_from_values(helm: Path) -> None:
    objects = template(
        helm, "--set", "monitoring.enabled=true",
        "--set", "monitoring.serviceMonitor.labels.release=prom-a",
        "--set", "monitoring.prometheusRule.labels.release=prom-b",
    )  # fmt: skip

    monitors = objects_of(objects, "ServiceMonitor")
    rules = objects_of(objects, "PrometheusRule")
    assert len(monitors) == 2
    assert {m["metadata"]["labels"]["release"] for m in monitors} == {"prom-a"}
    assert [r["metadata"]["labels"]["release"] for r in rules] == ["prom-b"]


def test_the_alert_rules_keep_prometheus_templates_and_can_be_left_out(helm: Path) -> None:
    with_rules = template(helm, "--set", "monitoring.enabled=true")
    without = template(
        helm, "--set", "monitoring.enabled=true", "--set", "monitoring.prometheusRule.enabled=false"
    )

    rules = only(with_rules, "PrometheusRule", "batchsched")
    assert "{{ $value" in yaml.safe_dump(rules["spec"])  # Prometheus's, left alone by Helm
    assert objects_of(without, "PrometheusRule") == []
    assert len(objects_of(without, "ServiceMonitor")) == 2


def test_the_agent_can_be_left_out(helm: Path) -> None:
    objects = template(helm, "--set", "agent.enabled=false")

    names = {o["metadata"]["name"] for o in objects}
    assert not {n for n in names if "agent" in n}
    assert only(objects, "Deployment", "batchsched-scheduler")


@pytest.fixture(scope="module")
def applied_namespace(control_plane: ControlPlane) -> Iterator[str]:
    """A namespace of the chart's own (not deploy/'s), created for real: a dry run cannot
    create the namespace that the objects after it need. The Prometheus Operator's CRDs are
    the test fixtures test_deploy.py uses."""
    crds = [arg for path in sorted(FIXTURES.glob("*.yaml")) for arg in ("-f", str(path))]
    control_plane.kubectl("apply", "--server-side", *crds)
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", *crds)
    yield "batchsched-helm"


def test_the_rendered_chart_applies_with_a_server_side_dry_run(
    helm: Path, control_plane: ControlPlane, applied_namespace: str
) -> None:
    objects = template(
        helm, "--set", f"namespace.name={applied_namespace}", "--set", "monitoring.enabled=true"
    )
    first = [o for o in objects if o["kind"] in ("CustomResourceDefinition", "Namespace")]
    rest = [o for o in objects if o not in first]
    control_plane.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(first))
    crd_names = [f"crd/{o['metadata']['name']}" for o in first if o["kind"] != "Namespace"]
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", *crd_names)

    output = control_plane.kubectl(
        "apply", "--dry-run=server", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(rest)
    )

    lines = [line for line in output.splitlines() if line.strip()]
    assert all(line.endswith("serverside-applied (server dry run)") for line in lines), output
    assert len(lines) == len(rest)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("schedular.replicas=3", "additional properties 'schedular' not allowed"),
        ("scheduler.config.leaderElection.leaderElect=false", "/scheduler/config"),
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
        ("namespace.name=Batch_Sched", "/namespace/name"),
    ],
    ids=[
        "a misspelt key",
        "leaderElection in the config (the chart writes it)",
        "an unknown pull policy",
        "a namespace name the API server would refuse",
    ],
)
def test_values_the_schema_refuses_fail_the_render_naming_the_value(
    helm: Path, value: str, says: str
) -> None:
    done = run_helm(helm, "template", "batchsched", str(CHART), "--set", value)

    assert done.returncode != 0
    assert says in done.stderr


def config_checksum(objects: list[dict[str, Any]]) -> str:
    pod = only(objects, "Deployment", "batchsched-scheduler")["spec"]["template"]
    value: str = pod["metadata"]["annotations"][CHECKSUM]
    return value


def test_a_changed_scheduler_config_rolls_the_pods_and_a_changed_quota_file_does_not(
    helm: Path, tmp_path: Path
) -> None:
    quotas = tmp_path / "quotas.yaml"
    quotas.write_text("apiVersion: batchsched.io/v1alpha1\nkind: QuotaConfig\ntenants: []\n")
    before = config_checksum(template(helm))

    config_changed = template(helm, "--set", "scheduler.config.percentageOfNodesToScore=20")
    quotas_changed = template(helm, "--set-file", f"quotas={quotas}")

    assert config_checksum(config_changed) != before
    # The scheduler reloads its quota file without a restart.
    assert config_checksum(quotas_changed) == before

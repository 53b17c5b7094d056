"""The Helm chart's serving, scraping and reader-role values: the secure port moves every
place that names it, a serving certificate Secret is mounted and used, the ServiceMonitor's
credentials and TLS come from values, Prometheus's ServiceAccount is bound to the
metrics-reader role on request, the viewer role can join `view`; and the chart with all of
them set applies with a server-side dry run. (With default values the chart renders deploy/'s
objects exactly: test_helm_chart.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.integration.control_plane import ControlPlane
from tests.integration.test_helm_chart import (
    applied_namespace,  # noqa: F401 - a fixture, shared
    objects_of,
    only,
    scheduler_args,
    template,
)

AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-view"
TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"


def scheduler_pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = only(objects, "Deployment", "batchsched-scheduler")["spec"]
    pod: dict[str, Any] = spec["template"]["spec"]
    return pod


def scheduler_endpoint(objects: list[dict[str, Any]]) -> dict[str, Any]:
    monitor = only(objects, "ServiceMonitor", "batchsched-scheduler")
    endpoints: list[dict[str, Any]] = monitor["spec"]["endpoints"]
    assert len(endpoints) == 1
    return endpoints[0]


def test_the_secure_port_value_moves_the_flag_container_service_probes_and_scrape(
    helm: Path,
) -> None:
    objects = template(
        helm, "--set", "scheduler.securePort=8443", "--set", "monitoring.enabled=true"
    )

    container = scheduler_pod(objects)["containers"][0]
    service = only(objects, "Service", "batchsched-scheduler")["spec"]["ports"]
    probes = [container[p]["httpGet"] for p in ("livenessProbe", "readinessProbe")]
    assert "--secure-port=8443" in scheduler_args(objects)
    assert not [a for a in scheduler_args(objects) if a.startswith("--http-address")]
    assert [(p["name"], p["containerPort"]) for p in container["ports"]] == [
        ("https-metrics", 8443)
    ]
    assert [(p["port"], p["targetPort"]) for p in service] == [(8443, "https-metrics")]
    assert [(p["path"], p["port"], p["scheme"]) for p in probes] == [
        ("/healthz", "https-metrics", "HTTPS"),
        ("/readyz", "https-metrics", "HTTPS"),
    ]
    endpoint = scheduler_endpoint(objects)
    assert (endpoint["port"], endpoint["scheme"]) == ("https-metrics", "https")


def test_a_tls_secret_is_mounted_and_served_instead_of_a_self_signed_certificate(
    helm: Path,
) -> None:
    objects = template(helm, "--set", "scheduler.tls.secretName=batchsched-serving")

    pod = scheduler_pod(objects)
    mounts = {m["name"]: m for m in pod["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["tls"]["secret"] == {"secretName": "batchsched-serving"}
    assert mounts["tls"] == {"name": "tls", "mountPath": "/etc/batchsched/tls", "readOnly": True}
    assert "--tls-cert-file=/etc/batchsched/tls/tls.crt" in scheduler_args(objects)
    assert "--tls-private-key-file=/etc/batchsched/tls/tls.key" in scheduler_args(objects)
    assert "tls" not in {v["name"] for v in scheduler_pod(template(helm))["volumes"]}


def test_a_plain_listener_is_started_only_when_an_address_is_given(helm: Path) -> None:
    objects = template(helm, "--set", "scheduler.httpAddress=0.0.0.0:10251")

    assert "--http-address=0.0.0.0:10251" in scheduler_args(objects)
    probes = scheduler_pod(objects)["containers"][0]["livenessProbe"]["httpGet"]
    assert probes["scheme"] == "HTTPS"  # the probes stay on the secure port


def test_the_scrape_credentials_and_tls_come_from_values(helm: Path, tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    secret = {"type": "Bearer", "credentials": {"name": "scrape-token", "key": "token"}}
    tls = {"ca": {"secret": {"name": "batchsched-serving", "key": "ca.crt"}}, "serverName": "s"}
    scrape = {"authorization": secret, "tlsConfig": tls}
    values.write_text(
        yaml.safe_dump({"monitoring": {"enabled": True, "serviceMonitor": {"scheduler": scrape}}})
    )

    default = scheduler_endpoint(template(helm, "--set", "monitoring.enabled=true"))
    endpoint = scheduler_endpoint(template(helm, "-f", str(values)))

    assert default["bearerTokenFile"] == TOKEN_FILE
    assert default["tlsConfig"] == {"insecureSkipVerify": True}
    assert endpoint["authorization"] == secret
    assert "bearerTokenFile" not in endpoint  # the Secret's token replaces Prometheus's own
    assert endpoint["tlsConfig"] == tls  # a CA given: verification is not skipped


def test_prometheus_is_bound_to_the_metrics_reader_role_only_when_named(helm: Path) -> None:
    objects = template(
        helm, "--set", "monitoring.prometheusServiceAccount.name=prom",
        "--set", "monitoring.prometheusServiceAccount.namespace=observability",
    )  # fmt: skip

    binding = only(objects, "ClusterRoleBinding", "batchsched-metrics-reader")
    assert binding["roleRef"]["name"] == "batchsched-metrics-reader"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "prom", "namespace": "observability"}
    ]
    role = only(objects, "ClusterRole", "batchsched-metrics-reader")
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    unbound = objects_of(template(helm), "ClusterRoleBinding")
    assert "batchsched-metrics-reader" not in {b["metadata"]["name"] for b in unbound}


def test_the_viewer_role_joins_view_on_request_and_reads_the_named_lease(helm: Path) -> None:
    objects = template(
        helm, "--set", "viewer.aggregateToView=true",
        "--set", "scheduler.leaderElection.leaseName=batch-leader",
    )  # fmt: skip

    viewer = only(objects, "ClusterRole", "batchsched-viewer")
    assert viewer["metadata"]["labels"][AGGREGATE] == "true"
    leases = [r for r in viewer["rules"] if "leases" in r.get("resources", [])]
    assert leases == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["batch-leader"],
            "verbs": ["get"],
        }
    ]
    assert {v for r in viewer["rules"] for v in r["verbs"]} <= {"get", "list", "watch"}
    default = only(template(helm), "ClusterRole", "batchsched-viewer")
    assert AGGREGATE not in default["metadata"]["labels"]


def test_the_chart_with_every_serving_value_set_applies_with_a_server_side_dry_run(
    helm: Path,
    control_plane: ControlPlane,
    applied_namespace: str,  # noqa: F811 - the fixture imported above
) -> None:
    objects = template(
        helm, "--set", f"namespace.name={applied_namespace}", "--set", "monitoring.enabled=true",
        "--set", "scheduler.securePort=8443", "--set", "scheduler.tls.secretName=serving",
        "--set", "scheduler.httpAddress=127.0.0.1:10251", "--set", "viewer.aggregateToView=true",
        "--set", "monitoring.prometheusServiceAccount.name=prom",
        "--set", "monitoring.serviceMonitor.scheduler.authorization.type=Bearer",
        "--set", "monitoring.serviceMonitor.scheduler.authorization.credentials.name=scrape",
        "--set", "monitoring.serviceMonitor.scheduler.authorization.credentials.key=token",
    )  # fmt: skip
    first = [o for o in objects if o["kind"] in ("CustomResourceDefinition", "Namespace")]
    rest = [o for o in objects if o not in first]
    control_plane.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(first))

    output = control_plane.kubectl(
        "apply", "--dry-run=server", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(rest)
    )

    lines = [line for line in output.splitlines() if line.strip()]
    assert all(line.endswith("serverside-applied (server dry run)") for line in lines), output
    assert len(lines) == len(rest)
    assert "clusterrolebinding.rbac.authorization.k8s.io/batchsched-metrics-reader" in output

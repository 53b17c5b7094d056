"""`helm install`, `helm upgrade` and `helm uninstall` of deploy/helm/batchsched against the
real API server, as an operator runs them (no kubelet runs the pods: this is about the
objects). Into a namespace of its own; the chart's cluster-scoped objects share deploy/'s
names, so deploy/'s are put back afterwards for the modules that follow.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.control_plane import ROOT, ControlPlane
from tests.integration.test_admission_overlay import cluster_scoped
from tests.integration.test_helm_chart import CHART

RELEASE = "batchsched"
NAMESPACE = "batchsched-helm-live"
QUOTAS = "batchsched-tenant-quotas"


def run(plane: ControlPlane, helm: Path, *args: str) -> str:
    done = subprocess.run(
        [str(helm), "--kubeconfig", str(plane.kubeconfig), "--namespace", "default", *args],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"helm {' '.join(args)}: {done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(control_plane: ControlPlane, helm: Path) -> Iterator[ControlPlane]:
    # --take-ownership: other modules may have applied deploy/'s ClusterRoles and policy
    # with kubectl; an operator moving to the chart does the same.
    run(
        control_plane, helm, "install", RELEASE, str(CHART), "--take-ownership",
        "--set", f"namespace.name={NAMESPACE}",
    )  # fmt: skip
    try:
        yield control_plane
    finally:
        run(control_plane, helm, "uninstall", RELEASE)
        control_plane.kubectl(
            "apply",
            "--server-side",
            "-f",
            "-",
            stdin=cluster_scoped(control_plane, ROOT / "deploy"),
        )


def manifest(plane: ControlPlane, helm: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(run(plane, helm, "get", "manifest", RELEASE)) if d]


def test_helm_install_creates_every_object_the_chart_renders(
    installed: ControlPlane,
    helm: Path,
) -> None:
    objects = manifest(installed, helm)
    refs = [f"{o['kind'].lower()}/{o['metadata']['name']}" for o in objects]
    namespaced = [o for o in objects if "namespace" in o["metadata"]]

    found = installed.kubectl("get", "-n", NAMESPACE, "-o", "name", *refs).split()

    assert len(found) == len(objects) > 10
    assert {o["metadata"]["namespace"] for o in namespaced} == {NAMESPACE}
    status = run(installed, helm, "status", RELEASE)
    assert "STATUS: deployed" in status


def test_helm_upgrade_replaces_the_quota_file_in_the_api(
    installed: ControlPlane,
    helm: Path,
    tmp_path: Path,
) -> None:
    quotas = tmp_path / "quotas.yaml"
    quotas.write_text(
        "apiVersion: batchsched.io/v1alpha1\nkind: QuotaConfig\ndefaultTenant: all\n"
        "tenants:\n  - name: all\n    namespaces: [default]\n"
    )

    run(
        installed, helm, "upgrade", RELEASE, str(CHART), "--reuse-values",
        "--set-file", f"quotas={quotas}",
    )  # fmt: skip

    stored = yaml.safe_load(
        installed.kubectl("get", "configmap", QUOTAS, "-n", NAMESPACE, "-o", "yaml")
    )
    assert stored["data"]["quotas.yaml"] == quotas.read_text()
    history = run(installed, helm, "history", RELEASE, "-o", "yaml")
    assert [r["revision"] for r in yaml.safe_load(history)] == [1, 2]

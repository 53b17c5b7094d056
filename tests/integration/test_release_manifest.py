"""The versioned release manifests (deploy/release/, written by scripts/release.sh): what
deploy/'s kustomizations render now, with the package's version as image tag, accepted by a
real API server; and the Helm chart's copies of deploy/'s CRDs and dashboard unchanged.
A failure here means: run scripts/release.sh and commit what it wrote.
"""

from __future__ import annotations

import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.control_plane import ROOT, ControlPlane

RELEASE = ROOT / "deploy" / "release"
MANIFESTS = ("batchsched.yaml", "batchsched-monitoring.yaml")
CHART = ROOT / "deploy" / "helm" / "batchsched"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
STALE = "stale: run scripts/release.sh and commit deploy/release and deploy/helm"


def objects(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


@pytest.fixture(scope="module")
def fresh(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The manifests as scripts/release.sh renders them from the tree now (with the control
    plane's kubectl, so both passes of the test command compare like with like)."""
    out = tmp_path_factory.mktemp("release")
    env = {**control_plane.env, "KUBECTL": str(control_plane.bin_dir / "kubectl")}
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "release.sh"), "--out", str(out)],
        env=env, check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return out


@pytest.mark.parametrize("name", MANIFESTS)
def test_the_committed_manifest_is_what_deploy_renders_now(fresh: Path, name: str) -> None:
    # Compared as objects: kustomize's layout may differ between kubectl releases.
    committed = objects((RELEASE / name).read_text())

    assert committed == objects((fresh / name).read_text()), f"{name} {STALE}"


def test_the_manifest_names_the_version_and_runs_that_image() -> None:
    text = (RELEASE / "batchsched.yaml").read_text()
    workloads = [o for o in objects(text) if o["kind"] in ("Deployment", "DaemonSet")]
    pods = [o["spec"]["template"]["spec"] for o in workloads]

    assert text.startswith(f"# batchsched {VERSION}: ")
    assert {c["image"] for pod in pods for c in pod["containers"]} == {f"batchsched:{VERSION}"}
    assert len(pods) == 2


@pytest.mark.parametrize(
    ("copy", "source"),
    [
        *((CHART / "crds" / p.name, p) for p in sorted((ROOT / "deploy" / "crds").glob("*.yaml"))),
        (CHART / "files" / "dashboard.json", ROOT / "deploy/monitoring/dashboards/batchsched.json"),
        (CHART / "files" / "prometheusrule.yaml", ROOT / "deploy/monitoring/prometheusrule.yaml"),
    ],
    ids=lambda p: p.name,
)
def test_the_charts_copies_of_deploys_files_are_current(copy: Path, source: Path) -> None:
    assert copy.read_bytes() == source.read_bytes(), f"{copy.name} {STALE}"


def test_the_chart_has_no_crd_that_deploy_lacks() -> None:
    ours = {p.name for p in (CHART / "crds").glob("*")}

    assert ours == {p.name for p in (ROOT / "deploy" / "crds").glob("*.yaml")}, STALE


@pytest.fixture(scope="module")
def namespaced(control_plane: ControlPlane) -> Iterator[list[dict[str, Any]]]:
    """The core manifest's objects after its CRDs and Namespace, created for real (a dry run
    cannot create what the objects after them need)."""
    everything = objects((RELEASE / "batchsched.yaml").read_text())
    first = [o for o in everything if o["kind"] in ("CustomResourceDefinition", "Namespace")]
    control_plane.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(first))
    yield [o for o in everything if o not in first]


def test_the_release_manifest_applies_with_a_server_side_dry_run(
    control_plane: ControlPlane, namespaced: list[dict[str, Any]]
) -> None:
    output = control_plane.kubectl(
        "apply", "--dry-run=server", "--server-side", "-f", "-",
        stdin=yaml.safe_dump_all(namespaced),
    )  # fmt: skip

    lines = [line for line in output.splitlines() if line.strip()]
    assert all(line.endswith("serverside-applied (server dry run)") for line in lines), output
    assert len(lines) == len(namespaced) > 10

"""deploy/monitoring on the real API server: the overlay docs/operations.md shows (another
Prometheus release label, another alert threshold) renders and applies with a server-side
dry run, next to the Prometheus Operator CRDs' stand-ins in fixtures/."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from tests.integration.control_plane import ROOT, ControlPlane

FIXTURES = Path(__file__).parent / "fixtures"
MONITORING = ROOT / "deploy" / "monitoring"
DOCS = ROOT / "docs" / "operations.md"
MARK = "# my-monitoring/kustomization.yaml"


def documented_overlay() -> str:
    blocks = re.findall(r"```yaml\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.DOTALL)
    found = [b for b in blocks if b.startswith(MARK)]
    assert len(found) == 1, f"one overlay starting {MARK!r} expected in {DOCS}"
    return found[0]


def test_the_documented_overlay_relabels_every_object_and_changes_the_threshold(
    control_plane: ControlPlane, tmp_path: Path
) -> None:
    overlay = tmp_path / "my-monitoring"
    overlay.mkdir()
    # kustomize wants a relative path to a base outside the overlay's directory.
    text = documented_overlay().replace(
        "../deploy/monitoring", os.path.relpath(MONITORING, overlay)
    )
    (overlay / "kustomization.yaml").write_text(text, encoding="utf-8")
    crds = [
        arg for p in sorted(FIXTURES.glob("*.monitoring.coreos.com.yaml")) for arg in ("-f", str(p))
    ]
    namespace = ROOT / "deploy" / "namespace.yaml"
    control_plane.kubectl("apply", "--server-side", "-f", str(namespace), *crds)
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", *crds)

    objects: list[dict[str, Any]] = [
        o for o in yaml.safe_load_all(control_plane.kubectl("kustomize", str(overlay))) if o
    ]
    applied = control_plane.kubectl(
        "apply", "--dry-run=server", "--server-side", "-k", str(overlay)
    )

    kinds = sorted(o["kind"] for o in objects)
    assert kinds == ["ConfigMap", "PrometheusRule", "ServiceMonitor", "ServiceMonitor"]
    assert all(o["metadata"]["labels"]["release"] == "prom" for o in objects)
    rule = next(o for o in objects if o["kind"] == "PrometheusRule")
    gang = rule["spec"]["groups"][0]["rules"][3]
    assert gang["alert"] == "BatchschedGangPendingTooLong"
    assert gang["expr"].endswith("> 7200")
    assert applied.count("serverside-applied (server dry run)") == len(objects), applied

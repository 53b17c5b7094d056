"""The cached `helm` from scripts/helm.sh (built from the Go module proxy the first time)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.integration.control_plane import ROOT

HELM_SCRIPT = ROOT / "scripts" / "helm.sh"
INSTALL_TIMEOUT_S = 1800  # a first build: about 3 CPU-minutes, longer on a busy machine


class HelmUnavailable(RuntimeError):
    pass


def install_helm() -> Path:
    """The helm binary, installed first where missing (a no-op once cached)."""
    done = subprocess.run(
        ["bash", str(HELM_SCRIPT), "install"],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        tail = done.stderr.strip()[-2000:]
        raise HelmUnavailable(f"scripts/helm.sh install exited {done.returncode}: {tail}")
    path = subprocess.run(
        ["bash", str(HELM_SCRIPT), "path"], capture_output=True, text=True, check=True
    )
    return Path(path.stdout.strip())

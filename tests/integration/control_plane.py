"""Start (or reuse) the real control plane from scripts/control-plane.sh for a test session."""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "control-plane.sh"
INSTALL_TIMEOUT_S = 3600  # a fresh machine builds kube-apiserver with Go (~5 min on 2 cores)


class ControlPlaneUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class ControlPlane:
    state_dir: Path
    kubeconfig: Path
    url: str
    bin_dir: Path
    env: dict[str, str]

    @property
    def version(self) -> str:
        """The Kubernetes release running, e.g. v1.36.3: the name of its binaries' cache dir
        (BATCHSCHED_K8S_VERSION, else scripts/k8s-build/VERSION)."""
        return self.bin_dir.parent.name

    @property
    def minor(self) -> int:
        """The release's minor version (36 for v1.36.3), for what differs between releases."""
        return int(self.version.split(".")[1])

    def script(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return _run([str(SCRIPT), *args], self.env, timeout)

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [str(self.bin_dir / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")
        return done.stdout


def _run(cmd: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as err:
        raise ControlPlaneUnavailable(f"{' '.join(cmd)} timed out after {timeout:.0f}s") from err
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-30:])
        raise ControlPlaneUnavailable(f"{' '.join(cmd)} exited {done.returncode}:\n{tail}")
    return done


def start(state_dir: Path) -> ControlPlane:
    env = dict(os.environ, BATCHSCHED_CP_DIR=str(state_dir))
    _run([str(SCRIPT), "install"], env, INSTALL_TIMEOUT_S)
    _run([str(SCRIPT), "up"], env, 300)
    exported = _run([str(SCRIPT), "env"], env, 60).stdout
    values: dict[str, str] = {}
    for line in exported.splitlines():
        if line.startswith("export ") and "=" in line:
            key, _, raw = line[len("export ") :].partition("=")
            parts = shlex.split(raw)
            values[key] = parts[0] if parts else ""
    env.update({k: v for k, v in values.items() if k != "PATH"})
    return ControlPlane(
        state_dir=state_dir,
        kubeconfig=Path(values["KUBECONFIG"]),
        url=values["BATCHSCHED_APISERVER_URL"],
        bin_dir=Path(values["BATCHSCHED_K8S_BIN"]),
        env=env,
    )


def stop(plane: ControlPlane) -> None:
    _run([str(SCRIPT), "scheduler-down"], plane.env, 60)
    _run([str(SCRIPT), "down", "--purge"], plane.env, 120)


def start_kwok(plane: ControlPlane) -> None:
    """kwok (simulated kubelets for annotated Nodes) and kube-controller-manager.

    `install` (run by `start`) already built both; install-kwok is a no-op then, and only
    builds kwok for a cache filled before `install` learnt about it."""
    _run([str(SCRIPT), "install-kwok"], plane.env, INSTALL_TIMEOUT_S)
    _run([str(SCRIPT), "kwok-up"], plane.env, 120)
    _run([str(SCRIPT), "controller-manager-up"], plane.env, 120)


def stop_kwok(plane: ControlPlane) -> None:
    _run([str(SCRIPT), "controller-manager-down"], plane.env, 60)
    _run([str(SCRIPT), "kwok-down"], plane.env, 60)

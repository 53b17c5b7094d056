"""docs/configuration.md stays true: its configs load, its error output is what the loader says."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from batchsched.cli import main
from batchsched.config import ConfigError, load_config

DOC = Path(__file__).parents[2] / "docs" / "configuration.md"
INVALID_MARK = "<!-- invalid -->"
_FENCE = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)


def _blocks() -> list[tuple[str, str, int]]:
    """(language, body, offset) of every fenced block in the document, in order."""
    text = DOC.read_text(encoding="utf-8")
    return [(m.group(1), m.group(2), m.start()) for m in _FENCE.finditer(text)]


def _configs() -> list[tuple[str, bool, str]]:
    """(yaml, marked invalid, the text block that follows) for every complete config."""
    text = DOC.read_text(encoding="utf-8")
    blocks = _blocks()
    found = []
    for i, (lang, body, start) in enumerate(blocks):
        if lang != "yaml" or "kind: KubeSchedulerConfiguration" not in body:
            continue
        invalid = text[:start].rstrip().endswith(INVALID_MARK)
        following = next((b for lang2, b, _ in blocks[i + 1 :] if lang2 == "text"), "")
        found.append((body, invalid, following))
    return found


CONFIGS = _configs()
VALID = [body for body, invalid, _ in CONFIGS if not invalid]
INVALID = [(body, output) for body, invalid, output in CONFIGS if invalid]


def test_the_document_has_examples_of_both_kinds() -> None:
    assert len(VALID) >= 2 and len(INVALID) == 1


@pytest.mark.parametrize(
    "body", VALID, ids=[f"config example {i} loads and builds" for i in range(len(VALID))]
)
def test_every_config_example_loads(body: str) -> None:
    config = load_config(body)
    assert config.build_profiles()


def test_the_error_example_prints_what_the_loader_reports() -> None:
    body, output = INVALID[0]
    with pytest.raises(ConfigError) as caught:
        load_config(body)
    reported = str(caught.value).splitlines()
    shown = [
        line.removeprefix("batchsched place: ").removeprefix("bad-config.yaml: ")
        for line in output.splitlines()
        if line and not line.startswith("$")
    ]
    assert shown == reported


GPU_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: debug-1gpu, namespace: ml}
spec:
  schedulerName: gpu-scheduler
  containers:
  - name: main
    image: nvcr.io/nvidia/pytorch:24.05-py3
    resources:
      requests: {cpu: '4', memory: 32Gi, nvidia.com/gpu: 1}
      limits: {nvidia.com/gpu: 1}
  tolerations:
  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
"""


def _gpu_example() -> str:
    return next(body for body in VALID if "MostAllocated" in body)


def test_the_worked_example_resolves_to_the_documented_scores() -> None:
    profile = load_config(_gpu_example()).profile("gpu-scheduler").describe()
    assert profile["score"] == [
        "NodeResourcesFit:10",
        "TaintToleration:3",
        "NodeAffinity:2",
        "PodTopologySpread:2",
        "InterPodAffinity:2",
        "ImageLocality:1",
        "DynamicResources:100",
    ]
    assert "NodeResourcesBalancedAllocation" not in profile["preScore"]


def test_the_worked_example_runs_on_the_bundled_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "gpu-binpack.yaml"
    config.write_text(_gpu_example(), encoding="utf-8")
    assert main(["place", "--config", str(config)]) == 0
    assert "3/6 pending pods placed" in capsys.readouterr().out


KUBE_ONLY = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: gpu-scheduler
  plugins:
    multiPoint:
      disabled:
      - name: GpuTopology
"""


@pytest.mark.parametrize(
    ("config_text", "node"),
    [(KUBE_ONLY, "a100-1"), ("worked example", "h100-0"), (None, "h100-0")],
    ids=[
        "kube's plugins alone spread a 1-GPU pod onto the empty GPU node",
        "the worked example packs a 1-GPU pod next to running GPU work",
        "the defaults (GpuTopology) pack it next to running GPU work too",
    ],
)
def test_the_worked_example_packs_gpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config_text: str | None, node: str
) -> None:
    cluster = Path(__file__).parents[2] / "batchsched" / "examples" / "cluster.yaml"
    pods = tmp_path / "one-gpu.yaml"
    pods.write_text(GPU_POD, encoding="utf-8")
    argv = ["place", "--cluster", str(cluster), "--pods", str(pods), "--output", "json"]
    if config_text is not None:
        config = tmp_path / "config.yaml"
        text = _gpu_example() if config_text == "worked example" else config_text
        config.write_text(text, encoding="utf-8")
        argv += ["--config", str(config)]
    assert main(argv) == 0
    assert f'"ml/debug-1gpu": "{node}"' in capsys.readouterr().out

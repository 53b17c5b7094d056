"""The Alibaba GPU 2023 ("openb") trace CSVs, read into node and pod views.

Nodes: `sn, cpu_milli, memory_mib, gpu, model` become Nodes with allocatable cpu, memory,
`nvidia.com/gpu` and pods, labelled `nvidia.com/gpu.product: <model>` as NVIDIA's GPU feature
discovery would; optional columns `clique, rack, block, zone` become the topology level labels
(`nvidia.com/gpu.clique`, `topology.batchsched.io/rack`, ..., batchsched.gang.topology), an
empty cell none. Pods: a whole-GPU request (`gpu_milli == 1000`) becomes `nvidia.com/gpu: N`;
a share of one GPU (`gpu_milli < 1000`) becomes the `batchsched.io/gpu-milli` annotation with no
`nvidia.com/gpu` request; `gpu_spec` ("V100M16|V100M32") becomes `batchsched.io/gpu-models`.
Bad rows raise `TraceError` naming the file, the line and the column.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Final

from batchsched.gang.topology import BLOCK_LABEL, CLIQUE_LABEL, RACK_LABEL, ZONE_LABEL
from batchsched.model.node import NodeView
from batchsched.model.pod import PodView, parse_pod
from batchsched.model.resources import NVIDIA_GPU, Resources
from gpu.discovery import PRODUCT_LABEL
from gpu.requests import GPU_MILLI_ANNOTATION, GPU_MODELS_ANNOTATION
from gpu.topology import MILLI_PER_GPU

__all__ = [
    "GPU_MILLI_ANNOTATION",
    "GPU_MODELS_ANNOTATION",
    "GPU_PRODUCT_LABEL",
    "MILLI_PER_GPU",
    "PodFactory",
    "TraceError",
    "TracePod",
    "embedded_default_pods",
    "embedded_gpu_nodes",
    "embedded_trace_dir",
    "pod_manifest",
    "read_nodes",
    "read_pods",
    "trace_node",
]

GPU_PRODUCT_LABEL: Final = PRODUCT_LABEL
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
PODS_PER_NODE: Final = 110  # the kubelet's default max-pods; the trace does not say
TRACE_NAMESPACE: Final = "openb"
DEFAULT_SCHEDULER_NAME: Final = "gpu-scheduler"

_NODE_COLUMNS: Final = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
# Optional node columns: the node's network-topology domains, as the levels' labels.
_TOPOLOGY_COLUMNS: Final = (
    ("clique", CLIQUE_LABEL),
    ("rack", RACK_LABEL),
    ("block", BLOCK_LABEL),
    ("zone", ZONE_LABEL),
)
# The multigpu* variants carry only the first five pod columns.
_POD_COLUMNS: Final = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


class TraceError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class TracePod:
    """One row of a pod CSV; times in seconds from the trace start (None when absent)."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU; 1000 is a whole GPU
    gpu_spec: str = ""
    qos: str = ""
    phase: str = ""
    creation_time: float | None = None
    deletion_time: float | None = None

    @property
    def gpu_request_milli(self) -> int:
        """All the GPU this pod asks for, in milli-GPU (2 whole GPUs = 2000)."""
        return self.num_gpu * self.gpu_milli

    @property
    def is_share(self) -> bool:
        return self.num_gpu == 1 and 0 < self.gpu_milli < MILLI_PER_GPU

    @property
    def runtime(self) -> float | None:
        if self.creation_time is None or self.deletion_time is None:
            return None
        return max(self.deletion_time - self.creation_time, 0.0)


def embedded_trace_dir() -> Path:
    """Where the package keeps the default trace (node lists, default pod list, LICENSE)."""
    return Path(str(resources.files("batchsched") / "sim" / "traces" / "alibaba-gpu-2023"))


def embedded_gpu_nodes() -> Path:
    return embedded_trace_dir() / "openb_node_list_gpu_node.csv"


def embedded_default_pods() -> Path:
    return embedded_trace_dir() / "openb_pod_list_default.csv"


def _rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, Mapping[str, str]]]:
    try:
        handle = path.open(newline="")
    except OSError as err:
        raise TraceError(f"{path}: cannot read: {err.strerror or err}") from err
    with handle:
        reader = csv.DictReader(handle)
        missing = [c for c in required if c not in (reader.fieldnames or ())]
        if missing:
            raise TraceError(f"{path}: missing column(s) {', '.join(missing)}")
        yield from enumerate(reader, start=2)


def _int(row: Mapping[str, str], column: str, where: str) -> int:
    raw = (row.get(column) or "").strip()
    try:
        value = int(raw)
    except ValueError:
        raise TraceError(f"{where}: column {column}: expected an integer, got {raw!r}") from None
    if value < 0:
        raise TraceError(f"{where}: column {column}: must not be negative, got {value}")
    return value


def _time(row: Mapping[str, str], column: str, where: str) -> float | None:
    raw = (row.get(column) or "").strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise TraceError(f"{where}: column {column}: expected seconds, got {raw!r}") from None


def read_nodes(path: Path) -> list[NodeView]:
    """Every row of a node CSV as a schedulable node, in file order."""
    nodes = []
    for line, row in _rows(path, _NODE_COLUMNS):
        where = f"{path}:{line}"
        name = (row.get("sn") or "").strip()
        if not name:
            raise TraceError(f"{where}: column sn: node name is empty")
        node = trace_node(
            name,
            _int(row, "cpu_milli", where),
            _int(row, "memory_mib", where),
            _int(row, "gpu", where),
            (row.get("model") or "").strip(),
        )
        nodes.append(_with_topology(node, row))
    return nodes


def _with_topology(node: NodeView, row: Mapping[str, str]) -> NodeView:
    labels = {
        label: value
        for column, label in _TOPOLOGY_COLUMNS
        if (value := (row.get(column) or "").strip())
    }
    return dataclasses.replace(node, labels={**node.labels, **labels}) if labels else node


def trace_node(name: str, cpu_milli: int, memory_mib: int, gpus: int, model: str) -> NodeView:
    labels = {HOSTNAME_LABEL: name}
    if gpus and model:
        labels[GPU_PRODUCT_LABEL] = model
    scalar = {NVIDIA_GPU: gpus} if gpus else {}
    allocatable = Resources(
        milli_cpu=cpu_milli, memory=memory_mib * 1024 * 1024, pods=PODS_PER_NODE, scalar=scalar
    )
    return NodeView(
        name=name,
        labels=labels,
        annotations={},
        unschedulable=False,
        taints=(),
        allocatable=allocatable,
        image_sizes={},
    )


def read_pods(path: Path) -> list[TracePod]:
    """Every row of a pod CSV, in file order."""
    pods = []
    for line, row in _rows(path, _POD_COLUMNS):
        where = f"{path}:{line}"
        pod = TracePod(
            name=(row.get("name") or "").strip() or f"row-{line}",
            cpu_milli=_int(row, "cpu_milli", where),
            memory_mib=_int(row, "memory_mib", where),
            num_gpu=_int(row, "num_gpu", where),
            gpu_milli=_int(row, "gpu_milli", where),
            gpu_spec=(row.get("gpu_spec") or "").strip(),
            qos=(row.get("qos") or "").strip(),
            phase=(row.get("pod_phase") or "").strip(),
            creation_time=_time(row, "creation_time", where),
            deletion_time=_time(row, "deletion_time", where),
        )
        _check_gpu_request(pod, where)
        pods.append(pod)
    return pods


def _check_gpu_request(pod: TracePod, where: str) -> None:
    if pod.num_gpu == 0 and pod.gpu_milli:
        raise TraceError(f"{where}: gpu_milli {pod.gpu_milli} without num_gpu")
    if pod.num_gpu and not 0 < pod.gpu_milli <= MILLI_PER_GPU:
        raise TraceError(f"{where}: gpu_milli must be 1..1000 per GPU, got {pod.gpu_milli}")
    if pod.num_gpu > 1 and pod.gpu_milli != MILLI_PER_GPU:
        raise TraceError(f"{where}: a share of a GPU ({pod.gpu_milli}) needs num_gpu 1")


def pod_manifest(pod: TracePod, scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> dict[str, object]:
    """The Pod a trace row stands for, as `kubectl get -o yaml` would print it."""
    requests: dict[str, object] = {
        "cpu": f"{pod.cpu_milli}m",
        "memory": f"{pod.memory_mib}Mi",
    }
    annotations: dict[str, str] = {}
    if pod.is_share:
        annotations[GPU_MILLI_ANNOTATION] = str(pod.gpu_milli)
    elif pod.num_gpu:
        requests[NVIDIA_GPU] = str(pod.num_gpu)
    if pod.gpu_spec:
        annotations[GPU_MODELS_ANNOTATION] = pod.gpu_spec
    metadata: dict[str, object] = {
        "name": pod.name,
        "namespace": TRACE_NAMESPACE,
        "uid": pod.name,
    }
    if annotations:
        metadata["annotations"] = annotations
    container = {"name": "main", "resources": {"requests": requests}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {"schedulerName": scheduler_name, "containers": [container]},
    }


class PodFactory:
    """Pod views for trace rows; each row is parsed once, copies share the parsed parts."""

    def __init__(self, scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> None:
        self.scheduler_name = scheduler_name
        self._parsed: dict[TracePod, PodView] = {}

    def view(self, pod: TracePod, name: str | None = None, arrival: float = 0.0) -> PodView:
        """The pod as the scheduler sees it; `name` (also its uid) tells sampled copies apart."""
        template = self._parsed.get(pod)
        if template is None:
            template = parse_pod(pod_manifest(pod, self.scheduler_name))
            self._parsed[pod] = template
        name = name or pod.name
        return dataclasses.replace(template, name=name, uid=name, creation_time=arrival)

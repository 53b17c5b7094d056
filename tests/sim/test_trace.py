"""Reading the Alibaba GPU 2023 CSVs: nodes and pods as the scheduler sees them, bad rows named."""

from __future__ import annotations

from pathlib import Path

import pytest

from batchsched.model.resources import NVIDIA_GPU
from batchsched.sim.trace import (
    GPU_MILLI_ANNOTATION,
    GPU_MODELS_ANNOTATION,
    GPU_PRODUCT_LABEL,
    PodFactory,
    TraceError,
    TracePod,
    embedded_default_pods,
    embedded_gpu_nodes,
    embedded_trace_dir,
    read_nodes,
    read_pods,
)

POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time\n"
)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_node_row_becomes_a_node_with_its_gpus_and_model_label(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "nodes.csv",
        "sn,cpu_milli,memory_mib,gpu,model\nn-0,96000,786432,8,V100M32\nn-1,32000,262144,0,\n",
    )
    gpu_node, cpu_node = read_nodes(path)
    assert gpu_node.name == "n-0"
    assert gpu_node.allocatable.milli_cpu == 96000
    assert gpu_node.allocatable.memory == 786432 * 1024 * 1024
    assert gpu_node.allocatable.scalar == {NVIDIA_GPU: 8}
    assert gpu_node.allocatable.pods == 110
    assert gpu_node.labels[GPU_PRODUCT_LABEL] == "V100M32"
    assert cpu_node.allocatable.scalar == {}
    assert GPU_PRODUCT_LABEL not in cpu_node.labels


@pytest.mark.parametrize(
    ("row", "gpus", "annotations"),
    [
        ("p,4000,8192,0,0,,BE,Running,0,10,0", 0, {}),
        ("p,12000,16384,1,1000,,LS,Running,0,10,0", 1, {}),
        ("p,6000,12288,1,460,,LS,Running,0,10,0", 0, {GPU_MILLI_ANNOTATION: "460"}),
        ("p,64000,262144,8,1000,,LS,Running,0,10,0", 8, {}),
        (
            "p,6000,12288,1,500,V100M16|V100M32,LS,Running,0,10,0",
            0,
            {GPU_MILLI_ANNOTATION: "500", GPU_MODELS_ANNOTATION: "V100M16|V100M32"},
        ),
        ("p,8000,16384,2,1000,T4,LS,Running,0,10,0", 2, {GPU_MODELS_ANNOTATION: "T4"}),
    ],
    ids=[
        "a CPU-only pod asks for no GPU at all",
        "gpu_milli 1000 is one whole GPU as nvidia.com/gpu",
        "a share of one GPU is the milli annotation and no nvidia.com/gpu",
        "eight whole GPUs are nvidia.com/gpu 8",
        "a share with a model list carries both annotations",
        "whole GPUs of one model carry the model annotation",
    ],
)
def test_pod_rows_map_to_the_shared_gpu_request_conventions(
    tmp_path: Path, row: str, gpus: int, annotations: dict[str, str]
) -> None:
    (trace,) = read_pods(write(tmp_path, "pods.csv", POD_HEADER + row + "\n"))
    view = PodFactory().view(trace)
    assert view.requests.scalar.get(NVIDIA_GPU, 0) == gpus
    assert dict(view.annotations) == annotations
    assert view.requests.milli_cpu == trace.cpu_milli
    assert view.requests.memory == trace.memory_mib * 1024 * 1024
    assert view.scheduler_name == "gpu-scheduler"


def test_a_pod_row_keeps_its_times_and_runtime(tmp_path: Path) -> None:
    (pod,) = read_pods(write(tmp_path, "p.csv", POD_HEADER + "p,1,1,1,250,,BE,Failed,100,160,\n"))
    assert pod == TracePod("p", 1, 1, 1, 250, "", "BE", "Failed", 100.0, 160.0)
    assert pod.runtime == 60.0
    assert pod.gpu_request_milli == 250 and pod.is_share


def test_the_five_column_multigpu_files_read_without_times(tmp_path: Path) -> None:
    text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,8000,1024,4,1000\n"
    (pod,) = read_pods(write(tmp_path, "m.csv", text))
    assert pod.gpu_request_milli == 4000
    assert pod.creation_time is None and pod.runtime is None


def test_copies_of_one_row_are_distinct_pods_sharing_the_parsed_request(tmp_path: Path) -> None:
    (row,) = read_pods(write(tmp_path, "p.csv", POD_HEADER + "p,1000,1024,1,1000,,LS,R,0,1,0\n"))
    factory = PodFactory()
    first, second = factory.view(row, "p-tuned-0", 5.0), factory.view(row, "p-tuned-1", 6.0)
    assert (first.uid, second.uid) == ("p-tuned-0", "p-tuned-1")
    assert first.requests is second.requests
    assert second.creation_time == 6.0


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("p,abc,1,0,0,,,,0,1,0", "p.csv:2: column cpu_milli: expected an integer, got 'abc'"),
        ("p,1,-5,0,0,,,,0,1,0", "p.csv:2: column memory_mib: must not be negative, got -5"),
        ("p,1,1,1,1500,,,,0,1,0", "p.csv:2: gpu_milli must be 1..1000 per GPU, got 1500"),
        ("p,1,1,2,500,,,,0,1,0", "p.csv:2: a share of a GPU (500) needs num_gpu 1"),
        ("p,1,1,0,300,,,,0,1,0", "p.csv:2: gpu_milli 300 without num_gpu"),
        ("p,1,1,1,1000,,,,soon,1,0", "p.csv:2: column creation_time: expected seconds, got 'soon'"),
    ],
    ids=[
        "a non-numeric cpu is named with its line and column",
        "a negative memory is refused",
        "more than a whole GPU per GPU is refused",
        "a share spread over several GPUs is refused",
        "a share without a GPU count is refused",
        "a non-numeric time is named",
    ],
)
def test_bad_pod_rows_name_the_file_line_and_column(tmp_path: Path, row: str, message: str) -> None:
    with pytest.raises(TraceError) as err:
        read_pods(write(tmp_path, "p.csv", POD_HEADER + row + "\n"))
    assert str(err.value).endswith(message)


def test_a_csv_without_the_needed_columns_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="missing column"):
        read_nodes(write(tmp_path, "n.csv", "sn,cpu_milli\nn,1\n"))


def test_the_embedded_trace_is_the_papers_gpu_cluster_with_its_licence() -> None:
    nodes = read_nodes(embedded_gpu_nodes())
    assert len(nodes) == 1213
    assert sum(n.allocatable.scalar[NVIDIA_GPU] for n in nodes) == 6212
    assert len(read_pods(embedded_default_pods())) == 8152
    assert "Apache License" in (embedded_trace_dir() / "LICENSE").read_text()
    assert "Copied into batchsched" in (embedded_trace_dir() / "README.md").read_text()

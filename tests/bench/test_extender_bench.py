"""bench extender's workload and figures, without a cluster."""

from __future__ import annotations

from pathlib import Path

from batchsched.bench.e2e_cluster import ControlPlane
from batchsched.bench.extender import outcome, workload
from batchsched.bench.extender_procs import scheduler_config


def test_the_workload_is_the_same_for_a_seed_and_draws_only_known_sizes() -> None:
    assert workload(50, 7) == workload(50, 7)
    assert workload(50, 7) != workload(50, 8)
    assert set(workload(500, 1)) == {1, 2, 4, 8}


def test_outcome_counts_allocation_and_the_fragments_of_partly_used_nodes() -> None:
    sizes = [8, 2, 4, 1, 8]
    placed = {"a": "n1", "b": "n2", "c": "n2", "d": "n3", "e": ""}
    result = outcome("x", sizes, placed, nodes=4, seconds=1.0)
    assert (result.placed, result.gpus_placed, result.capacity) == (4, 15, 32)
    assert (result.eight_gpu_asked, result.eight_gpu_placed) == (2, 1)
    assert result.partly_used_nodes == 2  # n2 holds 6, n3 holds 1
    assert result.fragment_gpus == 2 + 7
    assert abs(result.allocation - 15 / 32) < 1e-9


def test_only_the_extended_scheduler_config_names_the_extender() -> None:
    plane = ControlPlane(kubeconfig=Path("/k"), state_dir=None, owned=False)
    assert "extenders:" not in scheduler_config(plane, None)
    text = scheduler_config(plane, "http://127.0.0.1:1")
    assert "urlPrefix: http://127.0.0.1:1" in text
    assert "nodeCacheCapable: true" in text

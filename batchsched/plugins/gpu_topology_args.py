"""GpuTopology's arguments: the typical pods fragmentation is measured against, how the
target is learned from the arriving pods, and how scarce places are priced (configuration.md,
"GpuTopology")."""

from __future__ import annotations

from pydantic import Field, field_validator

from batchsched.framework.registry import PluginArgs
from batchsched.model.quantity import resource_amount
from batchsched.model.resources import CPU, MEMORY
from gpu.workload import (
    DEFAULT_COVERAGE,
    DEFAULT_WORKLOAD,
    OPENB_DEFAULT_MIX,
    PodShape,
    Workload,
    typical_workload,
)
from gpu.workload_estimate import EstimateSettings, WorkloadEstimate

__all__ = ["GpuTopologyArgs", "TypicalPod"]


class TypicalPod(PluginArgs):
    """One pod shape of the workload fragmentation is measured against, with its weight."""

    cpu: str | int = 0
    memory: str | int = 0
    gpus: int = Field(default=0, ge=0)
    gpu_milli: int = Field(default=0, ge=0, lt=1000)
    models: tuple[str, ...] = ()
    weight: float = Field(default=1.0, gt=0)

    def shape(self) -> PodShape:
        if self.gpus and self.gpu_milli:
            raise ValueError("gpus and gpuMilli are exclusive: whole GPUs or a share of one")
        return PodShape(
            resource_amount(CPU, self.cpu, "cpu"),
            resource_amount(MEMORY, self.memory, "memory"),
            self.gpus,
            self.gpu_milli,
            frozenset(self.models) or None,
        )


class GpuTopologyArgs(PluginArgs):
    """Defaults: the openb trace's typical pods, stranded GPUs weighted 1, a 1000 milli-GPU
    penalty for pods without GPUs on GPU nodes."""

    # Empty: gpu.workload.DEFAULT_WORKLOAD (the Alibaba openb default trace, 95 % of pods).
    typical_pods: tuple[TypicalPod, ...] = ()
    # Weight of the growth of GPUs stranded for lack of cpu/memory next to the FGD delta;
    # 0 scores by FGD alone, as the paper does.
    stranded_weight: float = Field(default=1.0, ge=0, le=100)
    # What placing a pod without GPUs on a GPU node costs, in milli-GPU of fragmentation;
    # 0 lets such pods go wherever fragmentation grows least.
    cpu_pod_gpu_node_penalty: int = Field(default=1000, ge=0, le=1_000_000)
    # The fragmentation target learned from the arriving pods: each pod's weight halves after
    # this many more pods; 0 keeps the typical pods above as a fixed target.
    workload_half_life: int = Field(default=20_000, ge=0, le=10_000_000)
    # What the typical pods above are worth, in pods, as the estimate's starting point.
    workload_prior_pods: int = Field(default=500, ge=0, le=10_000_000)
    # Re-estimate the learned target after this many more pods.
    workload_refresh_pods: int = Field(default=50, ge=1, le=10_000_000)
    # Weigh each model-restricted pod shape by the cluster's GPUs over those of its models.
    per_supply: bool = True
    # With perSupply, count only the GPUs of nodes whose allocatable cpu, memory and GPU count
    # could host the shape at all (a 120-core pod where few nodes have 120 cores), keep the
    # typical pods of the weighted shares (a rare shape that few nodes can host stays in), and
    # feed the stranded measure the arriving pods' own cpu and memory per GPU.
    per_supply_capacity: bool = True
    # With the learned target and perSupply by capacity: a pod shape that only nodes holding
    # at most this share of the cluster's GPUs could host for their size (a 120-core pod)
    # prices each place such nodes still offer by the chance that the demand still to come
    # needs it (gpu/scarcity.py); 0 turns the prices off.
    scarce_host_share: float = Field(default=0.1, ge=0, le=1)
    # The same prices for the whole-GPU pod shapes no node could host two of (8-GPU pods where
    # nodes have 8 GPUs): their places are the nodes whose GPUs are all free.
    scarce_whole_nodes: bool = True

    @field_validator("typical_pods")
    @classmethod
    def _valid_shapes(cls, pods: tuple[TypicalPod, ...]) -> tuple[TypicalPod, ...]:
        for pod in pods:
            pod.shape()  # raises ValueError, reported with the field's path
        return pods

    def workload(self) -> Workload:
        if not self.typical_pods:
            return DEFAULT_WORKLOAD
        return typical_workload(((p.shape(), p.weight) for p in self.typical_pods), coverage=1.0)

    def estimate(self) -> WorkloadEstimate | None:
        if not self.workload_half_life:
            return None
        # By host capacity, the typical pods are cut after weighting: every shape is kept,
        # the prior's too (by default the whole openb mix, not its 95 %: its rare 120-core
        # pods, which only a few nodes can host, count from the first pod on).
        by_capacity = self.per_supply and self.per_supply_capacity
        settings = EstimateSettings(
            half_life=self.workload_half_life,
            prior_pods=self.workload_prior_pods,
            refresh_pods=self.workload_refresh_pods,
            coverage=1.0 if by_capacity else DEFAULT_COVERAGE,
        )
        prior = OPENB_DEFAULT_MIX if by_capacity and not self.typical_pods else self.workload()
        return WorkloadEstimate(prior, settings)

"""Trace variants: a pod list resampled to a target mix, and a cluster reshaped, as pure functions.

The published variants of the Alibaba GPU 2023 trace (cluster-trace-gpu-v2023) were all made
from `openb_pod_list_default.csv`; no script was published, so the rules below are what the
files show (measured against them in tests/sim/test_variants.py):

- `cpuXXX`: CPU-only pods are XXX/1000 of all pods (cpu037 is 3.7 %, cpu300 30 %); the GPU
  pods are kept as they are and only the CPU-only pods are drawn.
- `gpushareXX`: pods sharing a GPU ask for XX % of all the GPU requested; the number of GPU pods
  stays the same, sharing and whole-GPU pods are drawn in the counts that give that share.
- `multigpuXX`: pods asking for 2 or more GPUs ask for XX % of all the GPU requested; the other
  pods are kept and multi-GPU pods are added (or removed).
- `gpuspecXX`: XX % of the GPU pods carry a GPU-model constraint (`gpu_spec`), drawn from the
  constraints the production cluster showed (`SPEC_WEIGHTS`, counted in gpuspec33); the pods
  are otherwise unchanged.

A variant name joins such parts with '+', and two cluster parts may follow: `cpuxF` (every GPU
node has F times its CPU) and `gpnN` (nodes with more than N GPUs are split into nodes of at
most N, CPU and memory split with the GPUs). `parse_variant("cpu200+gpushare60+gpn4")`.

Drawing follows one rule for every class of pod: to fewer pods, a sample without replacement;
to more, every pod once plus copies drawn with replacement. Everything takes a seed and is
deterministic for it (Python's `random.Random`, no global state).
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from batchsched.model.node import NodeView
from batchsched.model.resources import NVIDIA_GPU
from batchsched.sim.trace import GPU_PRODUCT_LABEL, TracePod

__all__ = [
    "SPEC_WEIGHTS",
    "ClusterShape",
    "Mix",
    "Variant",
    "VariantError",
    "fits_some_node",
    "measure_mix",
    "parse_variant",
    "resample",
    "reshape_cluster",
]

# GPU-model constraints and how many GPU pods carry each, as counted in the published
# openb_pod_list_gpuspec33.csv (the production cluster's mix, per the trace's README).
SPEC_WEIGHTS: Final[tuple[tuple[str, int], ...]] = (
    ("T4", 1291),
    ("G2", 331),
    ("P100", 279),
    ("V100M16|V100M32", 141),
    ("P100|V100M16|V100M32", 103),
    ("G3", 86),
    ("G2|P100|T4|V100M16|V100M32", 39),
    ("P100|T4|V100M16|V100M32", 33),
    ("A10|G2|T4|V100M16|V100M32", 24),
    ("V100M16|V100M32|V100M32", 22),
    ("V100M32", 20),
    ("A10|T4", 6),
    ("P100|V100M16", 4),
    ("A10|G2|P100|T4|V100M16|V100M32|V100M32", 3),
    ("T4|V100M16|V100M32", 3),
    ("V100M16", 3),
)


class VariantError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Mix:
    """Target shares in [0, 1]; None keeps what the base trace has."""

    cpu_only: float | None = None  # CPU-only pods / all pods
    gpu_share: float | None = None  # GPU asked by GPU-sharing pods / all GPU asked
    multi_gpu: float | None = None  # GPU asked by pods of 2+ GPUs / all GPU asked
    gpu_spec: float | None = None  # GPU pods with a GPU-model constraint / GPU pods


@dataclass(frozen=True, slots=True)
class ClusterShape:
    cpu_per_gpu: float = 1.0  # factor on every GPU node's CPU
    max_gpus_per_node: int | None = None  # larger nodes are split


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    mix: Mix
    cluster: ClusterShape


_CLASS_NAMES: Final = ("sharing", "whole-GPU", "multi-GPU")
_PART = re.compile(r"^(cpu|gpushare|gpuspec|multigpu|cpux|gpn)(\d+(?:\.\d+)?)$")


def parse_variant(name: str) -> Variant:
    """`default`, a published name (`gpushare40`) or parts joined by '+'; a clear error else."""
    mix = Mix()
    shape = ClusterShape()
    for part in name.split("+") if name != "default" else ():
        match = _PART.match(part)
        if match is None:
            raise VariantError(
                f"variant {name!r}: part {part!r} is not one of cpuXXX (per mille of pods), "
                "gpushareXX, gpuspecXX, multigpuXX (per cent), cpuxF or gpnN"
            )
        kind, number = match.group(1), match.group(2)
        value = float(number)
        if kind == "cpu":
            mix = dataclasses.replace(mix, cpu_only=value / 1000)
        elif kind in ("gpushare", "gpuspec", "multigpu"):
            field = {"gpushare": "gpu_share", "gpuspec": "gpu_spec", "multigpu": "multi_gpu"}
            mix = dataclasses.replace(mix, **{field[kind]: value / 100})
        elif kind == "cpux":
            shape = dataclasses.replace(shape, cpu_per_gpu=value)
        else:
            shape = dataclasses.replace(shape, max_gpus_per_node=int(value))
    _check(name, mix, shape)
    return Variant(name, mix, shape)


def _check(name: str, mix: Mix, shape: ClusterShape) -> None:
    shares = {"cpu": mix.cpu_only, "gpushare": mix.gpu_share, "multigpu": mix.multi_gpu}
    for part, value in shares.items():
        if value is not None and not 0 <= value < 1 and not (part == "gpushare" and value == 1):
            raise VariantError(f"variant {name!r}: {part} must be a share below 100 %")
    if mix.gpu_spec is not None and not 0 <= mix.gpu_spec <= 1:
        raise VariantError(f"variant {name!r}: gpuspec must be at most 100 %")
    if (mix.gpu_share or 0) + (mix.multi_gpu or 0) > 1:
        raise VariantError(f"variant {name!r}: gpushare and multigpu add up to over 100 %")
    if shape.cpu_per_gpu <= 0:
        raise VariantError(f"variant {name!r}: cpux must be positive")
    if shape.max_gpus_per_node is not None and shape.max_gpus_per_node < 1:
        raise VariantError(f"variant {name!r}: gpn must be at least 1")


def _is_multi(pod: TracePod) -> bool:
    return pod.num_gpu > 1


def _is_whole(pod: TracePod) -> bool:
    return pod.num_gpu == 1 and not pod.is_share


def measure_mix(pods: Sequence[TracePod]) -> Mix:
    """The shares a pod list has, in the terms of `Mix`."""
    gpu_pods = [p for p in pods if p.num_gpu]
    gpu = sum(p.gpu_request_milli for p in gpu_pods)
    return Mix(
        cpu_only=(len(pods) - len(gpu_pods)) / len(pods) if pods else 0.0,
        gpu_share=sum(p.gpu_request_milli for p in gpu_pods if p.is_share) / gpu if gpu else 0.0,
        multi_gpu=sum(p.gpu_request_milli for p in gpu_pods if _is_multi(p)) / gpu if gpu else 0.0,
        gpu_spec=sum(1 for p in gpu_pods if p.gpu_spec) / len(gpu_pods) if gpu_pods else 0.0,
    )


def resample(pods: Sequence[TracePod], mix: Mix, seed: int) -> list[TracePod]:
    """The pods drawn to `mix`, renamed `openb-pod-NNNNN` in order: CPU-only, then GPU pods."""
    rng = random.Random(seed)
    ordered = sorted(pods, key=lambda p: p.name)  # the file's order does not change the draw
    cpu_only = [p for p in ordered if not p.num_gpu]
    classes = [
        [p for p in ordered if p.is_share],
        [p for p in ordered if _is_whole(p)],
        [p for p in ordered if _is_multi(p)],
    ]
    if mix.gpu_share is not None:
        counts = _gpu_counts(classes, mix.gpu_share, mix.multi_gpu)
        gpu_pods = [p for cls, n in zip(classes, counts, strict=True) for p in _draw(cls, n, rng)]
    elif mix.multi_gpu is not None:
        gpu_pods = classes[0] + classes[1] + _multi_to(classes, mix.multi_gpu, rng)
    else:
        gpu_pods = [p for cls in classes for p in cls]
    if mix.cpu_only is not None:
        wanted = round(mix.cpu_only * len(gpu_pods) / (1 - mix.cpu_only))
        if wanted and not cpu_only:
            raise VariantError("the trace has no CPU-only pod to draw from")
        cpu_only = _draw(cpu_only, wanted, rng)
    if mix.gpu_spec is not None:
        gpu_pods = _with_specs(gpu_pods, mix.gpu_spec, rng)
    drawn = cpu_only + gpu_pods
    width = max(4, len(str(len(drawn))))
    return [dataclasses.replace(p, name=f"openb-pod-{i:0{width}d}") for i, p in enumerate(drawn)]


def _gpu_counts(
    classes: Sequence[Sequence[TracePod]], share: float, multi: float | None
) -> list[int]:
    """How many sharing, whole-GPU and multi-GPU pods give these GPU shares, as many GPU pods
    as before (as gpushareXX was made)."""
    counts = [len(c) for c in classes]
    means = [sum(p.gpu_request_milli for p in c) / len(c) if c else 0.0 for c in classes]
    if multi is None:
        # Whole-GPU and multi-GPU pods keep the ratio they had.
        non_share = counts[1] * means[1] + counts[2] * means[2]
        multi = counts[2] * means[2] / non_share * (1 - share) if non_share else 0.0
    gpu_shares = [share, 1 - share - multi, multi]
    for cls, target, what in zip(classes, gpu_shares, _CLASS_NAMES, strict=True):
        _need(cls, target, what)
    # Pods per class in proportion to its GPU share / its mean GPU per pod.
    weights = [t / m if t else 0.0 for t, m in zip(gpu_shares, means, strict=True)]
    return _apportion(sum(counts), weights)


def _multi_to(
    classes: Sequence[Sequence[TracePod]], share: float, rng: random.Random
) -> list[TracePod]:
    """As multigpuXX was made: the other pods stay; multi-GPU pods are added one at a time
    until they ask for `share` of the GPU (or removed until they ask for no more)."""
    multi = list(classes[2])
    _need(multi, share, "multi-GPU")
    rest = sum(p.gpu_request_milli for cls in classes[:2] for p in cls)
    asked = sum(p.gpu_request_milli for p in multi)
    if asked > share * (rest + asked):
        rng.shuffle(multi)
        while multi and asked > share * (rest + asked):
            asked -= multi.pop().gpu_request_milli
        return multi
    pool = list(classes[2])
    while asked < share * (rest + asked):
        pod = pool[rng.randrange(len(pool))]
        multi.append(pod)
        asked += pod.gpu_request_milli
    return multi


def _need(cls: Sequence[TracePod], target: float, what: str) -> None:
    if target > 0 and not cls:
        raise VariantError(f"the trace has no {what} pod to draw from")


def _apportion(total: int, weights: Sequence[float]) -> list[int]:
    """`total` split in proportion to `weights`, by largest remainder."""
    scale = total / sum(weights)
    exact = [w * scale for w in weights]
    counts = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(exact)), key=lambda i: counts[i] - exact[i])
    for i in by_remainder[: total - sum(counts)]:
        counts[i] += 1
    return counts


def _draw(pods: Sequence[TracePod], n: int, rng: random.Random) -> list[TracePod]:
    if n <= len(pods):
        return rng.sample(list(pods), n)
    return list(pods) + [pods[rng.randrange(len(pods))] for _ in range(n - len(pods))]


def _with_specs(gpu_pods: list[TracePod], share: float, rng: random.Random) -> list[TracePod]:
    """Constraints added to unconstrained pods (or taken off) until `share` carry one."""
    wanted = round(share * len(gpu_pods))
    have = [i for i, p in enumerate(gpu_pods) if p.gpu_spec]
    free = [i for i, p in enumerate(gpu_pods) if not p.gpu_spec]
    out = list(gpu_pods)
    if wanted < len(have):
        for i in rng.sample(have, len(have) - wanted):
            out[i] = dataclasses.replace(out[i], gpu_spec="")
        return out
    specs = [s for s, _ in SPEC_WEIGHTS]
    weights = [w for _, w in SPEC_WEIGHTS]
    for i in rng.sample(free, wanted - len(have)):
        out[i] = dataclasses.replace(out[i], gpu_spec=rng.choices(specs, weights)[0])
    return out


def reshape_cluster(nodes: Sequence[NodeView], shape: ClusterShape) -> list[NodeView]:
    """The nodes with `shape` applied: GPU nodes' CPU scaled, then large nodes split."""
    out: list[NodeView] = []
    for node in nodes:
        gpus = node.allocatable.scalar.get(NVIDIA_GPU, 0)
        if gpus and shape.cpu_per_gpu != 1.0:
            cpu = round(node.allocatable.milli_cpu * shape.cpu_per_gpu)
            node = _with(node, node.name, cpu, node.allocatable.memory, gpus)
        limit = shape.max_gpus_per_node
        out.extend(_split(node, gpus, limit) if limit is not None and gpus > limit else [node])
    return out


def _split(node: NodeView, gpus: int, limit: int) -> list[NodeView]:
    """`node` as ceil(gpus / limit) nodes with the GPUs spread evenly, CPU and memory with them."""
    parts = math.ceil(gpus / limit)
    sizes = [gpus // parts + (1 if i < gpus % parts else 0) for i in range(parts)]
    cpu, memory = node.allocatable.milli_cpu, node.allocatable.memory
    return [
        _with(node, f"{node.name}-{i}", cpu * size // gpus, memory * size // gpus, size)
        for i, size in enumerate(sizes)
    ]


def _with(node: NodeView, name: str, milli_cpu: int, memory: int, gpus: int) -> NodeView:
    scalar = {**node.allocatable.scalar, NVIDIA_GPU: gpus}
    allocatable = dataclasses.replace(
        node.allocatable, milli_cpu=milli_cpu, memory=memory, scalar=scalar
    )
    labels = dict(node.labels)
    if "kubernetes.io/hostname" in labels:
        labels["kubernetes.io/hostname"] = name
    return dataclasses.replace(node, name=name, labels=labels, allocatable=allocatable)


def fits_some_node(pods: Sequence[TracePod], nodes: Sequence[NodeView]) -> list[TracePod]:
    """The pods that fit at least one empty node (CPU, memory, GPU count, GPU model).

    A split cluster has no node for an 8-GPU pod; its users would not submit one, so a variant
    leaves such pods out rather than let them stand unplaceable in every run."""
    shapes = {
        (
            n.allocatable.milli_cpu,
            n.allocatable.memory,
            n.allocatable.scalar.get(NVIDIA_GPU, 0),
            n.labels.get(GPU_PRODUCT_LABEL, ""),
        )
        for n in nodes
    }

    def fits(pod: TracePod) -> bool:
        models = set(pod.gpu_spec.split("|")) if pod.gpu_spec and pod.num_gpu else None
        return any(
            pod.cpu_milli <= cpu
            and pod.memory_mib * 1024 * 1024 <= memory
            and pod.num_gpu <= gpus
            and (models is None or model in models)
            for cpu, memory, gpus, model in shapes
        )

    return [p for p in pods if fits(p)]

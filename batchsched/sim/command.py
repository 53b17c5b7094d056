"""`batchsched simulate`: read the inputs, run the simulation, print, write JSON and a report."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

from batchsched.cluster_file import (
    ClusterFileError,
    ClusterState,
    Progress,
    load_cluster,
    skipped_text,
)
from batchsched.config import ConfigError
from batchsched.framework.profile import Profile
from batchsched.model.errors import InvalidObject
from batchsched.sim.dra_cluster import GPU_DEVICE_CLASS, as_dra_cluster, gpu_device_class
from batchsched.sim.generator import DRA, GeneratorError, GeneratorSpec, generate
from batchsched.sim.policy_run import DEFAULT_POLICY, check_policy, paper_target, profile_for
from batchsched.sim.policy_run import choose_profile as choose_profile  # re-exported
from batchsched.sim.run import (
    PAPER,
    PAPER_PERCENTAGE,
    REPLAY,
    Cluster,
    Outcome,
    paper_pods,
    simulate,
    state_cluster,
    state_workload,
    target_of,
    target_of_trace,
)
from batchsched.sim.tenants import render_tenants
from batchsched.sim.trace import (
    PodFactory,
    TraceError,
    TracePod,
    embedded_default_pods,
    embedded_gpu_nodes,
    read_nodes,
    read_pods,
)
from batchsched.sim.workload import SimPod, replay_workload
from gpu.workload import Workload
from queues.config import load_quota_file

EXIT_BAD_INPUT: Final = 2


@dataclass(frozen=True)
class SimulateRequest:
    nodes: Path | None = None
    cluster: Path | None = None
    pods: Path | None = None
    generate: str | None = None
    method: str | None = None
    inflation: float = 1.3
    seed: int = 42
    config: Path | None = None
    percentage: int | None = None
    json_out: Path | None = None
    report: Path | None = None
    quiet: bool = False
    policy: str = DEFAULT_POLICY  # or one of the paper's (sim/policies.py)
    quota: Path | None = None  # a QuotaConfig file: tenant queues, as `batchsched run --quota`


@dataclass(frozen=True)
class Inputs:
    cluster: Cluster
    trace: list[TracePod] | None  # rows of a pod CSV, when the workload is one
    pods: list[SimPod]  # YAML or generated pods (empty for a trace)
    description: str


class InputError(ValueError):
    pass


def read_inputs(req: SimulateRequest, note: Progress | None = None) -> Inputs:
    """`note` gets the reader's progress lines and the one naming the kinds it skipped."""
    pods_csv = req.pods is not None and req.pods.suffix.lower() == ".csv"
    yaml_paths = [p for p in (req.cluster, None if pods_csv else req.pods) if p is not None]
    state = load_cluster(yaml_paths, devices=True, progress=note) if yaml_paths else None
    if state is not None and state.skipped and note is not None:
        note(skipped_text(state.skipped))
    spec = GeneratorSpec.parse(req.generate) if req.generate is not None else None
    cluster = _cluster(req, state, dra=spec is not None and spec.gpus_as == DRA)
    pods = state_workload(state, cluster.gpu_device_class) if state else []
    if spec is not None:
        pods += generate(spec, req.seed)
        return Inputs(cluster, None, pods, f"generated workload ({req.generate})")
    if pods:
        return Inputs(cluster, None, pods, f"{len(pods)} pods from {_names(yaml_paths)}")
    trace_path = req.pods if pods_csv and req.pods else embedded_default_pods()
    return Inputs(cluster, read_pods(trace_path), [], f"trace {trace_path.name}")


def _cluster(req: SimulateRequest, state: ClusterState | None, dra: bool = False) -> Cluster:
    """The cluster of the YAML, or the node CSV's with the YAML's DRA objects. With `dra`
    (generated pods asking for GPUs through claims): a CSV's nodes publish their GPUs as
    ResourceSlices instead of nvidia.com/gpu, and NVIDIA's GPU DeviceClass is added where
    the files have none."""
    if state is not None and state.nodes:
        cluster = state_cluster(state)
    elif state is not None and any(p.node_name for p in state.pods):
        raise InputError("the YAML has bound pods but no Nodes to count them on")
    else:
        nodes = read_nodes(req.nodes or embedded_gpu_nodes())
        cluster = (
            dataclasses.replace(state_cluster(state), nodes=nodes) if state else Cluster(nodes)
        )
        if dra:
            found = as_dra_cluster(nodes)
            slices = (*cluster.resource_slices, *found.slices)
            cluster = dataclasses.replace(
                cluster, nodes=found.nodes, resource_slices=slices, topologies=found.topologies
            )
    if dra and all(c.name != GPU_DEVICE_CLASS for c in cluster.device_classes):
        classes = (*cluster.device_classes, gpu_device_class())
        cluster = dataclasses.replace(cluster, device_classes=classes)
    return cluster


def _names(paths: Sequence[Path]) -> str:
    return ", ".join(p.name for p in paths)


def plan(
    req: SimulateRequest, inputs: Inputs, profile: Profile
) -> tuple[str, list[SimPod], Workload]:
    """The method, the arriving pods and the target workload for fragmentation."""
    method = req.method or (PAPER if inputs.trace is not None else REPLAY)
    if inputs.trace is None:
        if method == PAPER:
            raise InputError("the paper's method samples a trace: give --pods a pod CSV")
        return method, inputs.pods, target_of(inputs.pods)
    factory = PodFactory(profile.scheduler_name)
    target = target_of_trace(inputs.trace)
    if method == REPLAY:
        return method, replay_workload(inputs.trace, factory), target
    pods = paper_pods(
        inputs.trace, inputs.cluster.nodes, req.inflation, req.seed, profile.scheduler_name
    )
    return method, pods, target


def require_report_extra(req: SimulateRequest) -> None:
    """Refuse --report before the run, not after it, when matplotlib (the `report` extra,
    left out of the scheduler's image) is not installed."""
    if req.report is None:
        return
    try:
        import matplotlib  # noqa: F401  (only asking whether it is there)
    except ImportError:
        raise InputError(
            "--report needs matplotlib, which is not installed: "
            "pip install 'batchsched[report]' (or pip install matplotlib)"
        ) from None


def execute(req: SimulateRequest, out: TextIO, err: TextIO) -> int:
    start = time.perf_counter()
    try:
        require_report_extra(req)
        check_policy(req.policy)
        profile = choose_profile(req.config)
        quota = load_quota_file(req.quota) if req.quota is not None else None
        inputs = read_inputs(req, None if req.quiet else _note(err))
        method, pods, target = plan(req, inputs, profile)
        if req.policy != DEFAULT_POLICY:
            expected = paper_target(inputs.trace) if inputs.trace is not None else target
            profile = profile_for(req.policy, profile, expected, req.seed)
    except (
        ClusterFileError,
        ConfigError,
        GeneratorError,
        InputError,
        InvalidObject,
        TraceError,
        ValueError,
    ) as error:
        print(f"batchsched simulate: {error}", file=err)
        return EXIT_BAD_INPUT
    percentage = req.percentage
    if percentage is None and method == PAPER:
        percentage = PAPER_PERCENTAGE
    outcome = simulate(
        inputs.cluster,
        pods,
        profile,
        seed=req.seed,
        target=target,
        method=method,
        inflation=req.inflation if method == PAPER else None,
        percentage=percentage,
        show_progress=not req.quiet,
        # A pod the paper's method cannot place is never retried: nobody asks why.
        record_reasons=method != PAPER,
        quota=quota,
    )
    wall = time.perf_counter() - start
    description = inputs.description
    if req.policy != DEFAULT_POLICY:
        description += f", policy {req.policy}"
    if req.quota is not None:
        description += f", quota {req.quota.name}"
    print(render_summary(outcome, description, wall), file=out)
    write_outputs(req, outcome, description, wall, out)
    return 0


def _note(err: TextIO) -> Progress:
    def note(line: str) -> None:
        print(f"batchsched simulate: {line}", file=err, flush=True)

    return note


def write_outputs(
    req: SimulateRequest, outcome: Outcome, description: str, wall_s: float, out: TextIO
) -> None:
    if req.json_out is not None:
        document = outcome.to_json()
        document["summary"] = {**outcome.summary(), "wall_s": round(wall_s, 3)}
        req.json_out.write_text(json.dumps(document, indent=1) + "\n")
    if req.report is not None:
        from batchsched.sim.report import write_report  # matplotlib loads only when asked

        write_report(outcome, req.report, f"batchsched simulate: {description}")
        print(f"report: {req.report / 'index.html'}", file=out)


def render_summary(outcome: Outcome, description: str, wall_s: float) -> str:
    s = outcome.summary()
    lines = [f"{description}, {_method_text(outcome)}, seed {outcome.seed}"]
    devices = outcome.recorder.devices
    as_devices = (
        f" ({s['dra_gpus']} as DRA devices of DeviceClass {devices.device_class})"
        if devices is not None and devices.total
        else ""
    )
    lines.append(
        f"cluster: {s['nodes']} nodes, {s['gpus']} GPUs{as_devices}; "
        f"{s['pods_arrived']} pods arrived ({s['arrived_gpu_pct']}% of GPU capacity requested)"
    )
    lines.append(
        f"placed: {s['pods_placed']} pods; waiting at the end: {s['pods_waiting']}; "
        f"not ours or gated: {s['pods_ignored']}"
    )
    if outcome.method == PAPER and s["gpu_alloc_pct_at_130"] is not None:
        lines.append(
            f"GPU allocation: {s['gpu_alloc_pct_at_100']}% at 100% arrived, "
            f"{s['gpu_alloc_pct_at_130']}% at 130% arrived "
            f"(fragmented GPUs at 130%: {s['frag_gpu_pct_at_130']}%)"
        )
    elif outcome.method == PAPER:
        lines.append(f"GPU allocation at the end: {s['gpu_alloc_pct_end']}%")
    else:
        waits = s["wait_s"]
        assert isinstance(waits, dict)
        lines.append(
            f"GPU allocation at the end: {s['gpu_alloc_pct_end']}%; wait p50 {waits['p50']} s, "
            f"p90 {waits['p90']} s, max {waits['max']} s"
        )
    tenants = s.get("tenants")
    if isinstance(tenants, dict):
        lines.append(f"tenants: {s['pods_held_by_quota']} pods held by their quota at least once")
        lines += [f"  {line}" for line in render_tenants(tenants)]
    rate = outcome.pods / wall_s if wall_s else 0.0
    lines.append(
        f"speed: {outcome.pods} pods in {wall_s:.2f} s wall ({rate:,.0f} pods/s), "
        f"{outcome.sim_s:.2f} s of it simulating ({outcome.pods / max(outcome.sim_s, 1e-9):,.0f} "
        f"pods/s, {s['scheduling_cycles']} scheduling cycles{_known_unfit(s)})"
    )
    return "\n".join(lines)


def _known_unfit(summary: dict[str, object]) -> str:
    known = summary["pods_known_unfit"]
    return f", {known} copies of pods that found no node settled without one" if known else ""


def _method_text(outcome: Outcome) -> str:
    if outcome.method == PAPER:
        return (
            f"paper's method (Weng et al., ATC '23: sampled to {outcome.inflation:.0%} of GPU "
            "capacity, one at a time, no departures)"
        )
    return "replay on a virtual clock (arrivals and departures)"

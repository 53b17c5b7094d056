"""`batchsched place` against kube-scheduler's documented semantics, scenario by scenario.

The scenarios live in scenarios/*.yaml, one file per Kubernetes documentation page, each a
small cluster and some pending pods written as Kubernetes YAML after an example on that page.
This module writes them to files, runs `batchsched place` on them in-process and checks the
outcome: exact placements where the docs make them unique, membership in the allowed set where
several nodes are equally good. Every run is made twice with the same --seed and must print the
same thing both times.

Objects may leave out what does not matter to the scenario; `complete` fills it in: a Node gets
its kubernetes.io/hostname label and 4 cpu / 32Gi / 110 pods allocatable unless it says
otherwise, a Pod the default namespace and a busybox container, and a pending Pod our
scheduler's name (a bound one, kube's default scheduler and phase Running).

Dynamic Resource Allocation scenarios also say which devices placed pods' claims got
(`claims`), checked against the attributes of the scenario's ResourceSlices; in every
scenario no device may be held by two claims.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, Field

from batchsched.cli import main

SCENARIOS: Final = Path(__file__).parent / "scenarios"
HOSTNAME: Final = "kubernetes.io/hostname"
GPU_SCHEDULER: Final = "gpu-scheduler"
NODE_ALLOCATABLE: Final = {"cpu": "4", "memory": "32Gi", "pods": "110"}
API_VERSIONS: Final = {
    "Node": "v1",
    "Pod": "v1",
    "Namespace": "v1",
    "PriorityClass": "scheduling.k8s.io/v1",
    "PodGroup": "scheduling.x-k8s.io/v1alpha1",
    "DeviceClass": "resource.k8s.io/v1",
    "ResourceSlice": "resource.k8s.io/v1",
    "ResourceClaim": "resource.k8s.io/v1",
    "ResourceClaimTemplate": "resource.k8s.io/v1",
}

Obj = dict[str, Any]
Placements = dict[str, str | None]
Claims = dict[str, dict[str, list[str]]]  # pod key -> claim key -> device ids


class ClaimDevices(BaseModel):
    """What one claim of a placed pod holds: how many devices, sharing which attributes (fully
    qualified names), or exactly which ("driver/pool/device")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    count: int = Field(ge=1)
    same: list[str] = Field(default_factory=list)
    devices: list[str] | None = None


class Scenario(BaseModel):
    """One scenario and what must hold for it (pod names are in the default namespace)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    scenario: str  # the test id: a sentence saying what the docs promise
    cluster: list[Any]  # Nodes, running Pods, PriorityClasses, Namespaces; lists are flattened
    pending: list[Any]
    seeds: int = Field(default=1, ge=1)  # run with each of --seed 0..seeds-1
    placed: dict[str, str | list[str]] = Field(default_factory=dict)  # a node, or any of several
    unplaced: dict[str, str] = Field(default_factory=dict)  # the exact aggregated reason
    unplaced_mentioning: dict[str, str] = Field(default_factory=dict)  # a word of the reason
    absent: list[str] = Field(default_factory=list)  # not scheduled by us at all
    distinct: list[list[str]] = Field(default_factory=list)  # pods on pairwise different nodes
    same_node: list[list[str]] = Field(default_factory=list)  # pods placed together
    varies: dict[str, list[str]] = Field(default_factory=dict)  # nodes chosen over the seeds
    placed_per_label: dict[str, dict[str, int]] = Field(default_factory=dict)
    claims: dict[str, dict[str, ClaimDevices]] = Field(default_factory=dict)  # pod -> claim key
    xfail: str | None = None  # a known bug, reported; the scenario must still fail

    def expected_pods(self) -> set[str]:
        named = {*self.placed, *self.unplaced, *self.unplaced_mentioning, *self.absent}
        named |= set(self.claims)
        groups = [*self.distinct, *self.same_node]
        named |= {pod for group in groups for pod in group} | set(self.varies)
        return named


class ScenarioFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    page: str
    common: dict[str, Any] = Field(default_factory=dict)  # anchors shared by the scenarios
    scenarios: list[Scenario]


def load_scenarios() -> list[Any]:
    params = []
    for path in sorted(SCENARIOS.glob("*.yaml")):
        loaded = ScenarioFile.model_validate(yaml.safe_load(path.read_text()))
        for s in loaded.scenarios:
            marks = [pytest.mark.xfail(strict=True, reason=s.xfail)] if s.xfail else []
            params.append(pytest.param(s, id=s.scenario, marks=marks))
    return params


def flatten(items: Iterable[Any]) -> Iterator[Obj]:
    for item in items:
        if isinstance(item, list):
            yield from flatten(item)
        else:
            yield item


def complete(obj: Obj) -> Obj:
    obj = copy.deepcopy(obj)  # YAML aliases share one object between scenarios
    kind = obj["kind"]
    obj.setdefault("apiVersion", API_VERSIONS[kind])
    meta = obj.setdefault("metadata", {})
    if kind == "Node":
        meta.setdefault("labels", {}).setdefault(HOSTNAME, meta["name"])
        status = obj.setdefault("status", {})
        status["allocatable"] = {**NODE_ALLOCATABLE, **status.get("allocatable", {})}
    elif kind == "Pod":
        meta.setdefault("namespace", "default")
        spec = obj.setdefault("spec", {})
        spec.setdefault("containers", [{"name": "main", "image": "busybox"}])
        bound = "nodeName" in spec
        spec.setdefault("schedulerName", "default-scheduler" if bound else GPU_SCHEDULER)
        if bound:
            obj.setdefault("status", {}).setdefault("phase", "Running")
    return obj


def write_inputs(tmp_path: Path, scenario: Scenario) -> tuple[Path, Path, list[Obj]]:
    """The cluster as a v1 List (as `kubectl get -o yaml` prints), the pods as `---` docs."""
    cluster = [complete(o) for o in flatten(scenario.cluster)]
    cluster_file = tmp_path / "cluster.yaml"
    cluster_file.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": cluster}))
    pods_file = tmp_path / "pods.yaml"
    pods_file.write_text(yaml.safe_dump_all([complete(o) for o in flatten(scenario.pending)]))
    return cluster_file, pods_file, cluster


def place(
    capsys: pytest.CaptureFixture[str], cluster: Path, pods: Path, seed: int
) -> tuple[Placements, dict[str, str], Claims]:
    argv = ["place", "--cluster", str(cluster), "--pods", str(pods), "--seed", str(seed)]
    printed = []
    for _ in range(2):
        rc = main([*argv, "--output", "json"])
        out, err = capsys.readouterr()
        assert rc == 0, err
        printed.append(out)
    assert printed[0] == printed[1], f"two runs with --seed {seed} disagree"
    result = json.loads(printed[0])
    return result["placements"], result["reasons"], result.get("claims", {})


def key(pod: str) -> str:
    return pod if "/" in pod else f"default/{pod}"


def check_run(
    scenario: Scenario, placements: Placements, reasons: dict[str, str], nodes: dict[str, Obj]
) -> None:
    for pod, want in scenario.placed.items():
        got = placements[key(pod)]
        allowed = [want] if isinstance(want, str) else want
        assert got in allowed, f"{pod} went to {got}, not {want}: {reasons.get(key(pod))}"
        assert key(pod) not in reasons
    for pod, reason in scenario.unplaced.items():
        assert placements[key(pod)] is None, f"{pod} was placed on {placements[key(pod)]}"
        assert reasons[key(pod)] == reason
    for pod, word in scenario.unplaced_mentioning.items():
        assert placements[key(pod)] is None
        assert word in reasons[key(pod)]
    for pod in scenario.absent:
        assert key(pod) not in placements
    for group in scenario.distinct:
        chosen = [placements[key(pod)] for pod in group]
        assert None not in chosen and len(set(chosen)) == len(group), chosen
    for group in scenario.same_node:
        chosen = [placements[key(pod)] for pod in group]
        assert None not in chosen and len(set(chosen)) == 1, chosen
    for label, want_counts in scenario.placed_per_label.items():
        values = [nodes[n]["metadata"]["labels"].get(label) for n in placements.values() if n]
        assert Counter(values) == Counter(want_counts)


def check_claims(
    scenario: Scenario, placements: Placements, claims: Claims, objects: list[Obj]
) -> None:
    """The claims' devices are as the scenario says, only placed pods show any, and no device
    is held by two claims (allocations in the cluster file included)."""
    attributes = slice_attributes(objects)
    for pod, want in scenario.claims.items():
        got = claims.get(key(pod), {})
        assert set(got) == set(want), f"{pod} shows claims {sorted(got)}"
        for claim, devices in want.items():
            held = got[claim]
            assert len(held) == len(set(held)) == devices.count, f"{claim} holds {held}"
            if devices.devices is not None:
                assert sorted(held) == sorted(devices.devices), f"{claim} holds {held}"
            for name in devices.same:
                values = {attributes[d].get(name) for d in held}
                assert len(values) == 1 and None not in values, f"{claim}: {name} is {values}"
    assert {pod for pod in claims if placements.get(pod) is None} == set()
    holder: dict[str, str] = {}
    held_by = [(c, d) for pod in claims.values() for c, ids in pod.items() for d in ids]
    held_by += allocated_in_file(objects)
    for claim, device in held_by:
        assert holder.setdefault(device, claim) == claim, f"{device} held by two claims"


def slice_attributes(objects: list[Obj]) -> dict[str, dict[str, object]]:
    """ "driver/pool/device" -> its attributes, by fully qualified name, with their values."""
    found: dict[str, dict[str, object]] = {}
    for obj in objects:
        if obj["kind"] != "ResourceSlice":
            continue
        spec = obj["spec"]
        driver, pool = spec["driver"], spec["pool"]["name"]
        for device in spec.get("devices", []):
            found[f"{driver}/{pool}/{device['name']}"] = {
                (name if "/" in name else f"{driver}/{name}"): next(iter(value.values()))
                for name, value in device.get("attributes", {}).items()
            }
    return found


def allocated_in_file(objects: list[Obj]) -> list[tuple[str, str]]:
    found = []
    for obj in (o for o in objects if o["kind"] == "ResourceClaim"):
        claim = f"{obj['metadata'].get('namespace', 'default')}/{obj['metadata']['name']}"
        allocation = obj.get("status", {}).get("allocation") or {}
        for r in allocation.get("devices", {}).get("results", []):
            found.append((claim, f"{r['driver']}/{r['pool']}/{r['device']}"))
    return found


@pytest.mark.parametrize("scenario", load_scenarios())
def test_place_follows_the_documented_semantics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scenario: Scenario
) -> None:
    cluster_file, pods_file, cluster = write_inputs(tmp_path, scenario)
    pending_names = {complete(o)["metadata"]["name"] for o in flatten(scenario.pending)}
    assert scenario.expected_pods() <= pending_names, "an expectation names an unknown pod"
    nodes = {o["metadata"]["name"]: o for o in cluster if o["kind"] == "Node"}
    chosen: dict[str, set[str | None]] = {pod: set() for pod in scenario.varies}
    objects = [*cluster, *(complete(o) for o in flatten(scenario.pending))]
    for seed in range(scenario.seeds):
        placements, reasons, claims = place(capsys, cluster_file, pods_file, seed)
        check_run(scenario, placements, reasons, nodes)
        check_claims(scenario, placements, claims, objects)
        for pod, nodes_seen in chosen.items():
            nodes_seen.add(placements[key(pod)])
    for pod, want in scenario.varies.items():
        assert chosen[pod] == set(want), f"over {scenario.seeds} seeds {pod} went to {chosen[pod]}"


def test_every_scenario_has_a_unique_sentence_and_an_expectation() -> None:
    scenarios = [p.values[0] for p in load_scenarios()]
    names = Counter(s.scenario for s in scenarios)
    assert [n for n, count in names.items() if count > 1] == []
    assert [s.scenario for s in scenarios if not s.expected_pods() and not s.placed_per_label] == []

"""KubeSchedulerConfiguration loading: kube's merge rules, strict documents, errors with paths."""

from __future__ import annotations

import logging
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, Literal

import pytest
from pydantic import Field

from batchsched.config import ConfigError, SchedulerConfig, default_config, load_config
from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import PreFilterResult, QueuedPod
from batchsched.framework.registry import EnabledPlugin, NoArgs, PluginArgs, PluginSpec, Registry
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.status import OK, Status, unresolvable
from batchsched.model.pod import PodView
from batchsched.plugins.default_binder import DefaultBinder
from batchsched.plugins.node_name import NodeName
from batchsched.plugins.node_unschedulable import NodeUnschedulable
from batchsched.plugins.priority_sort import PrioritySort
from batchsched.plugins.scheduling_gates import SchedulingGates
from batchsched.snapshot import NodeInfo, Snapshot
from tests.builders import make_node, make_pod, snapshot_of

DATA = Path(__file__).parent / "data"


# A small registry: the real simple plugins plus test plugins with args of their own.
class Strategy(PluginArgs):
    type: Literal["LeastAllocated", "MostAllocated"] = "LeastAllocated"


class PackingArgs(PluginArgs):
    scoring_strategy: Strategy = Strategy()


class Packing:
    """PreFilter, Filter and Score, like NodeResourcesFit."""

    name: ClassVar[str] = "Packing"

    def __init__(self, args: PackingArgs | None = None) -> None:
        self.args = args or PackingArgs()

    def pre_filter(
        self, state: CycleState, pod: PodView, snapshot: Snapshot
    ) -> tuple[PreFilterResult | None, Status]:
        return None, OK

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
        return OK

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        return 0


class PreferArgs(PluginArgs):
    label: str = "tier"
    value: str = "gold"


class Prefer:
    """PreScore and Score: 100 for nodes carrying the preferred label."""

    name: ClassVar[str] = "Prefer"

    def __init__(self, args: PreferArgs | None = None) -> None:
        self.args = args or PreferArgs()

    def pre_score(
        self, state: CycleState, pod: PodView, snapshot: Snapshot, nodes: Sequence[NodeInfo]
    ) -> Status:
        return OK

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        return 100 if node.node.labels.get(self.args.label) == self.args.value else 0


class GpuArgs(PluginArgs):
    gpu_weight: int = Field(default=1, ge=0, le=100)


class GpuFilter:
    """Filter and Score, not a default: what users add through multiPoint."""

    name: ClassVar[str] = "GpuFilter"

    def __init__(self, args: GpuArgs | None = None) -> None:
        self._rejected = unresolvable("node(s) had no GPU")

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
        return OK if "gpu" in node.node.labels else self._rejected

    def score(self, state: CycleState, pod: PodView, node: NodeInfo) -> int:
        return 50


class Fifo:
    name: ClassVar[str] = "Fifo"

    def __init__(self, args: NoArgs | None = None) -> None:
        pass

    def less(self, a: QueuedPod, b: QueuedPod) -> bool:
        return a.enqueued_at < b.enqueued_at


REGISTRY = Registry(
    [
        PluginSpec("PrioritySort", PrioritySort, NoArgs),
        PluginSpec("SchedulingGates", SchedulingGates, NoArgs),
        PluginSpec("NodeUnschedulable", NodeUnschedulable, NoArgs),
        PluginSpec("NodeName", NodeName, NoArgs),
        PluginSpec("DefaultBinder", DefaultBinder, NoArgs),
        PluginSpec("Packing", Packing, PackingArgs),
        PluginSpec("Prefer", Prefer, PreferArgs),
        PluginSpec("GpuFilter", GpuFilter, GpuArgs),
        PluginSpec("Fifo", Fifo, NoArgs),
    ]
)
DEFAULTS = {
    "queueSort": [EnabledPlugin("PrioritySort")],
    "preEnqueue": [EnabledPlugin("SchedulingGates")],
    "preFilter": [EnabledPlugin("Packing")],
    "filter": [EnabledPlugin(name) for name in ("NodeUnschedulable", "NodeName", "Packing")],
    "preScore": [EnabledPlugin("Prefer")],
    "score": [EnabledPlugin("Packing", 1), EnabledPlugin("Prefer", 2)],
    "bind": [EnabledPlugin("DefaultBinder")],
}


def load(text: str) -> SchedulerConfig:
    return load_config(textwrap.dedent(text), registry=REGISTRY, defaults=DEFAULTS)


def profile_yaml(version: str, body: str) -> str:
    """One profile named "p" in the given apiVersion; `body` is indented under the profile."""
    profile = textwrap.indent(textwrap.dedent(body).rstrip("\n") + "\n", "  ") if body else ""
    return (
        f"apiVersion: kubescheduler.config.k8s.io/{version}\n"
        "kind: KubeSchedulerConfiguration\n"
        "profiles:\n- schedulerName: p\n" + profile
    )


def error_of(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load(text)
    return str(caught.value)


# The three documents from the task, against the built-in registry and defaults.


def test_v1beta2_profile_listing_defaults_again_resolves_to_the_defaults() -> None:
    config = load_config(DATA / "v1beta2_custom_scheduler.yaml")
    plugins = config.profile("custom-scheduler").describe()
    assert plugins["queueSort"] == ["PrioritySort"]
    assert plugins["preFilter"] == [
        "TopologyDomains",
        "NodeName",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "GpuTopology",
        "BackfillReservations",
        "DynamicResources",
    ]
    assert plugins["filter"] == [
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "GpuTopology",
        "BackfillReservations",
        "DynamicResources",
    ]
    assert plugins["score"] == [
        "TaintToleration:3",
        "NodeAffinity:2",
        "NodeResourcesFit:1",
        "PodTopologySpread:2",
        "InterPodAffinity:2",
        "NodeResourcesBalancedAllocation:1",
        "ImageLocality:1",
        "GpuTopology:100",
        "DynamicResources:100",
    ]
    assert plugins["reserve"] == ["GpuTopology", "DynamicResources"]
    assert plugins["preBind"] == ["DynamicResources"]
    assert plugins["bind"] == ["DefaultBinder"]
    assert config.build_profiles()["custom-scheduler"].describe()["score"] == plugins["score"]


def test_v1beta3_explicit_defaults_move_first_and_a_disabled_prescore_goes() -> None:
    config = load_config(str(DATA / "v1beta3_reconfigure_defaults.yaml"))
    plugins = config.profile("custom-scheduler").describe()
    assert plugins["filter"] == [
        "NodeResourcesFit",
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "PodTopologySpread",
        "InterPodAffinity",
        "GpuTopology",
        "BackfillReservations",
        "DynamicResources",
    ]
    assert plugins["score"] == [
        "NodeResourcesFit:1",
        "TaintToleration:3",
        "NodeAffinity:2",
        "PodTopologySpread:2",
        "InterPodAffinity:2",
        "NodeResourcesBalancedAllocation:1",
        "ImageLocality:1",
        "GpuTopology:100",
        "DynamicResources:100",
    ]
    assert plugins["preScore"] == [
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "PodTopologySpread",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
        "GpuTopology",
        "DynamicResources",
    ]
    assert "InterPodAffinity" in plugins["preFilter"]
    assert set(config.build_profiles()) == {"custom-scheduler"}


def test_v1_unknown_plugin_fails_naming_its_path_and_the_known_plugins() -> None:
    path = DATA / "v1_unknown_gpu_plugin.yaml"
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(
        f'{path}: profiles[0].plugins.score.enabled[0].name: unknown plugin "GPUPriorityPlugin": '
        'neither built in nor an installed package\'s "batchsched.plugins" entry point; '
        "known plugins: BackfillReservations, "
    )
    for name in ("ImageLocality", "InterPodAffinity", "NodeResourcesFit", "PrioritySort"):
        assert name in message
    assert caught.value.issues[0].path == "profiles[0].plugins.score.enabled[0].name"


def test_the_three_documents_in_one_file_are_rejected() -> None:
    with pytest.raises(ConfigError, match="3 YAML documents, 3 of kind KubeSchedulerConfiguration"):
        load_config(DATA / "three_documents.yaml")


def test_default_config_is_one_gpu_scheduler_profile_with_the_builtin_defaults() -> None:
    from batchsched.plugins.registry import DEFAULT_PLUGINS

    config = default_config()
    assert [p.scheduler_name for p in config.profiles] == ["gpu-scheduler"]
    expected = {
        point: [f"{p.name}:{p.weight}" if point == "score" else p.name for p in plugins]
        for point, plugins in DEFAULT_PLUGINS.items()
    }
    assert config.profiles[0].describe() == expected
    assert config.build_profiles()["gpu-scheduler"].queue_sort.name == "GangSort"


def test_a_queue_sort_plugin_the_user_enables_replaces_the_default_one() -> None:
    config = load_config(
        profile_yaml("v1beta2", "plugins: {queueSort: {enabled: [{name: Fifo}]}}"),
        registry=REGISTRY,
        defaults=DEFAULTS,
    )
    assert config.build_profiles(REGISTRY)["p"].queue_sort.name == "Fifo"


# Merge semantics on the small registry.

MERGES = [
    (
        "v1beta2",
        "plugins: {filter: {disabled: [{name: '*'}], enabled: [{name: GpuFilter}]}}",
        {"filter": ["GpuFilter"], "preFilter": ["Packing"]},
    ),
    (
        "v1beta2",
        "plugins: {filter: {disabled: [{name: NodeName}]}}",
        {"filter": ["NodeUnschedulable", "Packing"]},
    ),
    (
        "v1beta2",
        "plugins: {score: {enabled: [{name: Packing, weight: 5}]}}",
        {"score": ["Packing:5", "Prefer:2"]},
    ),
    (
        "v1beta2",
        "plugins: {filter: {enabled: [{name: NodeName}, {name: NodeUnschedulable}]}}",
        {"filter": ["NodeUnschedulable", "NodeName", "Packing"]},
    ),
    (
        "v1beta2",
        "plugins: {filter: {disabled: [{name: NodeUnschedulable}], "
        "enabled: [{name: NodeUnschedulable}]}}",
        {"filter": ["NodeName", "Packing", "NodeUnschedulable"]},
    ),
    (
        "v1beta2",
        "plugins: {filter: {enabled: [{name: GpuFilter}]}}",
        {"filter": ["NodeUnschedulable", "NodeName", "Packing", "GpuFilter"]},
    ),
    (
        "v1beta2",
        "plugins: {score: {enabled: [{name: Prefer}, {name: GpuFilter}]}}",
        {"score": ["Packing:1", "Prefer:2", "GpuFilter:1"]},
    ),
    (
        "v1",
        "plugins: {multiPoint: {enabled: [{name: GpuFilter, weight: 4}]}}",
        {
            "filter": ["NodeUnschedulable", "NodeName", "Packing", "GpuFilter"],
            "score": ["Packing:1", "Prefer:2", "GpuFilter:4"],
            "preFilter": ["Packing"],
        },
    ),
    (
        "v1",
        "plugins: {multiPoint: {enabled: [{name: GpuFilter}]}, "
        "score: {disabled: [{name: GpuFilter}]}}",
        {
            "filter": ["NodeUnschedulable", "NodeName", "Packing", "GpuFilter"],
            "score": ["Packing:1", "Prefer:2"],
        },
    ),
    (
        "v1",
        "plugins: {multiPoint: {enabled: [{name: GpuFilter}]}, "
        "filter: {disabled: [{name: '*'}], enabled: [{name: NodeName}]}}",
        {"filter": ["NodeName"], "score": ["Packing:1", "Prefer:2", "GpuFilter:1"]},
    ),
    (
        "v1",
        "plugins: {score: {enabled: [{name: Prefer, weight: 5}]}}",
        {"score": ["Prefer:5", "Packing:1"]},
    ),
    (
        "v1",
        "plugins: {score: {enabled: [{name: GpuFilter}, {name: Prefer}]}}",
        {"score": ["Prefer:2", "Packing:1", "GpuFilter:1"]},
    ),
    (
        "v1",
        "plugins: {multiPoint: {enabled: [{name: GpuFilter, weight: 4}]}, "
        "score: {enabled: [{name: GpuFilter, weight: 9}]}}",
        {"score": ["GpuFilter:9", "Packing:1", "Prefer:2"]},
    ),
    (
        "v1",
        "plugins: {multiPoint: {enabled: [{name: GpuFilter, weight: 4}]}, "
        "score: {enabled: [{name: GpuFilter}]}}",
        {"score": ["GpuFilter:4", "Packing:1", "Prefer:2"]},
    ),
    (
        "v1",
        "plugins: {multiPoint: {disabled: [{name: '*'}], "
        "enabled: [{name: PrioritySort}, {name: GpuFilter}, {name: DefaultBinder}]}}",
        {
            "filter": ["GpuFilter"],
            "score": ["GpuFilter:1"],
            "queueSort": ["PrioritySort"],
            "bind": ["DefaultBinder"],
            "preFilter": None,
            "preScore": None,
        },
    ),
    (
        "v1",
        "plugins: {multiPoint: {enabled: [{name: Packing, weight: 3}]}}",
        {
            "score": ["Packing:3", "Prefer:2"],
            "filter": ["NodeUnschedulable", "NodeName", "Packing"],
        },
    ),
    (
        "v1beta3",
        "plugins: {multiPoint: {enabled: [{name: GpuFilter}]}, "
        "preFilter: {disabled: [{name: '*'}]}}",
        {"filter": ["NodeUnschedulable", "NodeName", "Packing", "GpuFilter"], "preFilter": None},
    ),
]


@pytest.mark.parametrize(
    ("version", "body", "expected"),
    MERGES,
    ids=[
        "v1beta2 '*' drops every default at the point, then the enabled ones follow",
        "v1beta2 disabling one default keeps the others in order",
        "v1beta2 enabling a default replaces it in place and its weight wins",
        "v1beta2 re-listing defaults in another order keeps the default order",
        "v1beta2 a default disabled and enabled again moves to the end",
        "v1beta2 a new plugin is appended after the defaults",
        "v1beta2 an unweighted default keeps its default weight, a new one gets 1",
        "v1 a multiPoint plugin runs at every point it implements with its weight",
        "v1 a point that disables a multiPoint plugin skips it there only",
        "v1 '*' at a point skips multiPoint expansion there but keeps explicit plugins",
        "v1 an explicitly enabled default moves ahead of the multiPoint ones",
        "v1 explicit overrides keep their own order, new explicit plugins come last",
        "v1 an explicit entry overrides the multiPoint weight",
        "v1 an explicit entry without weight falls back to the multiPoint weight",
        "v1 multiPoint '*' drops all defaults and leaves only the user's plugins",
        "v1 multiPoint re-enabling a default keeps its place and takes the weight",
        "v1beta3 expands multiPoint like v1",
    ],
)
def test_plugin_sets_merge_like_kube(
    version: str, body: str, expected: dict[str, list[str] | None]
) -> None:
    plugins = load(profile_yaml(version, body)).profile("p").describe()
    for point, names in expected.items():
        assert plugins.get(point) == names, point


ERRORS = [
    (
        profile_yaml("v1", "plugins: {score: {enabled: [{name: Prefer, weight: 101}]}}"),
        "profiles[0].plugins.score.enabled[0].weight: input should be less than or equal to 100, "
        "got 101",
    ),
    (
        profile_yaml("v1", "plugins: {score: {enabled: [{name: Prefer, weight: -1}]}}"),
        "profiles[0].plugins.score.enabled[0].weight: input should be greater than or equal to 0",
    ),
    (
        profile_yaml("v1", "plugins: {score: {enabeld: [{name: Prefer}]}}"),
        'profiles[0].plugins.score.enabeld: unknown field "enabeld"; did you mean "enabled"?',
    ),
    (
        profile_yaml("v1", "color: blue"),
        'profiles[0].color: unknown field "color"; known fields: schedulerName, plugins, '
        "pluginConfig, percentageOfNodesToScore",
    ),
    (
        profile_yaml(
            "v1", "pluginConfig: [{name: Packing, args: {scoringStrategy: {type: Nope}}}]"
        ),
        "profiles[0].pluginConfig[0].args.scoringStrategy.type: input should be 'LeastAllocated' "
        "or 'MostAllocated', got \"Nope\"",
    ),
    (
        profile_yaml("v1", "pluginConfig: [{name: GpuFilter, args: {gpuWieght: 3}}]"),
        'profiles[0].pluginConfig[0].args.gpuWieght: unknown field "gpuWieght"',
    ),
    (
        profile_yaml("v1", "pluginConfig: [{name: Packing, args: {kind: NodeResourcesFitArgs}}]"),
        'profiles[0].pluginConfig[0].args.kind: must be "PackingArgs", got "NodeResourcesFitArgs"',
    ),
    (
        profile_yaml("v1", "pluginConfig: [{name: Packing}, {name: Packing}]"),
        'profiles[0].pluginConfig[1].name: duplicate config for plugin "Packing" '
        "(also pluginConfig[0])",
    ),
    (
        profile_yaml("v1beta2", "plugins: {multiPoint: {enabled: [{name: GpuFilter}]}}"),
        'profiles[0].plugins.multiPoint: unknown field "multiPoint": multiPoint needs apiVersion '
        "kubescheduler.config.k8s.io/v1beta3 or kubescheduler.config.k8s.io/v1",
    ),
    (
        profile_yaml("v1beta2", "percentageOfNodesToScore: 30"),
        'profiles[0].percentageOfNodesToScore: unknown field "percentageOfNodesToScore"',
    ),
    (
        profile_yaml("v1", "") + "healthzBindAddress: 0.0.0.0:10251\n",
        'healthzBindAddress: unknown field "healthzBindAddress": removed after '
        "kubescheduler.config.k8s.io/v1beta2",
    ),
    (
        profile_yaml("v1", "") + "- schedulerName: p\n",
        'profiles[1].schedulerName: duplicate scheduler name "p" (also profiles[0])',
    ),
    (
        profile_yaml("v1", "plugins: {filter: {enabled: [{name: GpuFilter}, {name: GpuFilter}]}}"),
        'profiles[0].plugins.filter.enabled[1].name: plugin "GpuFilter" is enabled twice '
        "(also at enabled[0])",
    ),
    (
        profile_yaml("v1", "plugins: {filter: {enabled: [{name: Prefer}]}}"),
        'profiles[0].plugins.filter.enabled[0].name: plugin "Prefer" does not implement the filter '
        "extension point; it implements: preScore, score",
    ),
    (
        profile_yaml("v1", "plugins: {queueSort: {disabled: [{name: '*'}]}}"),
        "profiles[0].plugins.queueSort: exactly one queueSort plugin must be enabled, found: none",
    ),
    (
        profile_yaml(
            "v1beta2", "plugins: {queueSort: {enabled: [{name: PrioritySort}, {name: Fifo}]}}"
        ),
        "profiles[0].plugins.queueSort: exactly one queueSort plugin must be enabled, "
        "found: PrioritySort, Fifo",
    ),
    (
        profile_yaml("v1", "") + "- schedulerName: q\n  plugins: {multiPoint: {"
        "disabled: [{name: PrioritySort}], enabled: [{name: Fifo}]}}\n",
        "profiles[1].plugins.queueSort: must be the same for all profiles: profiles[0] uses "
        '"PrioritySort", this one "Fifo"',
    ),
    (
        profile_yaml("v1", "plugins: {bind: {disabled: [{name: DefaultBinder}]}}"),
        "profiles[0].plugins.bind: at least one bind plugin is needed",
    ),
    (
        profile_yaml("v1", "") + "percentageOfNodesToScore: 101\n",
        "percentageOfNodesToScore: input should be less than or equal to 100, got 101",
    ),
    (
        profile_yaml("v1", "") + "parallelism: '16'\n",
        'parallelism: input should be a valid integer, got "16"',
    ),
    (
        profile_yaml("v1", "") + "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 2\n",
        "podMaxBackoffSeconds: must be at least podInitialBackoffSeconds (5), got 2",
    ),
    (
        profile_yaml("v1", "") + "leaderElection: {leaseDuration: 10s, renewDeadline: 10s}\n",
        "leaderElection: renewDeadline must be less than leaseDuration",
    ),
    (
        profile_yaml("v1", "") + "leaderElection: {resourceLock: endpoints}\n",
        'leaderElection: resourceLock must be "leases"',
    ),
    (
        profile_yaml("v1", "") + "leaderElection: {leaseDuration: 15 seconds}\n",
        'leaderElection.leaseDuration: expected a duration such as "15s", "1m30s" or "500ms", '
        "got '15 seconds'",
    ),
    (
        "apiVersion: kubescheduler.config.k8s.io/v1alpha1\nkind: KubeSchedulerConfiguration\n",
        'apiVersion: unsupported apiVersion "kubescheduler.config.k8s.io/v1alpha1"; supported: '
        "kubescheduler.config.k8s.io/v1, kubescheduler.config.k8s.io/v1beta3, "
        "kubescheduler.config.k8s.io/v1beta2",
    ),
    (
        "apiVersion: v1\nkind: Pod\n",
        'kind: unsupported kind "Pod"; expected "KubeSchedulerConfiguration"',
    ),
    ("", "no KubeSchedulerConfiguration found: the YAML is empty"),
    ("profiles: [", "invalid YAML: "),
    (profile_yaml("v1", "schedulerName: q"), "invalid YAML: duplicate key 'schedulerName'"),
    (
        "missing.yaml",
        'expected a KubeSchedulerConfiguration mapping, got "missing.yaml" (no such file)',
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"),
    ERRORS,
    ids=[
        "a score weight above 100 is rejected at its path",
        "a negative score weight is rejected",
        "a misspelt key suggests the right one",
        "an unknown profile key lists the known ones",
        "bad plugin args name the path inside args",
        "an unknown plugin args key is rejected",
        "args of another plugin's kind are rejected",
        "config for one plugin given twice is rejected",
        "v1beta2 rejects multiPoint and says which versions have it",
        "v1beta2 rejects a per-profile percentageOfNodesToScore",
        "v1 rejects healthzBindAddress, which kube removed after v1beta2",
        "two profiles with one scheduler name are rejected",
        "a plugin enabled twice at one point is rejected",
        "a plugin enabled at a point it does not implement is rejected",
        "a profile without a queueSort plugin is rejected",
        "a profile with two queueSort plugins is rejected",
        "profiles with different queueSort plugins are rejected",
        "a profile without a bind plugin is rejected",
        "percentageOfNodesToScore above 100 is rejected",
        "a number written as a string is rejected, as kube's strict decoder does",
        "a max backoff below the initial backoff is rejected",
        "a renewDeadline not below leaseDuration is rejected",
        "a resourceLock other than leases is rejected",
        "a malformed duration is rejected",
        "an unknown apiVersion is rejected naming the supported ones",
        "another kind is rejected",
        "an empty document is rejected",
        "malformed YAML is rejected",
        "a key given twice is rejected",
        "a path to a missing file is reported as such",
    ],
)
def test_bad_configs_fail_naming_the_yaml_path(text: str, expected: str) -> None:
    assert expected in error_of(text)


def test_errors_in_many_places_are_reported_together() -> None:
    text = profile_yaml("v1", "plugins: {score: {enabled: [{name: Prefer, weight: 0.5}]}}")
    with pytest.raises(ConfigError) as caught:
        load(text + "parallelism: 0\n")
    assert [issue.path for issue in caught.value.issues] == [
        "parallelism",
        "profiles[0].plugins.score.enabled[0].weight",
    ]


def test_fields_batchsched_does_not_act_on_are_accepted_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = profile_yaml("v1beta2", "") + textwrap.dedent("""\
        healthzBindAddress: 0.0.0.0:10251
        metricsBindAddress: 0.0.0.0:10251
        enableProfiling: true
    """)
    with caplog.at_level(logging.WARNING):
        load(text)
    warned = " ".join(record.getMessage() for record in caplog.records)
    for field in ("healthzBindAddress", "metricsBindAddress", "enableProfiling"):
        assert f"field={field}" in warned


def test_an_extenders_preempt_verb_is_read_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = profile_yaml("v1", "") + textwrap.dedent("""\
        extenders:
        - urlPrefix: http://127.0.0.1:8888
          filterVerb: filter
          preemptVerb: preempt
    """)
    with caplog.at_level(logging.WARNING):
        config = load(text)
    assert config.extenders[0].preempt_verb == "preempt"
    warned = " ".join(record.getMessage() for record in caplog.records)
    assert "preemptVerb" not in warned


def test_config_of_plugins_not_enabled_is_checked_but_unused_as_in_kube(
    caplog: pytest.LogCaptureFixture,
) -> None:
    body = "pluginConfig: [{name: GpuFilter, args: {gpuWeight: 7}}, {name: Nowhere, args: {x: 1}}]"
    with caplog.at_level(logging.WARNING):
        config = load(profile_yaml("v1", body))
    assert config.profile("p").plugin_args == {"GpuFilter": {"gpuWeight": 7}}
    assert "GpuFilter" not in config.profile("p").describe()["filter"]
    warned = " ".join(record.getMessage() for record in caplog.records)
    assert "pluginConfig[0]" in warned and "pluginConfig[1]" in warned
    bad = "pluginConfig: [{name: GpuFilter, args: {gpuWeight: 700}}]"
    assert "profiles[0].pluginConfig[0].args.gpuWeight" in error_of(profile_yaml("v1", bad))


def test_typed_args_lose_their_type_meta_and_reach_the_plugin() -> None:
    body = """\
        pluginConfig:
        - name: Packing
          args:
            apiVersion: kubescheduler.config.k8s.io/v1
            kind: PackingArgs
            scoringStrategy: {type: MostAllocated}
    """
    config = load(profile_yaml("v1", body))
    expected = {"Packing": {"scoringStrategy": {"type": "MostAllocated"}}}
    assert config.profile("p").plugin_args == expected
    packing = config.build_profiles()["p"].pre_filter[0]
    assert isinstance(packing, Packing)
    assert packing.args.scoring_strategy.type == "MostAllocated"


def test_disabling_a_plugin_that_does_not_exist_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        load(profile_yaml("v1", "plugins: {score: {disabled: [{name: ImageLocalty}]}}"))
    assert "plugin=ImageLocalty" in caplog.text


def test_a_bare_or_null_key_means_not_given_as_in_kube() -> None:
    body = """\
        plugins:
          score:
            enabled:
          filter: {enabled: [{name: GpuFilter, weight: null}]}
        pluginConfig:
    """
    plugins = load(profile_yaml("v1", body)).profile("p").describe()
    assert plugins["score"] == ["Packing:1", "Prefer:2"]
    assert plugins["filter"] == ["NodeUnschedulable", "NodeName", "Packing", "GpuFilter"]


def test_a_long_one_line_document_is_yaml_not_a_file_name() -> None:
    name = "x" * 300
    text = (
        "{apiVersion: kubescheduler.config.k8s.io/v1, kind: KubeSchedulerConfiguration, "
        f"profiles: [{{schedulerName: {name}}}]}}"
    )
    assert load(text).profiles[0].scheduler_name == name


def test_no_profiles_means_one_default_scheduler_profile_with_the_defaults() -> None:
    config = load("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    assert [p.scheduler_name for p in config.profiles] == ["default-scheduler"]
    assert config.profiles[0].describe()["score"] == ["Packing:1", "Prefer:2"]


def test_settings_take_kube_defaults_and_parse_go_durations() -> None:
    config = load(profile_yaml("v1", ""))
    assert (config.parallelism, config.pod_initial_backoff_seconds) == (16, 1)
    assert config.pod_max_backoff_seconds == 10
    election = config.leader_election
    assert (election.leader_elect, election.lease_duration, election.renew_deadline) == (
        True,
        15,
        10,
    )
    assert (election.resource_lock, election.resource_name) == ("leases", "gpu-scheduler")
    durations = "leaderElection: {leaseDuration: 1m30s, renewDeadline: 1500ms}\n"
    custom = load(profile_yaml("v1", "") + durations).leader_election
    assert (custom.lease_duration, custom.renew_deadline) == (90, 1.5)


def test_a_profile_percentage_overrides_the_top_level_one() -> None:
    text = profile_yaml("v1", "percentageOfNodesToScore: 10") + "- schedulerName: q\n"
    config = load(text + "percentageOfNodesToScore: 40\n")
    built = config.build_profiles()
    percentages = [built[name].percentage_of_nodes_to_score for name in ("p", "q")]
    assert percentages == [10, 40]


def test_one_scheduler_config_among_other_kinds_loads(caplog: pytest.LogCaptureFixture) -> None:
    text = "apiVersion: v1\nkind: ConfigMap\n---\n" + profile_yaml("v1", "")
    with caplog.at_level(logging.WARNING):
        config = load(text)
    assert config.profile("p").scheduler_name == "p"
    assert "count=1" in caplog.text


def test_default_config_takes_the_registry_and_defaults_it_is_given() -> None:
    config = default_config(REGISTRY, DEFAULTS)
    assert config.profiles[0].scheduler_name == "gpu-scheduler"
    assert config.profiles[0].describe()["filter"] == ["NodeUnschedulable", "NodeName", "Packing"]


# End to end: the configured profile drives a scheduling cycle.

E2E = profile_yaml(
    "v1",
    """\
    plugins:
      multiPoint: {enabled: [{name: GpuFilter}]}
      score: {enabled: [{name: Prefer, weight: 10}]}
    pluginConfig: [{name: Prefer, args: {value: silver}}]
""",
)


def test_a_configured_profile_places_the_pod_on_the_preferred_gpu_node() -> None:
    profile = load(E2E).build_profiles()["p"]
    snapshot = snapshot_of(
        [
            make_node("cordoned").label("gpu", "a100").label("tier", "silver").unschedulable(),
            make_node("cpu-only").label("tier", "silver"),
            make_node("gold").label("gpu", "a100").label("tier", "gold"),
            make_node("silver").label("gpu", "a100").label("tier", "silver"),
        ]
    )
    result = ProfileRunner(profile).schedule_one(make_pod("train").view(), snapshot)
    assert result.node_name == "silver"


def test_a_configured_profile_aggregates_the_reasons_no_node_fits() -> None:
    profile = load(E2E).build_profiles()["p"]
    snapshot = snapshot_of(
        [
            make_node("cordoned").label("gpu", "a100").unschedulable(),
            make_node("cpu-only"),
        ]
    )
    result = ProfileRunner(profile).schedule_one(make_pod("train").view(), snapshot)
    assert result.node_name is None
    assert result.message() == (
        "0/2 nodes are available: 1 node(s) had no GPU, 1 node(s) were unschedulable."
    )

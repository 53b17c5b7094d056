"""TopologyDomains: the cluster's topology levels as plugin args, read from pluginConfig."""

from __future__ import annotations

import textwrap

import pytest

from batchsched.config import ConfigError, load_config
from batchsched.framework.cycle_state import CycleState
from batchsched.framework.status import Code
from batchsched.gang.topology import DEFAULT_LEVELS, RACK_LABEL, ZONE_LABEL
from batchsched.plugins.topology_domains import TopologyDomains
from tests.builders import make_node, make_pod, snapshot_of


def configured(args: str) -> TopologyDomains:
    text = textwrap.dedent(
        """\
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        profiles:
        - schedulerName: gpu-scheduler
          pluginConfig:
          - name: TopologyDomains
            args: {args}
        """
    ).format(args=args)
    profile = load_config(text).build_profiles()["gpu-scheduler"]
    (plugin,) = [p for p in profile.pre_filter if isinstance(p, TopologyDomains)]
    return plugin


@pytest.mark.parametrize(
    ("args", "levels", "limit"),
    [
        pytest.param("{}", DEFAULT_LEVELS, 8, id="no args: the default levels and 8 per level"),
        pytest.param(
            f"{{levels: [{RACK_LABEL}, {ZONE_LABEL}], maxDomainsPerLevel: 3}}",
            (RACK_LABEL, ZONE_LABEL),
            3,
            id="levels as label keys",
        ),
        pytest.param(
            f"{{levels: [{{nodeLabel: {RACK_LABEL}}}, {{nodeLabel: {ZONE_LABEL}}}]}}",
            (RACK_LABEL, ZONE_LABEL),
            8,
            id="levels in Kueue's Topology shape",
        ),
    ],
)
def test_the_levels_and_the_bound_come_from_plugin_config(
    args: str, levels: tuple[str, ...], limit: int
) -> None:
    plugin = configured(args)
    assert plugin.levels.keys == levels and plugin.max_domains_per_level == limit


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(f"{{levels: [{RACK_LABEL}, {RACK_LABEL}]}}", "listed twice", id="a twin"),
        pytest.param("{levels: []}", "at least one topology level", id="no level"),
        pytest.param("{levels: [{label: x}]}", "nodeLabel: key", id="a Kueue level misspelt"),
        pytest.param("{maxDomainsPerLevel: 0}", "greater than or equal to 1", id="a zero bound"),
    ],
)
def test_bad_args_are_refused_naming_the_field(args: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        configured(args)
    assert "pluginConfig[0].args" in str(caught.value)


def test_its_prefilter_skips_every_pod() -> None:
    snapshot = snapshot_of([make_node("n")])
    result, status = TopologyDomains().pre_filter(CycleState(), make_pod().view(), snapshot)
    assert result is None and status.code is Code.SKIP

"""The example plugin's own tests: run from a checkout or after `pip install`."""

from __future__ import annotations

import pytest
from batchsched_example_plugin import SPEC
from pydantic import ValidationError

from batchsched.framework.cycle_state import CycleState
from batchsched.framework.interfaces import extension_points_of
from batchsched.model.node import NodeView
from batchsched.model.pod import parse_pod
from batchsched.model.resources import Resources
from batchsched.snapshot import NodeInfo


def node(labels: dict[str, str]) -> NodeInfo:
    view = NodeView("n", labels, {}, False, (), Resources(milli_cpu=1000), {})
    return NodeInfo(view)


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"example.com/pool": "reserved"}, 100),
        ({"example.com/pool": "spot"}, 0),
        ({}, 0),
    ],
    ids=["a node in a listed pool scores 100", "another pool scores 0", "no label scores 0"],
)
def test_a_node_scores_by_its_label(labels: dict[str, str], expected: int) -> None:
    plugin = SPEC.build({"key": "example.com/pool", "values": ["reserved"]})
    pod = parse_pod({"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": []}})
    assert plugin.score(CycleState(), pod, node(labels)) == expected  # type: ignore[attr-defined]


def test_the_plugin_is_a_score_plugin() -> None:
    assert extension_points_of(SPEC.build(None)) == ("score",)


def test_an_empty_values_list_is_rejected() -> None:
    with pytest.raises(ValidationError):
        SPEC.build({"values": []})

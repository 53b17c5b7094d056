"""bound_to: the snapshot's cheap copy of a pod with its node set."""

from __future__ import annotations

import dataclasses

from batchsched.model.pod import PodView, bound_to
from tests.builders import make_pod


def test_a_pod_bound_to_a_node_keeps_every_other_field_as_replace_would() -> None:
    pod = (
        make_pod("p", "ml")
        .cpu("2")
        .memory("1Gi")
        .gpus(1)
        .label("team", "a")
        .node_selector(zone="z1")
        .toleration("dedicated", "ml", "NoSchedule")
        .view()
    )
    bound = bound_to(pod, "n7")
    expected = dataclasses.replace(pod, node_name="n7")
    for f in dataclasses.fields(PodView):
        assert getattr(bound, f.name) == getattr(expected, f.name), f.name
    assert pod.node_name == ""  # the original is untouched

"""`place_pending` answers a pod equal to one that found no node without another cycle, while
nothing has been placed since; a placement makes every such pod be tried again."""

from __future__ import annotations

from batchsched.config import default_config
from batchsched.framework.profile import Profile
from batchsched.model.pod import PodView
from batchsched.whatif import place_pending
from tests.builders import make_node, make_pod


def profiles() -> dict[str, Profile]:
    return dict(default_config().build_profiles())


def near_db(name: str, created: str) -> PodView:
    term = {
        "labelSelector": {"matchLabels": {"app": "db"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    affinity = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    return make_pod(name).cpu("1").created(created).affinity("podAffinity", affinity).view()


def test_a_pod_equal_to_one_that_did_not_fit_is_tried_again_after_a_placement() -> None:
    """web-1 needs a db pod on its node and finds none; db is placed next; web-2, equal to
    web-1, must be tried again (a pod's fit can grow as pods are placed) and fits."""
    nodes = [make_node("n1").cpu("8").label("kubernetes.io/hostname", "n1").view()]
    pods = [
        near_db("web-1", "2026-01-01T00:00:00Z"),
        make_pod("db").cpu("1").label("app", "db").created("2026-01-01T00:00:01Z").view(),
        near_db("web-2", "2026-01-01T00:00:02Z"),
    ]
    result = place_pending(nodes, pods, profiles())
    assert result.order == ["default/web-1", "default/db", "default/web-2"]
    assert result.placements == {"default/web-1": None, "default/db": "n1", "default/web-2": "n1"}


def test_equal_pods_that_fit_nowhere_get_the_reason_the_first_got() -> None:
    nodes = [make_node(f"n{i}").cpu("2").view() for i in range(3)]
    pods = [make_pod(f"big-{i}").cpu("4").view() for i in range(5)]
    result = place_pending(nodes, pods, profiles())
    assert set(result.placements.values()) == {None}
    assert set(result.reasons.values()) == {"0/3 nodes are available: 3 Insufficient cpu."}

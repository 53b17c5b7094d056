"""DynamicResourcesGuard: pods with DRA claims are refused at PreFilter, never placed."""

from __future__ import annotations

from typing import Any, ClassVar, Final

import pytest

from batchsched.config import default_config, load_config
from batchsched.framework.cycle_state import CycleState
from batchsched.framework.profile import Profile
from batchsched.framework.runner import ProfileRunner
from batchsched.framework.status import OK, Code, Status
from batchsched.model.pod import PodView
from batchsched.plugins.dynamic_resources_guard import DynamicResourcesGuard, refusal
from batchsched.plugins.priority_sort import PrioritySort
from batchsched.snapshot import NodeInfo
from tests.builders import PodBuilder, make_node, make_pod, snapshot_of

SHARED: Final = {"name": "gpu", "resourceClaimName": "shared-gpu"}
FROM_TEMPLATE: Final = {"name": "scratch", "resourceClaimTemplateName": "one-gpu"}


def claiming(*claims: dict[str, Any], name: str = "p") -> PodBuilder:
    return make_pod(name).cpu("1").set("spec.resourceClaims", list(claims))


def test_a_pod_without_claims_passes() -> None:
    snapshot = snapshot_of([make_node("n1")])
    result, status = DynamicResourcesGuard().pre_filter(CycleState(), make_pod().view(), snapshot)
    assert (result, status) == (None, OK)


@pytest.mark.parametrize(
    ("claims", "named"),
    [
        ((SHARED,), "[gpu (ResourceClaim shared-gpu)]"),
        ((FROM_TEMPLATE,), "[scratch (ResourceClaimTemplate one-gpu)]"),
        (
            (SHARED, FROM_TEMPLATE),
            "[gpu (ResourceClaim shared-gpu), scratch (ResourceClaimTemplate one-gpu)]",
        ),
    ],
    ids=[
        "a pod with a claim of its own is refused, naming the claim",
        "a pod with a claim from a template is refused, naming the template",
        "a pod with several claims is refused, naming each in order",
    ],
)
def test_a_pod_with_claims_is_refused_as_unresolvable(
    claims: tuple[dict[str, Any], ...], named: str
) -> None:
    snapshot = snapshot_of([make_node("n1")])
    pod = claiming(*claims).view()
    result, status = DynamicResourcesGuard().pre_filter(CycleState(), pod, snapshot)
    assert result is None
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE  # preemption cannot help
    assert status.message() == (
        f"pod has Dynamic Resource Allocation claims {named}: this scheduler profile does not "
        "allocate DRA claims (DynamicResourcesGuard) and will not bind this pod; use a "
        "scheduler that does"
    )


class CountingFilter:
    """Counts the nodes it is asked about."""

    name: ClassVar[str] = "CountingFilter"

    def __init__(self) -> None:
        self.calls = 0

    def filter(self, state: CycleState, pod: PodView, node: NodeInfo) -> Status:
        self.calls += 1
        return OK


def test_a_refused_pod_is_not_filtered_against_any_node() -> None:
    counting = CountingFilter()
    profile = Profile(
        "gpu-scheduler", PrioritySort(), pre_filter=(DynamicResourcesGuard(),), filter=(counting,)
    )
    snapshot = snapshot_of([make_node(f"n{i}") for i in range(3)])
    result = ProfileRunner(profile).schedule_one(claiming(SHARED).view(), snapshot)
    assert result.node_name is None and counting.calls == 0
    assert ProfileRunner(profile).schedule_one(make_pod().view(), snapshot).placed
    assert counting.calls == 3


ENABLED = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: gpu-scheduler
  plugins:
    preFilter:
      enabled:
      - name: DynamicResourcesGuard
    multiPoint:
      disabled:
      - name: DynamicResources
"""


def test_enabled_instead_of_dynamic_resources_it_refuses_with_kube_schedulers_message_shape() -> (
    None
):
    profile = load_config(ENABLED).build_profiles()["gpu-scheduler"]
    assert "DynamicResourcesGuard" in profile.describe()["preFilter"]
    assert "DynamicResources" not in profile.describe()["preFilter"]
    snapshot = snapshot_of([make_node("n1").cpu("8"), make_node("n2").cpu("8")])
    pod = claiming(SHARED, FROM_TEMPLATE).view()
    result = ProfileRunner(profile).schedule_one(pod, snapshot)
    assert not result.placed and result.node_name is None
    assert result.message() == f"0/2 nodes are available: {refusal(pod)}."
    assert all(not info.pods for info in snapshot.nodes)  # nothing assumed


def test_the_default_profile_allocates_claims_instead_of_refusing_them() -> None:
    profile = default_config().build_profiles()["gpu-scheduler"]
    assert "DynamicResourcesGuard" not in profile.describe()["preFilter"]
    assert profile.describe()["preFilter"][-1] == "DynamicResources"

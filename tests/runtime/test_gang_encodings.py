"""The live gang bookkeeping for every encoding: Kueue groups described by their pods, groups
of each API kept apart by key, invalid groups remembered under their own key, and a
producer's queue naming the tenant."""

from __future__ import annotations

from batchsched.clock import FakeClock
from batchsched.gang.encodings import parse_volcano_pod_group
from batchsched.gang.podgroup import parse_pod_group
from batchsched.model.gang_ref import GangApi
from batchsched.model.pod import PodView
from batchsched.runtime.gangs import GangTracker
from batchsched.tenants import TenantLayer
from queues.model import QuotaPolicy, Tenant
from tests.builders import make_pod

KUEUE_LABEL = "kueue.x-k8s.io/pod-group-name"
KUEUE_COUNT = "kueue.x-k8s.io/pod-group-total-count"


def kueue_member(i: int, count: str = "3") -> PodView:
    return (
        make_pod(f"w-{i}", "ml")
        .label(KUEUE_LABEL, "g")
        .label("kueue.x-k8s.io/queue-name", "research")
        .annotation(KUEUE_COUNT, count)
        .view()
    )


def test_a_kueue_group_appears_with_its_first_member_and_goes_with_its_last() -> None:
    added: list[int] = []
    gangs = GangTracker(on_group_added=lambda: added.append(1))
    first, second = kueue_member(0), kueue_member(1)
    gangs.note_pod(first)
    gangs.note_pod(second)
    group = gangs.group("kueue:ml/g")
    assert group is not None and group.min_member == 3 and group.event_pod == "w-0"
    assert added == [1]  # waiting members are woken once, when the group becomes known
    gangs.forget_pod(first)
    assert gangs.group("kueue:ml/g") is not None
    gangs.forget_pod(second)
    assert gangs.group("kueue:ml/g") is None


def test_a_kueue_group_whose_size_is_unreadable_says_why_its_members_wait() -> None:
    gangs = GangTracker()
    gangs.note_pod(kueue_member(0, count="many"))
    assert gangs.group("kueue:ml/g") is None
    assert "pod-group-total-count" in gangs.missing_reason("kueue:ml/g")


def test_same_named_groups_of_two_apis_are_two_gangs() -> None:
    gangs = GangTracker()
    meta = {"name": "g", "namespace": "ml", "uid": "a"}
    gangs.on_add(parse_pod_group({"metadata": meta, "spec": {"minMember": 2}}))
    gangs.on_add(parse_volcano_pod_group({"metadata": {**meta, "uid": "b"}, "spec": {}}))
    sp, volcano = gangs.group("ml/g"), gangs.group("volcano:ml/g")
    assert sp is not None and sp.min_member == 2
    assert volcano is not None and volcano.min_member == 1


def test_an_invalid_volcano_group_is_remembered_under_its_own_key() -> None:
    gangs = GangTracker()
    raw = {"metadata": {"name": "g", "namespace": "ml"}, "spec": {"minMember": -1}}
    gangs.mark_invalid(raw, ValueError("spec.minMember: must be at least 0"), GangApi.VOLCANO)
    assert "invalid" in gangs.missing_reason("volcano:ml/g")
    assert "not found" in gangs.missing_reason("ml/g")


def test_a_volcano_queue_names_the_tenant_when_the_pod_has_no_queue_label() -> None:
    research = Tenant("research", queues=frozenset({"research"}))
    policy = QuotaPolicy({"research": research, "other": Tenant("other")}, default_tenant="other")
    gangs = GangTracker()
    group = {"metadata": {"name": "g", "namespace": "ml"}, "spec": {"queue": "research"}}
    gangs.on_add(parse_volcano_pod_group(group))
    layer = TenantLayer(policy, FakeClock(), lambda p: True)
    pod = make_pod("p", "ml").annotation("scheduling.k8s.io/group-name", "g").view()
    assert layer.tenant_of(pod) == "other"  # not wired: the namespace's (default) tenant
    layer.producer_queue = gangs.queue_of
    assert layer.tenant_of(pod) == "research"
    labelled = make_pod("q", "ml").annotation("scheduling.k8s.io/group-name", "g")
    assert layer.tenant_of(labelled.label("batchsched.io/queue", "nope").view()) == "other"

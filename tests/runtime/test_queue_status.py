"""A pending gang's place in line (runtime/queue_status.py): the order is the live queue's,
a gang counts once, the status line says reason, place and estimate, and only a change worth
telling is written again."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchsched.clock import FakeClock
from batchsched.framework.interfaces import QueuedPod
from batchsched.gang.status import NotStarted
from batchsched.model.pod import PodView
from batchsched.plugins.priority_sort import PrioritySort
from batchsched.runtime.queue import SchedulingQueue
from batchsched.runtime.queue_status import (
    QUEUED,
    UNSCHEDULABLE,
    WAITING_FOR_MEMBERS,
    Entry,
    Less,
    QueueStatus,
    differs,
    message,
    queue_order,
    queue_statuses,
)
from tests.builders import make_pod

LABEL = "batchsched.io/queue"
GANG = "scheduling.x-k8s.io/pod-group"
NOON = 1_700_049_600.0  # 2023-11-15 12:00:00Z


def tenant(pod: PodView) -> str:
    return pod.labels.get(LABEL, "")


def gang_of(pod: PodView) -> str:
    group = pod.labels.get(GANG)
    return f"default/{group}" if group else f"pod:{pod.key}"


def pod(name: str, created: int, priority: int = 0, team: str = "", gang: str = "") -> PodView:
    builder = make_pod(name).created(f"2023-11-15T10:{created // 60:02d}:{created % 60:02d}Z")
    builder = builder.set("spec.priority", priority)
    if team:
        builder = builder.label(LABEL, team)
    if gang:
        builder = builder.label(GANG, gang)
    return builder.view()


def queued(pods: list[PodView]) -> list[QueuedPod]:
    return [QueuedPod(p, p.creation_time, 0) for p in pods]


pods_strategy = st.lists(
    st.tuples(st.integers(0, 3), st.sampled_from(["a", "b", "c"])), min_size=1, max_size=25
)


def unkeyed(a: QueuedPod, b: QueuedPod) -> bool:
    """PrioritySort's order without its key: the order from `less` alone."""
    return PrioritySort().less(a, b)


@pytest.mark.parametrize("less", [PrioritySort().less, unkeyed], ids=["keyed", "less only"])
@given(pods_strategy, st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 5)))
def test_the_order_is_the_one_the_live_queue_pops_pods_in(
    less: Less, specs: list[tuple[int, str]], usage: dict[str, int]
) -> None:
    pods = [pod(f"p{i}", i, prio, team) for i, (prio, team) in enumerate(specs)]

    def rank(q: QueuedPod) -> tuple[tuple[int, float], ...]:
        return ((0, float(usage.get(tenant(q.pod), 0))),)

    clock = FakeClock(pods[0].creation_time)
    live = SchedulingQueue(less, clock, tenant_of=tenant, rank=rank)
    for p in pods:  # created in this order, as the informer delivers them
        clock.advance(p.creation_time - clock.now())
        live.add(p)
    popped = []
    while (next_pod := live.pop_ready()) is not None:
        popped.append(f"pod:{next_pod.pod.key}")
    order = queue_order(queued(pods), less, gang_of, tenant, rank)
    assert [e.key for e in order] == popped


def test_a_gang_is_one_entry_at_its_best_member_with_its_members_counted() -> None:
    pods = [
        pod("lone", 1),
        pod("g-0", 5, gang="g"),
        pod("g-1", 0, gang="g"),  # the gang's oldest member: the gang goes before "lone"
        pod("h-0", 2, gang="h"),
    ]
    order = queue_order(queued(pods), PrioritySort().less, gang_of, tenant)
    assert order == [
        Entry("default/g", "", 2),
        Entry("pod:default/lone", "", 1),
        Entry("default/h", "", 1),
    ]


def test_statuses_give_places_overall_and_per_tenant_and_why_each_gang_waits() -> None:
    order = [
        Entry("default/a", "team-a", 2),
        Entry("pod:default/x", "team-b", 1),
        Entry("default/b", "team-a", 4),
        Entry("default/c", "team-b", 2),
    ]
    held = {
        "default/b": NotStarted("0/4 nodes are available: 4 Insufficient nvidia.com/gpu"),
        "default/c": NotStarted("2/4 members exist", short_of_members=True),
    }
    statuses = queue_statuses(order, lambda key: not key.startswith("pod:"), held, {})
    assert set(statuses) == {"default/a", "default/b", "default/c"}  # a lone pod: no group
    assert statuses["default/a"] == QueueStatus(QUEUED, 1, 4, "team-a", 1, 2)
    b = statuses["default/b"]
    assert (b.reason, b.position, b.tenant_position, b.tenant_total) == (UNSCHEDULABLE, 3, 2, 2)
    assert b.detail.startswith("0/4 nodes are available")
    c = statuses["default/c"]
    assert (c.reason, c.position, c.tenant_position) == (WAITING_FOR_MEMBERS, 4, 2)


def test_a_published_estimate_is_carried_into_the_status() -> None:
    statuses = queue_statuses([Entry("default/a", "", 1)], lambda k: True, {}, {"default/a": NOON})
    assert statuses["default/a"].estimated_start == NOON


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        pytest.param(
            QueueStatus(QUEUED, 13, 40, "team-a", 3, 7, NOON + 5 * 60 + 10),
            "Queued: position 3 of 7 in tenant team-a, 12 ahead overall; estimated start 12:05Z",
            id="with tenants and an estimate",
        ),
        pytest.param(
            QueueStatus(QUEUED, 2, 5, "", 2, 5),
            "Queued: position 2 of 5",
            id="without tenants, no estimate",
        ),
        pytest.param(
            QueueStatus(UNSCHEDULABLE, 1, 1, "", 1, 1, NOON + 3 * 86400, "no room"),
            "Unschedulable: position 1 of 1; estimated start 2023-11-18 12:00Z; no room",
            id="an estimate days away names the day",
        ),
    ],
)
def test_the_status_line_reads_at_a_glance(status: QueueStatus, expected: str) -> None:
    assert message(status, NOON) == expected


def test_a_long_scheduler_message_is_kept_to_one_short_line() -> None:
    order = [Entry("default/a", "", 1)]
    why = NotStarted("0/900 nodes are available:\n" + "x " * 400)
    status = queue_statuses(order, lambda k: True, {"default/a": why}, {})["default/a"]
    assert "\n" not in status.detail and len(status.detail) <= 300


BASE = QueueStatus(QUEUED, 50, 200, "team-a", 20, 80, NOON, "")


@pytest.mark.parametrize(
    ("new", "worth"),
    [
        pytest.param(BASE, False, id="the same"),
        pytest.param(QueueStatus(QUEUED, 49, 199, "team-a", 20, 80, NOON + 20), False,
                     id="far back, one place and 20 s closer"),
        pytest.param(QueueStatus(QUEUED, 45, 200, "team-a", 20, 80, NOON), True,
                     id="far back, a tenth closer"),
        pytest.param(QueueStatus(QUEUED, 50, 200, "team-a", 20, 80, NOON + 90), True,
                     id="the estimate moved by more than a minute"),
        pytest.param(QueueStatus(QUEUED, 50, 200, "team-a", 20, 80, None), True,
                     id="the estimate went"),
        pytest.param(QueueStatus(UNSCHEDULABLE, 50, 200, "team-a", 20, 80, NOON, "no room"),
                     True, id="a new reason"),
        pytest.param(QueueStatus(QUEUED, 50, 200, "team-a", 20, 80, NOON, "other"), True,
                     id="a new message"),
    ],
)  # fmt: skip
def test_only_a_change_worth_telling_is_worth_a_write(new: QueueStatus, worth: bool) -> None:
    assert differs(BASE, new) is worth


def test_near_the_head_every_move_is_worth_a_write() -> None:
    near = QueueStatus(QUEUED, 3, 200, "", 3, 200)
    assert differs(near, QueueStatus(QUEUED, 2, 200, "", 2, 200))
    assert not differs(near, QueueStatus(QUEUED, 3, 201, "", 3, 201))  # only the total moved

"""The workload cycle: one pure decision per workload, with quota and backfill as policies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from batchsched.backfill import Running, vector
from batchsched.cycle.cycle import schedule_workload
from batchsched.cycle.decision import Bind, Reject, Wait, Why
from batchsched.cycle.policies import Admission, Holds, Placed
from batchsched.cycle.workload import Workload, pod_key
from batchsched.framework.registry import assemble_profile
from batchsched.framework.runner import ProfileRunner
from batchsched.gang.core import Reservation
from batchsched.model.pod import PodView
from batchsched.plugins.registry import DEFAULT_PLUGINS, default_registry
from batchsched.snapshot import Snapshot
from tests.builders import make_pod
from tests.gang.test_gang_core import gpu_nodes, group, members, used_gpus

PROFILE = assemble_profile(default_registry(), "gpu-scheduler", DEFAULT_PLUGINS, {})


@dataclass
class Quota:
    """Refuses before placement when `before`, and on any placement on `refused_nodes`."""

    before: str = ""
    refused_nodes: frozenset[str] = frozenset()

    def refuses(self, pods: Sequence[PodView]) -> str:
        return self.before

    def refuses_placed(self, placed: Placed) -> str:
        bad = sorted({node for _, node in placed if node in self.refused_nodes})
        return f"no GPUs of the model on {','.join(bad)}" if bad else ""


@dataclass
class Reservations:
    """Holds back anything that would start on `blocked_nodes`; records what it was asked."""

    blocked_nodes: frozenset[str] = frozenset()
    asked: list[tuple[str, int]] = field(default_factory=list)

    def starting(self, placed: Placed) -> list[Running]:
        return [Running(node, vector(pod.requests), None) for pod, node in placed]

    def held_back(self, key: str, priority: int, starting: Sequence[Running]) -> str:
        self.asked.append((key, priority))
        if any(r.node in self.blocked_nodes for r in starting):
            return "backfill: starting now would delay ml/big"
        return ""


@dataclass
class Handle:
    snapshot: Snapshot
    admission: Admission | None = None
    holds: Holds | None = None
    reservations: dict[str, tuple[Reservation, ...]] = field(default_factory=dict)

    def runner_for(self, pod: PodView) -> ProfileRunner:
        return ProfileRunner(PROFILE)

    def waiting(self) -> Mapping[str, Sequence[Reservation]]:
        return self.reservations


def lone(name: str, gpus: int = 1) -> Workload:
    pod = make_pod(name, "ml").gpus(gpus).view()
    return Workload(pod_key(pod), (pod,))


def gang(name: str, min_member: int, count: int, gpus: int = 8, bound: int = 0) -> Workload:
    return Workload(
        f"ml/{name}", members(name, count, gpus), gang=True, group=group(name, min_member),
        bound=bound,
    )  # fmt: skip


def test_a_lone_pod_that_fits_is_bound_and_counted_in_the_snapshot() -> None:
    snap = gpu_nodes(1)
    decision = schedule_workload(Handle(snap), lone("a", 2))
    assert isinstance(decision, Bind)
    assert [r.node for r in decision.placed] == ["g0"]
    assert used_gpus(snap) == 2


def test_a_lone_pod_that_does_not_fit_is_rejected_as_unschedulable_and_holds_nothing() -> None:
    snap = gpu_nodes(1)
    decision = schedule_workload(Handle(snap), lone("a", 16))
    assert isinstance(decision, Reject) and decision.why is Why.UNSCHEDULABLE
    assert "Insufficient nvidia.com/gpu" in decision.message
    assert used_gpus(snap) == 0


def test_quota_refusing_before_placement_tries_no_node() -> None:
    snap = gpu_nodes(1)
    decision = schedule_workload(Handle(snap, Quota(before="team-a is at its max")), lone("a"))
    assert decision == Reject(Why.QUOTA, "quota: team-a is at its max")
    assert used_gpus(snap) == 0


def test_quota_refusing_the_chosen_node_undoes_the_placement() -> None:
    snap = gpu_nodes(1)
    handle = Handle(snap, Quota(refused_nodes=frozenset({"g0"})))
    decision = schedule_workload(handle, lone("a"))
    assert isinstance(decision, Reject) and decision.why is Why.QUOTA_PLACED
    assert decision.message == "quota: no GPUs of the model on g0"
    assert used_gpus(snap) == 0 and snap.node_of("uid-a") is None


def test_a_placement_that_would_delay_a_reservation_is_held_back_and_undone() -> None:
    snap = gpu_nodes(1)
    holds = Reservations(blocked_nodes=frozenset({"g0"}))
    decision = schedule_workload(Handle(snap, holds=holds), lone("a"))
    assert isinstance(decision, Reject) and decision.why is Why.BACKFILL
    assert used_gpus(snap) == 0
    assert holds.asked == [("pod:ml/a", 0)]


def test_a_bind_says_what_starts_for_the_backfill_plan() -> None:
    decision = schedule_workload(Handle(gpu_nodes(1), holds=Reservations()), lone("a", 2))
    assert isinstance(decision, Bind)
    assert [(r.node, r.ends_at) for r in decision.starts] == [("g0", None)]


def test_a_complete_gang_that_fits_is_bound_whole() -> None:
    snap = gpu_nodes(4)
    decision = schedule_workload(Handle(snap), gang("train", 3, 3))
    assert isinstance(decision, Bind) and len(decision.placed) == 3
    assert used_gpus(snap) == 24


def test_a_gang_short_of_members_waits_with_the_ones_that_exist_reserved() -> None:
    snap = gpu_nodes(4)
    decision = schedule_workload(Handle(snap), gang("train", 3, 2))
    assert isinstance(decision, Wait) and len(decision.placed) == 2
    assert used_gpus(snap) == 16


def test_members_bound_before_count_toward_the_quorum() -> None:
    decision = schedule_workload(Handle(gpu_nodes(4)), gang("train", 3, 1, bound=2))
    assert isinstance(decision, Bind) and len(decision.placed) == 1


def test_a_gang_that_does_not_fit_holds_nothing() -> None:
    snap = gpu_nodes(2)
    decision = schedule_workload(Handle(snap), gang("big", 3, 3))
    assert isinstance(decision, Reject) and decision.why is Why.UNSCHEDULABLE
    assert used_gpus(snap) == 0


def test_a_gang_held_back_by_a_reservation_leaves_nothing_reserved() -> None:
    snap = gpu_nodes(4)
    holds = Reservations(blocked_nodes=frozenset({"g1"}))
    decision = schedule_workload(Handle(snap, holds=holds), gang("train", 3, 3))
    assert isinstance(decision, Reject) and decision.why is Why.BACKFILL
    assert used_gpus(snap) == 0
    assert holds.asked == [("ml/train", 0)]


def test_a_gang_member_without_its_podgroup_waits_and_no_node_is_tried() -> None:
    pod = members("lost", 1)[0]
    workload = Workload("ml/lost", (pod,), gang=True, missing="PodGroup ml/lost not found")
    snap = gpu_nodes(1)
    decision = schedule_workload(Handle(snap), workload)
    assert decision == Reject(Why.NO_GROUP, "PodGroup ml/lost not found")
    assert used_gpus(snap) == 0


def test_a_complete_gang_takes_the_capacity_a_waiting_gang_reserved() -> None:
    snap = gpu_nodes(2)
    handle = Handle(snap)
    waiting = schedule_workload(handle, gang("early", 3, 2))
    assert isinstance(waiting, Wait)
    handle.reservations["ml/early"] = waiting.placed
    decision = schedule_workload(handle, gang("late", 2, 2))
    assert isinstance(decision, Bind) and decision.released == ("ml/early",)
    assert used_gpus(snap) == 16


CLAIM = {"name": "gpu", "resourceClaimName": "shared-gpu"}


def test_a_pod_no_eviction_could_help_is_rejected_as_unresolvable() -> None:
    # A claim that does not exist fails DynamicResources' PreFilter: UnschedulableAndUnresolvable.
    pod = make_pod("dra", "ml").gpus(1).set("spec.resourceClaims", [CLAIM]).view()
    decision = schedule_workload(Handle(gpu_nodes(1)), Workload(pod_key(pod), (pod,)))
    assert isinstance(decision, Reject) and decision.why is Why.UNRESOLVABLE


def test_a_gang_with_a_member_no_eviction_could_help_is_unresolvable_as_a_whole() -> None:
    first, second = members("train", 2)
    claimed = make_pod("train-9", "ml").gpus(8).label("scheduling.x-k8s.io/pod-group", "train")
    pods = (first, second, claimed.set("spec.resourceClaims", [CLAIM]).view())
    workload = Workload("ml/train", pods, gang=True, group=group("train", 3))
    snap = gpu_nodes(4)
    decision = schedule_workload(Handle(snap), workload)
    assert isinstance(decision, Reject) and decision.why is Why.UNRESOLVABLE
    assert used_gpus(snap) == 0


def test_a_gang_short_of_members_that_does_not_fit_is_incomplete_not_preemptible() -> None:
    workload = Workload(
        "ml/big", members("big", 2, gpus=8), gang=True, group=group("big", 3), known_members=2
    )
    decision = schedule_workload(Handle(gpu_nodes(1)), workload)
    assert isinstance(decision, Reject) and decision.why is Why.INCOMPLETE


def test_a_complete_gang_that_does_not_fit_may_preempt() -> None:
    workload = Workload(
        "ml/big", members("big", 3, gpus=8), gang=True, group=group("big", 3), known_members=3
    )
    decision = schedule_workload(Handle(gpu_nodes(1)), workload)
    assert isinstance(decision, Reject) and decision.why is Why.UNSCHEDULABLE


@dataclass
class Nominating(Handle):
    """A handle that knows preemptors' nominated nodes, as the live one does."""

    nominated: dict[str, str] = field(default_factory=dict)

    def nominated_node(self, pod: PodView) -> str | None:
        return self.nominated.get(pod.uid)


def test_a_preemptor_is_placed_on_its_nominated_node_alone_when_it_fits_there() -> None:
    snap = gpu_nodes(3)  # every node fits; the usual pass picks g1 here
    work = lone("a", 2)
    decision = schedule_workload(Nominating(snap, nominated={work.pods[0].uid: "g2"}), work)
    assert isinstance(decision, Bind)
    assert [r.node for r in decision.placed] == ["g2"]
    assert decision.results[work.pods[0].uid].evaluated_nodes == 1  # no pass over the rest


def test_a_preemptor_that_no_longer_fits_its_nominated_node_gets_the_usual_pass() -> None:
    snap = gpu_nodes(3)
    taken = make_pod("other", "ml").gpus(8).node("g2").view()
    snap.assume(taken, "g2")
    work = lone("a", 2)
    decision = schedule_workload(Nominating(snap, nominated={work.pods[0].uid: "g2"}), work)
    assert isinstance(decision, Bind)
    assert [r.node for r in decision.placed] in (["g0"], ["g1"])
    assert decision.results[work.pods[0].uid].evaluated_nodes == 3

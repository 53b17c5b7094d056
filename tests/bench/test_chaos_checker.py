"""The chaos checker must be able to fail: synthetic event sequences with a violation of each
kind are reported, and the legitimate look-alikes (a preemption victim with its Event, a pod
the bench deleted, a gang that finished member by member) are not."""

from __future__ import annotations

from typing import Any

import pytest

from batchsched.bench.chaos_audit import AuditCheck, AuditRecord, parse_record
from batchsched.bench.chaos_checker import Checker
from batchsched.bench.chaos_faults import plan_faults
from batchsched.bench.chaos_workload import WorkloadShape, make_workload, member_body


def node(name: str, gpus: int = 8) -> dict[str, Any]:
    amounts = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {"metadata": {"name": name}, "status": {"allocatable": amounts}}


def pod(
    name: str,
    *,
    uid: str | None = None,
    node_name: str = "",
    phase: str = "Pending",
    gpus: int = 1,
    gang: str | None = None,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid or f"uid-{name}"}
    if gang:
        meta["labels"] = {"scheduling.x-k8s.io/pod-group": gang}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    container = {"name": "c", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": gpus}}}
    spec: dict[str, Any] = {"containers": [container]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def group(name: str, min_member: int, timeout: int = 10) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"minMember": min_member, "scheduleTimeoutSeconds": timeout},
    }


def preempted_event(uid: str) -> dict[str, Any]:
    return {
        "reason": "Preempted",
        "reportingController": "gpu-scheduler",
        "regarding": {"kind": "Pod", "uid": uid},
    }


def kinds(checker: Checker) -> list[str]:
    return [v.kind for v in checker.violations]


@pytest.fixture
def checker() -> Checker:
    c = Checker(slack_s=5.0, event_grace_s=10.0)
    c.node_event("ADDED", node("n1"), 0.0)
    return c


def test_nine_gpus_bound_to_an_eight_gpu_node_is_an_over_commit(checker: Checker) -> None:
    checker.pod_event("ADDED", pod("a", node_name="n1", phase="Running", gpus=8), 1.0)
    checker.pod_event("ADDED", pod("b", node_name="n1", gpus=1), 2.0)
    assert kinds(checker) == ["over-commit"]
    assert "nvidia.com/gpu 9 > 8" in checker.violations[0].detail


def test_an_over_commit_is_reported_once_while_it_lasts(checker: Checker) -> None:
    checker.pod_event("ADDED", pod("a", node_name="n1", phase="Running", gpus=8), 1.0)
    checker.pod_event("ADDED", pod("b", node_name="n1", gpus=8), 2.0)
    checker.pod_event("MODIFIED", pod("b", node_name="n1", phase="Running", gpus=8), 3.0)
    assert kinds(checker) == ["over-commit"]
    checker.pod_event("MODIFIED", pod("b", node_name="n1", phase="Succeeded", gpus=8), 4.0)
    checker.pod_event("ADDED", pod("c", node_name="n1", gpus=1), 5.0)
    assert kinds(checker) == ["over-commit", "over-commit"]


def test_room_freed_by_a_finished_pod_is_not_an_over_commit(checker: Checker) -> None:
    checker.pod_event("ADDED", pod("a", node_name="n1", phase="Running", gpus=8), 1.0)
    checker.pod_event("MODIFIED", pod("a", node_name="n1", phase="Succeeded", gpus=8), 2.0)
    checker.pod_event("ADDED", pod("b", node_name="n1", gpus=8), 3.0)
    assert kinds(checker) == []


def test_a_terminating_pod_still_holds_its_gpus(checker: Checker) -> None:
    running = pod("a", node_name="n1", phase="Running", gpus=8)
    checker.pod_event("ADDED", running, 1.0)
    checker.pod_event(
        "MODIFIED", pod("a", node_name="n1", phase="Running", gpus=8, deleting=True), 2.0
    )
    checker.pod_event("ADDED", pod("b", node_name="n1", gpus=8), 3.0)
    assert "over-commit" in kinds(checker)


def test_a_relist_is_judged_whole_not_pod_by_pod(checker: Checker) -> None:
    checker.pod_event("ADDED", pod("a", node_name="n1", phase="Running", gpus=8), 1.0)
    # While the watch was down a finished and b took its GPUs; the list may name b first.
    b = pod("b", node_name="n1", phase="Running", gpus=8)
    checker.pods_relisted([b, pod("a", node_name="n1", phase="Succeeded", gpus=8)], 2.0)
    assert kinds(checker) == []
    c = pod("c", node_name="n1", phase="Running", gpus=1)
    checker.pods_relisted([b, c], 3.0)
    assert kinds(checker) == ["over-commit"]


def test_a_running_pod_deleted_without_a_preempted_event_is_reported(checker: Checker) -> None:
    running = pod("a", node_name="n1", phase="Running")
    checker.pod_event("ADDED", running, 1.0)
    checker.pod_event("DELETED", running, 2.0)
    checker.tick(5.0)
    assert kinds(checker) == []  # the Event may still come
    checker.tick(13.0)
    assert kinds(checker) == ["running-pod-deleted"]
    assert checker.violations[0].subject == "ns/a"


def test_a_victim_announced_by_the_scheduler_is_not_reported(checker: Checker) -> None:
    running = pod("a", node_name="n1", phase="Running")
    checker.pod_event("ADDED", running, 1.0)
    checker.pod_event("MODIFIED", pod("a", node_name="n1", phase="Running", deleting=True), 2.0)
    checker.event_seen(preempted_event("uid-a"), 3.0)  # posted after the eviction
    checker.finish(100.0)
    assert kinds(checker) == []
    assert checker.announced_victims == {"uid-a"}


def test_a_preempted_event_from_someone_else_does_not_excuse_a_deletion(checker: Checker) -> None:
    running = pod("a", node_name="n1", phase="Running")
    checker.pod_event("ADDED", running, 1.0)
    checker.pod_event("DELETED", running, 2.0)
    checker.event_seen({**preempted_event("uid-a"), "reportingController": "other"}, 3.0)
    checker.finish(4.0)
    assert kinds(checker) == ["running-pod-deleted"]


def test_a_pod_the_bench_deleted_is_not_reported(checker: Checker) -> None:
    running = pod("a", node_name="n1", phase="Running")
    checker.pod_event("ADDED", running, 1.0)
    checker.deleted_by_bench("uid-a")
    checker.pod_event("DELETED", running, 2.0)
    checker.finish(100.0)
    assert kinds(checker) == []


def test_a_pod_that_vanished_while_the_watch_was_down_is_caught_on_relist(
    checker: Checker,
) -> None:
    checker.pod_event("ADDED", pod("a", node_name="n1", phase="Running"), 1.0)
    checker.pods_relisted([], 2.0)
    checker.finish(3.0)
    assert kinds(checker) == ["running-pod-deleted"]


def test_a_node_name_that_changes_for_the_same_uid_is_bound_twice(checker: Checker) -> None:
    checker.node_event("ADDED", node("n2"), 0.0)
    checker.pod_event("ADDED", pod("a", node_name="n1"), 1.0)
    checker.pod_event("MODIFIED", pod("a", node_name="n2"), 2.0)
    assert kinds(checker) == ["bound-twice"]


def test_a_gang_left_partly_bound_past_its_timeout_is_reported(checker: Checker) -> None:
    checker.group_event("ADDED", group("g", 3, timeout=10))
    checker.pod_event("ADDED", pod("g-0", node_name="n1", gang="g"), 1.0)
    checker.pod_event("ADDED", pod("g-1", gang="g"), 1.0)
    checker.pod_event("ADDED", pod("g-2", gang="g"), 1.0)
    checker.tick(15.0)
    assert kinds(checker) == []  # within timeout + slack
    checker.tick(17.0)
    assert kinds(checker) == ["partial-gang"]
    checker.tick(30.0)
    assert kinds(checker) == ["partial-gang"]  # once per episode


def test_a_gang_whose_members_finish_one_by_one_is_not_partial(checker: Checker) -> None:
    checker.group_event("ADDED", group("g", 2, timeout=1))
    for i in range(2):
        checker.pod_event("ADDED", pod(f"g-{i}", node_name="n1", phase="Running", gang="g"), 1.0)
    checker.pod_event("MODIFIED", pod("g-0", node_name="n1", phase="Succeeded", gang="g"), 2.0)
    checker.tick(60.0)
    assert kinds(checker) == []


def test_a_gang_preempted_only_in_part_is_partial(checker: Checker) -> None:
    checker.group_event("ADDED", group("g", 2, timeout=1))
    for i in range(2):
        checker.pod_event("ADDED", pod(f"g-{i}", node_name="n1", phase="Running", gang="g"), 1.0)
    victim = pod("g-0", node_name="n1", phase="Running", gang="g")
    checker.event_seen(preempted_event("uid-g-0"), 2.0)
    checker.pod_event("DELETED", victim, 2.0)
    checker.tick(60.0)
    assert kinds(checker) == ["partial-gang"]


def test_a_gang_the_bench_broke_is_exempt_until_whole_again(checker: Checker) -> None:
    checker.group_event("ADDED", group("g", 2, timeout=1))
    for i in range(2):
        checker.pod_event("ADDED", pod(f"g-{i}", node_name="n1", phase="Running", gang="g"), 1.0)
    checker.deleted_by_bench("uid-g-0")
    checker.pod_event("DELETED", pod("g-0", node_name="n1", phase="Running", gang="g"), 2.0)
    checker.pod_event("ADDED", pod("g-0", uid="uid-g-0b", gang="g"), 2.5)
    checker.tick(60.0)
    assert kinds(checker) == []
    checker.pod_event("MODIFIED", pod("g-0", uid="uid-g-0b", node_name="n1", gang="g"), 61.0)
    assert checker.gangs["ns/g"].bench_degraded is False


def test_a_gang_that_never_finished_is_reported_at_the_end(checker: Checker) -> None:
    checker.expect_gang("ns/g", ["g-0", "g-1"], 2, may_fail=False)
    checker.pod_event("ADDED", pod("g-0", node_name="n1", phase="Succeeded", gang="g"), 1.0)
    checker.pod_event("ADDED", pod("g-1", node_name="n1", phase="Failed", gang="g"), 1.0)
    checker.finish(10.0)
    assert kinds(checker) == ["gang-unfinished"]


def test_a_member_that_succeeded_and_was_deleted_still_counts(checker: Checker) -> None:
    checker.expect_gang("ns/g", ["g-0"], 1, may_fail=False)
    done = pod("g-0", node_name="n1", phase="Succeeded", gang="g", deleting=True)
    checker.pod_event("ADDED", done, 1.0)
    checker.pod_event("DELETED", done, 2.0)
    checker.finish(10.0)
    assert kinds(checker) == []


def test_a_member_killed_in_its_grace_period_is_not_done(checker: Checker) -> None:
    checker.expect_gang("ns/g", ["g-0"], 1, may_fail=False)
    killed = pod("g-0", node_name="n1", phase="Failed", gang="g", deleting=True)
    checker.pod_event("ADDED", killed, 1.0)
    checker.pod_event("DELETED", killed, 2.0)
    checker.finish(10.0)
    assert kinds(checker) == ["gang-unfinished"]


def test_a_gang_meant_to_fail_only_has_to_end(checker: Checker) -> None:
    checker.expect_gang("ns/g", ["g-0", "g-1"], 2, may_fail=True)
    checker.pod_event("ADDED", pod("g-0", node_name="n1", phase="Succeeded", gang="g"), 1.0)
    checker.pod_event("ADDED", pod("g-1", node_name="n1", phase="Failed", gang="g"), 1.0)
    checker.finish(10.0)
    assert kinds(checker) == []


def record(
    at: float, user: str, verb: str, resource: str, name: str, code: int = 200
) -> AuditRecord:
    return AuditRecord(at, f"batchsched-{user}", verb, resource, "ns", name, code)


def test_a_write_by_the_replica_not_holding_the_lease_is_a_standby_write() -> None:
    audit = AuditCheck("gpu-scheduler", 15.0)
    audit.feed(
        [
            record(1.0, "replica-a-1", "update", "leases", "gpu-scheduler"),
            record(2.0, "replica-a-1", "create", "pods/binding", "p"),
            record(2.5, "replica-b-1", "update", "leases", "gpu-scheduler", code=409),
            record(3.0, "replica-b-1", "create", "events", "e"),
        ]
    )
    assert [(r.user, kind, why) for r, kind, why in audit.standby_writes] == [
        ("batchsched-replica-b-1", "standby-write", "the Lease was held by batchsched-replica-a-1")
    ]
    assert audit.bindings == {"ns/p": 1}


def test_a_leader_writing_after_its_lease_ran_out_is_reported() -> None:
    audit = AuditCheck("gpu-scheduler", 15.0)
    audit.feed(
        [
            record(1.0, "replica-a-1", "update", "leases", "gpu-scheduler"),
            record(20.0, "replica-a-1", "create", "pods/binding", "p"),
        ]
    )
    [(_, kind, why)] = audit.standby_writes
    assert kind == "expired-lease-write"
    assert "last Lease write was 19.0s earlier" in why


def test_the_bench_s_own_writes_are_not_a_replica_s() -> None:
    audit = AuditCheck("gpu-scheduler", 15.0)
    audit.feed([AuditRecord(1.0, "batchsched-admin", "delete", "pods", "ns", "p", 200)])
    assert audit.standby_writes == []
    assert audit.deleters["ns/p"][0].user == "batchsched-admin"


def test_an_audit_line_parses_into_who_did_what() -> None:
    line = (
        '{"kind":"Event","stage":"ResponseComplete","verb":"create",'
        '"user":{"username":"batchsched-replica-a-1"},'
        '"objectRef":{"resource":"pods","namespace":"ns","name":"p","subresource":"binding"},'
        '"responseStatus":{"code":201},"requestReceivedTimestamp":"2026-01-01T00:00:01.500000Z"}'
    )
    r = parse_record(line)
    assert r is not None
    assert (r.user, r.verb, r.resource, r.name, r.code) == (
        "batchsched-replica-a-1", "create", "pods/binding", "p", 201,
    )  # fmt: skip
    assert r.at == pytest.approx(1767225601.5)


def test_the_workload_is_the_same_for_a_seed_and_every_gang_fits() -> None:
    shape = WorkloadShape(nodes=20, gangs=50, duration_s=100, seed=7)
    gangs = make_workload(shape)
    assert gangs == make_workload(shape)
    assert all(1 <= g.size <= 64 and g.gpus <= 80 for g in gangs)
    body = member_body(gangs[0], 0)
    assert body["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == gangs[0].name  # type: ignore[index]


def test_the_fault_plan_spreads_every_fault_over_the_window() -> None:
    plan = plan_faults({"leader-kill": 3, "watch-cut": 2}, 10.0, 60.0, seed=1)
    assert sorted(f.kind for f in plan) == ["leader-kill"] * 3 + ["watch-cut"] * 2
    assert all(10.0 <= f.at_s <= 60.0 for f in plan)
    assert [f.at_s for f in plan] == sorted(f.at_s for f in plan)


def test_a_running_pod_deleted_by_someone_else_is_not_the_scheduler_s_violation() -> None:
    """KWOK v0.8 deletes by name: it hit same-named successors of pods it was finishing."""
    from types import SimpleNamespace

    from batchsched.bench.chaos_audit import AuditRecord
    from batchsched.bench.chaos_checker import Violation
    from batchsched.bench.chaos_report import OTHERS_DELETED, with_evidence

    def record(at: float, user: str, verb: str) -> AuditRecord:
        return AuditRecord(at, user, verb, "pods", "ns", "g-0", 201, "agent")

    deleters = {
        "ns/g-0": [
            record(100.0, "batchsched-replica-a-1", "create"),  # the eviction of the old pod
            record(110.0, "batchsched-admin", "delete"),  # KWOK, after the successor came
        ]
    }
    audit = SimpleNamespace(deleters=deleters)
    by_kwok = Violation("running-pod-deleted", 110.5, "ns/g-0", "successor deleted")
    by_us = Violation("running-pod-deleted", 100.2, "ns/g-0", "old pod evicted")
    kinds = [v.kind for v in with_evidence([by_kwok, by_us], audit)]  # type: ignore[arg-type]
    assert kinds == [OTHERS_DELETED, "running-pod-deleted"]

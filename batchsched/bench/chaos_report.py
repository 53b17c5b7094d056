"""What the chaos soak prints: completion, faults, invariant violations, failover and
recovery times. Purely computational over what the run recorded."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Final

from batchsched.bench.chaos_audit import (
    REPLICA_PREFIX,
    AuditCheck,
    describe_deleters,
    last_deleter,
)
from batchsched.bench.chaos_checker import Checker, Violation
from batchsched.bench.chaos_faults import KINDS, FaultRecord
from batchsched.bench.chaos_pods import clock
from batchsched.bench.chaos_watch import LeaseHistory
from batchsched.bench.e2e_watch import percentile

# Not an invariant violation: a running pod deleted by a request that was not the scheduler's.
OTHERS_DELETED: Final = "deleted-by-others"

INVARIANTS = (
    "over-commit",
    "partial-gang",
    "running-pod-deleted",
    "bound-twice",
    "double-binding",
    "standby-write",
    "expired-lease-write",
    "gang-unfinished",
)
_DETAILS_PER_KIND = 10


@dataclass
class ChaosResult:
    gangs_total: int
    gangs_completed: int  # all members Succeeded
    gangs_expected_to_fail: int
    gangs_failed_as_planned: int  # a member failed as the bench asked, all members ended
    pods_created: int
    faults: dict[str, int]
    faults_skipped: dict[str, int]
    violations: dict[str, int]
    failover_lease_s: list[float]  # leader killed -> next holder's acquireTime
    failover_binding_s: list[float]  # leader killed -> next pod seen bound
    recovery_s: dict[str, list[float]]  # fault kind -> next pod seen bound after it
    recreated_bound_s: list[float]  # bench-deleted member -> its next incarnation bound
    apiserver_downtime_s: list[float]
    wall_s: float
    audit: bool  # standby writes checked from the audit log
    writes_by_replica: dict[str, int] = field(default_factory=dict)
    replica_incarnations: int = 0
    replica_self_exits: int = 0
    scheduler_watch_expiries: int = 0  # "watch expired ... relisting" in replica logs
    checker_relists: int = 0
    preempted_victims: int = 0
    members_recreated: int = 0  # by the operator, after a victim or a deleted member went
    replica_crashes: list[str] = field(default_factory=list)  # ended on an error, not a lost Lease
    details: list[dict[str, object]] = field(default_factory=list)

    def ok(self) -> bool:
        return not any(n for k, n in self.violations.items() if k != OTHERS_DELETED)


def audit_violations(audit: AuditCheck, checker: Checker) -> list[Violation]:
    """Standby writes, and pods bound more often than they had incarnations."""
    out = [
        Violation(kind, r.at, r.user, f"{r.describe()}: {why}")
        for r, kind, why in audit.standby_writes
    ]
    for key, count in sorted(audit.bindings.items()):
        uids = len(checker.names_seen.get(key, ()))
        if count > uids:
            out.append(
                Violation("double-binding", 0.0, key, f"{count} Bindings for {uids} incarnation(s)")
            )
    return out


def with_evidence(violations: Iterable[Violation], audit: AuditCheck | None) -> list[Violation]:
    """A deleted running pod: who asked the API server to delete or evict it (audit log).
    When the last such request before the deletion was seen came from something other than
    a scheduler replica (KWOK v0.8 deletes by name and so hits a same-named successor of a
    pod it was finishing), the pod is not the scheduler's doing: its kind becomes
    `deleted-by-others`, reported, and not a violation of the scheduler's invariant."""
    out = []
    for v in violations:
        if v.kind == "running-pod-deleted" and audit is not None:
            who = describe_deleters(audit.deleters, v.subject, v.at)
            kind = v.kind
            last = last_deleter(audit.deleters, v.subject, v.at)
            if last is not None and not last.user.startswith(REPLICA_PREFIX):
                kind = OTHERS_DELETED
            v = Violation(kind, v.at, v.subject, f"{v.detail}; requests: {who}")
        out.append(v)
    return out


def failovers(
    records: Sequence[FaultRecord], leases: LeaseHistory, checker: Checker
) -> tuple[list[float], list[float]]:
    by_lease, by_binding = [], []
    for r in records:
        if r.kind != "leader-kill" or not r.injected:
            continue
        nxt = leases.next_holder(r.at, r.subject)
        if nxt is not None:
            by_lease.append(nxt.acquired - r.at)
        bound = checker.first_binding_after(r.at)
        if bound is not None:
            by_binding.append(bound - r.at)
    return by_lease, by_binding


def recoveries(records: Sequence[FaultRecord], checker: Checker) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in records:
        bound = checker.first_binding_after(r.at) if r.injected else None
        if bound is not None:
            out.setdefault(r.kind, []).append(bound - r.at)
    return out


def recreated_bound(records: Sequence[FaultRecord], checker: Checker) -> list[float]:
    """For each member the bench deleted: from the deletion to its next incarnation (same
    name, first seen after the deletion) seen bound."""
    out = []
    for r in records:
        if not r.kind.startswith("recreate") or not r.injected:
            continue
        later = [
            u for u in checker.names_seen.get(r.subject, ()) if checker.seen_at.get(u, 0) > r.at
        ]
        bound = [checker.bound_at[u] for u in later if u in checker.bound_at]
        if bound:
            out.append(min(bound) - r.at)
    return out


def _stat(values: Sequence[float]) -> str:
    if not values:
        return "n/a"
    return (
        f"p50 {percentile(values, 50):.2f}s  p99 {percentile(values, 99):.2f}s  "
        f"max {max(values):.2f}s  (n={len(values)})"
    )


def render(result: ChaosResult, violations: Sequence[Violation], t0: float) -> str:
    r = result
    lines = [
        "",
        f"gangs completed: {r.gangs_completed}/{r.gangs_total - r.gangs_expected_to_fail} "
        f"(+ {r.gangs_failed_as_planned}/{r.gangs_expected_to_fail} with a member failed on "
        f"purpose, ended); pods created {r.pods_created}",
        "faults injected: "
        + ", ".join(f"{k} {r.faults.get(k, 0)}" for k in KINDS)
        + (f" (skipped: {r.faults_skipped})" if r.faults_skipped else ""),
        "invariant violations: " + ", ".join(f"{k} {r.violations.get(k, 0)}" for k in INVARIANTS),
        "running pods deleted by others than the scheduler (KWOK, by name): "
        f"{r.violations.get(OTHERS_DELETED, 0)}",
    ]
    if not r.audit:
        lines.append(
            "  standby-write, expired-lease-write and double-binding NOT checked: no audit log "
            "(only a control plane the bench starts has one)"
        )
    lines += [
        f"failover (leader SIGKILL -> next holder acquires the Lease): {_stat(r.failover_lease_s)}",
        f"failover (leader SIGKILL -> next pod bound): {_stat(r.failover_binding_s)}",
        "time to the next binding after each fault:",
        *(f"  {k:<18} {_stat(r.recovery_s.get(k, []))}" for k in KINDS),
        f"  deleted member bound again (new uid): {_stat(r.recreated_bound_s)}",
        f"kube-apiserver down per restart: {_stat(r.apiserver_downtime_s)}",
        f"replicas: {r.replica_incarnations} processes, {r.replica_self_exits} exited by "
        f"themselves; writes by each (audit): {r.writes_by_replica or 'n/a'}",
        f"scheduler informers relisted after 410: {r.scheduler_watch_expiries}; "
        f"checker relists: {r.checker_relists}; preemption victims announced: "
        f"{r.preempted_victims}; members created again by the operator: {r.members_recreated}",
        f"wall time: {r.wall_s:.0f}s",
        *(f"REPLICA CRASH {crash}" for crash in r.replica_crashes),
    ]
    shown: dict[str, int] = {}
    for v in sorted(violations, key=lambda v: (v.kind, v.at)):
        shown[v.kind] = shown.get(v.kind, 0) + 1
        if shown[v.kind] <= _DETAILS_PER_KIND:
            when = f"t={v.at - t0:+.1f}s ({clock(v.at)} UTC)" if v.at else "at the end"
            lines.append(f"VIOLATION {v.kind} {when} {v.subject}: {v.detail}")
    for kind, n in shown.items():
        if n > _DETAILS_PER_KIND:
            lines.append(f"... and {n - _DETAILS_PER_KIND} more {kind}")
    return "\n".join(lines)


def to_json(result: ChaosResult) -> dict[str, object]:
    return asdict(result)

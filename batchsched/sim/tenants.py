"""`batchsched simulate --quota`: the tenant layer on the virtual clock.

The simulator drives the live scheduler's `TenantLayer` (batchsched/tenants.py), as
`batchsched place --quota` does: the same quota admission (the cycle asks it before and after
placement), the same fair-share order between tenants' queues, the same usage and decayed
history, here on a clock that stands at each instant of the run. Usage follows the run: the
pods bound before the clock starts, each placement, each departure.

It also keeps what a reader of the results asks about tenants: how many of each tenant's pods
arrived, were placed, and were held by quota at least once (and how often), their waits, and
the GPUs each tenant held at the end and at most.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from batchsched.clock import FakeClock
from batchsched.framework.interfaces import QueuedPod
from batchsched.model.pod import PodView
from batchsched.snapshot import Snapshot
from batchsched.tenants import UNMATCHED, TenantLayer
from queues.fairshare import RankKey
from queues.model import GPU, MILLI_PER_GPU, QuotaPolicy

NO_TENANT = "<none>"  # how the results name pods of no tenant


@dataclass
class TenantStats:
    arrived: int = 0
    placed: int = 0
    held: set[str] = field(default_factory=set)  # uids refused by quota at least once
    refusals: int = 0  # cycles that ended in a quota refusal
    waits: list[float] = field(default_factory=list)  # of the pods placed
    gpus_peak: float = 0.0


class SimTenants:
    def __init__(
        self,
        policy: QuotaPolicy,
        scheduler_name: str,
        snapshot: Snapshot,
        running: Sequence[PodView] = (),
    ) -> None:
        # Usage history starts at the virtual clock's 0, as the run does.
        self.clock = FakeClock(0.0, 0.0)
        self.layer = TenantLayer(
            policy, self.clock, lambda pod: pod.scheduler_name == scheduler_name
        )
        self.layer.attach(snapshot)
        self.stats: dict[str, TenantStats] = {name: TenantStats() for name in policy.tenants}
        for pod in running:
            self.layer.counted(pod)
        self._note_peaks()

    @property
    def policy(self) -> QuotaPolicy:
        return self.layer.policy

    def at(self, now: float) -> None:
        """The virtual clock reached `now` (it only moves forward)."""
        if now > self.clock.now():
            self.clock.advance(now - self.clock.now())

    def name(self, pod: PodView) -> str:
        tenant = self.layer.tenant_of(pod)
        return NO_TENANT if tenant == UNMATCHED else tenant

    def _stats(self, pod: PodView) -> TenantStats:
        return self.stats.setdefault(self.name(pod), TenantStats())

    def arrived(self, pod: PodView) -> None:
        self._stats(pod).arrived += 1

    def placed(self, pod: PodView, node: str, waited: float) -> None:
        self.layer.counted(dataclasses.replace(pod, node_name=node))
        stats = self._stats(pod)
        stats.placed += 1
        stats.waits.append(waited)
        self._note_peaks()

    def departed(self, pod: PodView) -> None:
        self.layer.uncounted(pod)

    def refused(self, pod: PodView) -> None:
        stats = self._stats(pod)
        stats.refusals += 1
        stats.held.add(pod.uid)

    def gpus(self, tenant: str) -> float:
        return self.layer.ledger.current(tenant).get(GPU, 0) / MILLI_PER_GPU

    def _note_peaks(self) -> None:
        for name, stats in self.stats.items():
            stats.gpus_peak = max(stats.gpus_peak, self.gpus(name))

    def fair_order(self, queue: Sequence[QueuedPod]) -> Iterator[QueuedPod]:
        """`queue` (in QueueSort order) as the live queue pops it: each tenant's pods in that
        order, and next the head of the tenant whose fair-share rank is best (ties: QueueSort
        order). Ranks are asked again after each pod the caller handles, since a placement
        changes them; between placements only a tenant whose head changed is asked again."""
        queues: dict[str, list[QueuedPod]] = {}
        for queued in queue:
            queues.setdefault(self.layer.tenant_of(queued.pod), []).append(queued)
        position = {queued.pod.uid: i for i, queued in enumerate(queue)}
        heads = {tenant: 0 for tenant in queues}
        ranks: dict[str, tuple[RankKey, int]] = {}
        version = self.layer.ledger.version
        while heads:
            if self.layer.ledger.version != version:
                ranks.clear()  # usage changed: every rank may have
                version = self.layer.ledger.version
            for tenant, at in heads.items():
                if tenant not in ranks:
                    head = queues[tenant][at]
                    ranks[tenant] = (self.layer.rank(head), position[head.pod.uid])
            best = min(heads, key=lambda tenant: ranks[tenant])
            chosen = queues[best][heads[best]]
            del ranks[best]
            heads[best] += 1
            if heads[best] == len(queues[best]):
                del heads[best]
            yield chosen

    def totals(self) -> dict[str, object]:
        """What the run's summary adds with a quota file."""
        held = sum(len(stats.held) for stats in self.stats.values())
        return {"pods_held_by_quota": held, "tenants": self.summary()}

    def summary(self) -> dict[str, dict[str, object]]:
        """Per tenant, in the quota file's order (organisations: GPUs only), then the pods of
        no tenant if any came: pods, quota holds, waits, GPUs held at the end and at most,
        and the GPU bounds the file gives."""
        out: dict[str, dict[str, object]] = {}
        for name, stats in self.stats.items():
            tenant = self.policy.tenants.get(name)
            if tenant is None and not stats.arrived:
                continue
            row: dict[str, object] = {
                "gpus_end": round(self.gpus(name), 3),
                "gpus_peak": round(stats.gpus_peak, 3),
                "gpus_guaranteed": _gpus(tenant.guaranteed) if tenant is not None else None,
                "gpus_max": _gpus(tenant.max) if tenant is not None else None,
            }
            if tenant is None or self.policy.is_leaf(name):
                ordered = sorted(stats.waits)
                row.update(
                    pods_arrived=stats.arrived,
                    pods_placed=stats.placed,
                    pods_held_by_quota=len(stats.held),
                    quota_refusals=stats.refusals,
                    wait_p50_s=_nearest_rank(ordered, 0.5),
                    wait_max_s=ordered[-1] if ordered else None,
                )
            out[name] = row
        return out


def _gpus(amounts: Mapping[str, int]) -> float | None:
    return amounts[GPU] / MILLI_PER_GPU if GPU in amounts else None


def _nearest_rank(ordered: Sequence[float], q: float) -> float | None:
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)] if ordered else None


def render_tenants(rows: Mapping[str, Mapping[str, object]]) -> list[str]:
    """The summary's tenant table: one line per tenant, organisations with GPUs only."""
    table = [
        (
            "TENANT",
            "ARRIVED",
            "PLACED",
            "HELD BY QUOTA (CYCLES)",
            "WAIT P50/MAX S",
            "GPUS END/PEAK",
            "GPUS GUARANTEED/MAX",
        )
    ]
    for name, row in rows.items():
        leaf = "pods_arrived" in row
        pods = (
            (
                _cell(row["pods_arrived"]),
                _cell(row["pods_placed"]),
                f"{row['pods_held_by_quota']} ({row['quota_refusals']})",
                f"{_cell(row['wait_p50_s'])}/{_cell(row['wait_max_s'])}",
            )
            if leaf
            else ("", "", "", "")
        )
        gpus = (
            f"{_cell(row['gpus_end'])}/{_cell(row['gpus_peak'])}",
            f"{_cell(row['gpus_guaranteed'])}/{_cell(row['gpus_max'])}",
        )
        table.append((name, *pods, *gpus))
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in table
    ]


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}" if value < 1e6 else f"{value:.0f}"
    return str(value)

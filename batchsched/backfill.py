"""Reservations and EASY backfill: the head of the line starts when promised, idle capacity
is used meanwhile. Purely computational.

When a gang at the head cannot start, `Planner.reserve` finds the earliest time and the nodes
on which it can: running pods leave at their expected end (unknown: never), gangs reserved
before it hold their nodes from their start to their end. The reservation is then fixed, as
Slurm's are. A later gang may start now only if every protected reservation still fits on
its own nodes over its own window with the newcomer counted (`Planner.conflicts`). That one
check is both EASY rules: a gang that ends before a reservation begins is gone by then, one
on other nodes does not touch it; a gang whose end is unknown runs forever, so it passes only
by the second rule.

Capacity is counted per node and resource (whole GPUs included), not by running the Filter
plugins at future times: a reservation is a promise of when and where capacity will be free;
the gang is placed by the framework when its time comes. Which nodes a gang may use at all
(selectors, taints, GPU model) comes in with it (`GangDemand.nodes`).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from batchsched.model.resources import Resources

Vector = Mapping[str, int]
FOREVER: Final = float("inf")
POD_SLOT: Final = "pods"
GPU_NAME: Final = "nvidia.com/gpu"
PACK_BACKTRACKS: Final = 1_000  # members taken off again, per gang reserved


def vector(requests: Resources, pods: int = 1) -> dict[str, int]:
    """A pod's requests as the planner counts them: every named resource, plus one pod slot."""
    out = {name: requests.get(name) for name in requests.names() if name != POD_SLOT}
    out[POD_SLOT] = pods
    return out


@dataclass(frozen=True, slots=True)
class Running:
    """A pod holding capacity: on `node`, until `ends_at` (None: unknown, never ends)."""

    node: str
    requests: Vector
    ends_at: float | None


@dataclass(frozen=True, slots=True)
class GangDemand:
    key: str
    members: tuple[Vector, ...]  # what each member needs (vector())
    nodes: tuple[str, ...]  # where it may run at all, in preference order
    runtime: float | None  # expected; None: unknown
    protected: bool = True  # later gangs may not delay it (the first K, and starving ones)
    # A required topology level's domains (node names): the gang must start inside one.
    domains: tuple[frozenset[str], ...] = ()


@dataclass(frozen=True, slots=True)
class Reservation:
    key: str
    start: float
    end: float  # FOREVER when the runtime is unknown
    assignment: tuple[tuple[str, Vector], ...]  # (node, member)
    protected: bool

    @property
    def nodes(self) -> frozenset[str]:
        return frozenset(node for node, _ in self.assignment)


@dataclass(frozen=True, slots=True)
class Plan:
    now: float
    reservations: tuple[Reservation, ...]
    never: tuple[str, ...]  # gangs that fit nowhere even when everything that ends has ended

    def start_of(self, key: str) -> float | None:
        for reservation in self.reservations:
            if reservation.key == key:
                return reservation.start
        return None


class _Timeline:
    """Free capacity per node over time: what is free now, and signed changes at future times."""

    def __init__(self, allocatable: Mapping[str, Vector], running: Iterable[Running], now: float):
        self.now = now
        self.free: dict[str, dict[str, int]] = {n: dict(v) for n, v in allocatable.items()}
        self.changes: dict[str, list[tuple[float, Vector, int]]] = defaultdict(list)
        for pod in running:
            self.add_running(pod)

    def _change(self, node: str, at: float, amounts: Vector, sign: int) -> None:
        if at == FOREVER:
            return
        bisect.insort(self.changes[node], (at, amounts, sign), key=lambda c: c[0])

    def hold(self, reservation: Reservation) -> None:
        for node, member in reservation.assignment:
            self._change(node, reservation.start, member, -1)
            self._change(node, reservation.end, member, +1)

    def unhold(self, reservation: Reservation) -> None:
        for node, member in reservation.assignment:
            changes = self.changes[node]
            for entry in ((reservation.start, member, -1), (reservation.end, member, +1)):
                for i, change in enumerate(changes):
                    if change[0] == entry[0] and change[2] == entry[2] and change[1] is member:
                        del changes[i]
                        break

    def events(self, nodes: Sequence[str]) -> list[tuple[float, str, Vector, int]]:
        """Every change on these nodes, in time order."""
        found = [
            (at, node, amounts, sign)
            for node in nodes
            for at, amounts, sign in self.changes.get(node, ())
        ]
        found.sort(key=lambda e: e[0])
        return found

    def free_during(self, node: str, start: float, end: float) -> dict[str, int]:
        """The least free capacity on `node` over [start, end)."""
        free = dict(self.free.get(node, {}))
        changes = self.changes.get(node, ())
        i = 0
        while i < len(changes) and changes[i][0] <= start:
            _apply(free, changes[i][1], changes[i][2])
            i += 1
        low = dict(free)
        while i < len(changes) and changes[i][0] < end:
            _apply(free, changes[i][1], changes[i][2])
            for name, amount in free.items():
                low[name] = min(low.get(name, 0), amount)
            i += 1
        return low

    def add_running(self, pod: Running) -> None:
        free = self.free.get(pod.node)
        if free is None:
            return
        _apply(free, pod.requests, -1)
        if pod.ends_at is not None:
            self._change(pod.node, max(pod.ends_at, self.now), pod.requests, +1)


def _apply(free: dict[str, int], amounts: Vector, sign: int) -> None:
    for name, amount in amounts.items():
        free[name] = free.get(name, 0) + sign * amount


class Planner:
    """Reservations made one gang at a time, in queue order, on one timeline."""

    def __init__(self, allocatable: Mapping[str, Vector], running: Iterable[Running], now: float):
        self.now = now
        self._timeline = _Timeline(allocatable, running, now)
        self.reservations: list[Reservation] = []
        self.never: list[str] = []

    def reserve(self, gang: GangDemand) -> Reservation | None:
        """The gang's earliest start and nodes, held from then on; None: it fits nowhere even
        when everything that ends has ended."""
        found = _earliest_in_a_domain(self._timeline, gang)
        if found is None:
            self.never.append(gang.key)
            return None
        self._timeline.hold(found)
        self.reservations.append(found)
        return found

    def conflicts(self, starting: Sequence[Running]) -> list[Reservation]:
        """The protected reservations that would no longer fit on their nodes if `starting`
        began now; empty means they may start."""
        late = []
        for reservation in self.reservations:
            if not reservation.protected:
                continue
            extra: dict[str, dict[str, int]] = {}
            for pod in starting:
                overlaps = pod.ends_at is None or pod.ends_at > reservation.start
                if overlaps and pod.node in reservation.nodes:
                    _apply(extra.setdefault(pod.node, {}), pod.requests, +1)
            for node, amounts in extra.items():
                low = self._timeline.free_during(node, reservation.start, reservation.end)
                if any(low.get(r, 0) < a for r, a in amounts.items()):
                    late.append(reservation)
                    break
        return late

    def delays(self, pod: Running, keys: frozenset[str]) -> str:
        """The first of these reservations that `pod`, started now, would make no longer fit
        (its gang's key), or ""."""
        return next((r.key for r in self.conflicts([pod]) if r.key in keys), "")

    def nodes_of(self, keys: frozenset[str]) -> frozenset[str]:
        return frozenset(n for r in self.reservations if r.key in keys for n in r.nodes)

    def release(self, key: str) -> None:
        """The gang `key` started (or left): its reservation stops holding capacity."""
        for reservation in [r for r in self.reservations if r.key == key]:
            self._timeline.unhold(reservation)
            self.reservations.remove(reservation)

    def start(self, starting: Iterable[Running]) -> None:
        """Pods that started now hold their nodes until their expected end."""
        for pod in starting:
            self._timeline.add_running(pod)

    def plan(self) -> Plan:
        return Plan(self.now, tuple(self.reservations), tuple(self.never))


def plan(
    allocatable: Mapping[str, Vector],
    running: Iterable[Running],
    gangs: Sequence[GangDemand],
    now: float,
) -> Plan:
    """Reservations for `gangs` in order, each on top of those before it."""
    planner = Planner(allocatable, running, now)
    for gang in gangs:
        planner.reserve(gang)
    return planner.plan()


def _earliest_in_a_domain(timeline: _Timeline, gang: GangDemand) -> Reservation | None:
    """The earliest start anywhere it may run, or in one of its domains when it has any."""
    if not gang.domains:
        return _earliest(timeline, gang)
    found = (
        _earliest(timeline, replace(gang, nodes=tuple(n for n in gang.nodes if n in domain)))
        for domain in gang.domains
    )
    return min((r for r in found if r is not None), key=lambda r: r.start, default=None)


def _earliest(timeline: _Timeline, gang: GangDemand) -> Reservation | None:
    """Sweep the gang's nodes' changes in time order; at each time capacity grows, try it."""
    need = _sum(gang.members)
    names = tuple(need)
    free = {n: [timeline.free.get(n, {}).get(r, 0) for r in names] for n in gang.nodes}
    total = [sum(max(0, f[k]) for f in free.values()) for k in range(len(names))]
    events = timeline.events(gang.nodes)
    starts = sorted({timeline.now, *(at for at, _, _, sign in events if sign > 0)})
    first = gang.members[0]
    alike = all(m == first for m in gang.members)
    same = [first.get(r, 0) for r in names] if alike else None
    i, spare = 0, [PACK_BACKTRACKS]  # shared by the start times tried
    for start in starts:
        while i < len(events) and events[i][0] <= start:
            _, node, amounts, sign = events[i]
            _shift(free[node], total, names, amounts, sign)
            i += 1
        if any(total[k] < need[r] for k, r in enumerate(names)):
            continue
        end = FOREVER if gang.runtime is None else start + gang.runtime
        low = _window_low(timeline, names, events, i, start, end)
        if same is not None:
            rooms = (low.get(n, free[n]) for n in gang.nodes)
            if _slots(same, rooms) < len(gang.members):
                continue
        assignment = _pack(gang, names, free, low, spare)
        if assignment is not None:
            return Reservation(gang.key, start, end, assignment, gang.protected)
    return None


def _shift(
    free: list[int], total: list[int], names: tuple[str, ...], amounts: Vector, sign: int
) -> None:
    for k, name in enumerate(names):
        delta = sign * amounts.get(name, 0)
        if delta:
            before = free[k]
            free[k] = before + delta
            total[k] += max(0, free[k]) - max(0, before)


def _window_low(
    timeline: _Timeline,
    names: tuple[str, ...],
    events: Sequence[tuple[float, str, Vector, int]],
    first: int,
    start: float,
    end: float,
) -> dict[str, list[int]]:
    """Nodes whose capacity drops (a reservation begins) before `end`: their least free
    capacity over [start, end). Other nodes only gain, so what is free at `start` holds."""
    low: dict[str, list[int]] = {}
    for at, node, _, sign in events[first:]:
        if at >= end:
            break
        if sign < 0 and node not in low:
            window = timeline.free_during(node, start, end)
            low[node] = [window.get(r, 0) for r in names]
    return low


def _slots(want: Sequence[int], rooms: Iterable[Sequence[int]]) -> int:
    """How many copies of one member fit, over all nodes (exact for identical members)."""
    count = 0
    for room in rooms:
        fit = min((room[k] // w for k, w in enumerate(want) if w > 0), default=0)
        count += max(0, fit)
    return count


_Room = tuple[int, ...]  # what a node has free, in the order of the gang's resource names
_Rooms = defaultdict[_Room, list[int]]  # room -> the ranks of the gang's nodes that have it


def _pack(
    gang: GangDemand,
    names: tuple[str, ...],
    free: Mapping[str, list[int]],
    low: Mapping[str, list[int]],
    spare: list[int],
) -> tuple[tuple[str, Vector], ...] | None:
    """Best fit, largest member first (fewest GPUs, then millicores, left; ties by the gang's
    node preference); where that strands a member, the other choices are searched, equal rooms
    as one and rooms seen to fail not again. Best fit alone is not monotone: a pod started on
    room a reservation does not use could make the next re-plan find it later. None: there is
    none, or `spare` ran out (members taken off again; once it has, only best fit is tried)."""
    rooms: _Rooms = defaultdict(list)
    for rank, node in enumerate(gang.nodes):
        rooms[tuple(low.get(node, free[node]))].append(rank)
    members = sorted(gang.members, key=_size, reverse=True)
    wants = [tuple(m.get(r, 0) for r in names) for m in members]
    order = tuple(names.index(r) for r in (GPU_NAME, "cpu") if r in names)
    path: list[tuple[int, _Room, _Room]] = []  # (node rank, its room, its room after)
    levels = [(_state(rooms, 0), _choices(rooms, wants[0], order))]
    failed: set[tuple[int, frozenset[tuple[_Room, int]]]] = set()
    while True:
        state, choices = levels[-1]
        room = None if state in failed else next(choices, None)
        if room is None:  # no choice for member len(path) works from this state
            failed.add(state)
            levels.pop()
            spare[0] -= 1
            if not levels or spare[0] < 0:
                return None
            _move(rooms, *path.pop(), back=True)
            continue
        after = tuple(a - w for a, w in zip(room, wants[len(path)], strict=True))
        path.append((rooms[room][0], room, after))
        _move(rooms, *path[-1])
        if len(path) == len(wants):
            return tuple((gang.nodes[r], m) for (r, _, _), m in zip(path, members, strict=True))
        levels.append((_state(rooms, len(path)), _choices(rooms, wants[len(path)], order)))


def _move(rooms: _Rooms, rank: int, room: _Room, after: _Room, back: bool = False) -> None:
    """Node `rank` goes from `room` to `after` (a member placed), or back (taken off)."""
    source, target = (after, room) if back else (room, after)
    rooms[source].remove(rank)
    if not rooms[source]:
        del rooms[source]
    bisect.insort(rooms[target], rank)


def _state(rooms: _Rooms, placed: int) -> tuple[int, frozenset[tuple[_Room, int]]]:
    return placed, frozenset((room, len(ranks)) for room, ranks in rooms.items())


def _choices(rooms: _Rooms, want: _Room, order: Sequence[int]) -> Iterator[_Room]:
    """The rooms that hold `want`, best fit first (fewest GPUs, then millicores, left), then
    the node the gang prefers."""
    fitting = [r for r in rooms if all(a >= w for a, w in zip(r, want, strict=True))]
    fitting.sort(key=lambda r: (*(r[k] for k in order), rooms[r][0]))
    return iter(fitting)


def _size(member: Vector) -> tuple[int, int, int]:
    return (member.get("nvidia.com/gpu", 0), member.get("cpu", 0), member.get("memory", 0))


def _sum(members: Iterable[Vector]) -> dict[str, int]:
    out: dict[str, int] = {}
    for member in members:
        _apply(out, member, +1)
    return out

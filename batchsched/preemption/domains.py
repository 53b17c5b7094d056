"""Preemption for a gang that requires one topology domain: victims only inside that domain.

A gang whose PodGroup requires a level (all members in one domain of it, gang/topology.py)
may only be placed inside one domain, so evicting pods elsewhere would free nothing it can
use. Each candidate domain is searched on its own: the candidate victims are the units with
a pod inside it (a victim gang still goes whole, members outside the domain included, as
every victim does), and the gang is placed only on the domain's nodes. Candidates are the domains
whose free plus evictable capacity covers the gang, tightest fit first, at most the
TopologyDomains plugin's maxDomainsPerLevel; the cheapest plan over them wins. Purely computational.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from batchsched.framework.profile import Profile
from batchsched.gang.domains import domains_of
from batchsched.gang.podgroup import PodGroupView
from batchsched.plugins.topology_domains import TopologyDomains
from batchsched.preemption.cost import free_of
from batchsched.preemption.units import Unit
from batchsched.snapshot import NodeInfo, Snapshot

DOMAINS_PLANNED: Final = 8


@dataclass(frozen=True, slots=True)
class DomainScope:
    """One domain the gang may be planned in: its nodes, and the victims inside it."""

    level: str
    value: str
    nodes: frozenset[str]
    units: tuple[Unit, ...]

    @property
    def reason(self) -> str:
        return f"node(s) outside the gang's {self.level} domain {self.value}"


def domains_planned(profile: Profile) -> int:
    """How many domains a plan is searched in: the TopologyDomains plugin's
    maxDomainsPerLevel, as the cycle tries."""
    plugin = next((p for p in profile.pre_filter if isinstance(p, TopologyDomains)), None)
    return plugin.max_domains_per_level if plugin is not None else DOMAINS_PLANNED


def required_level(profile: Profile, group: PodGroupView) -> str | None:
    """The level the gang must stay within, as the profile's TopologyDomains resolves it;
    None when it requires none (or the plugin is off: its requests are ignored then)."""
    request = group.topology
    if request is None or not request.required:
        return None
    plugin = next((p for p in profile.pre_filter if isinstance(p, TopologyDomains)), None)
    if plugin is None:
        return None
    return request.level_in(plugin.levels.keys)


def required_domains(
    profile: Profile, group: PodGroupView, nodes: Iterable[NodeInfo]
) -> tuple[frozenset[str], ...]:
    """The node names of each domain of the level the gang requires (a backfill reservation
    must lie in one); empty when it requires none."""
    level = required_level(profile, group)
    if level is None:
        return ()
    return tuple(frozenset(i.name for i in infos) for infos in domains_of(nodes, level).values())


def domain_scopes(
    level: str,
    snapshot: Snapshot,
    units: Sequence[Unit],
    need: Mapping[str, int],
    limit: int = DOMAINS_PLANNED,
) -> list[DomainScope]:
    """The domains of `level` whose free and evictable capacity could hold the gang, the
    tightest first (the least left over of its scarcest resource), at most DOMAINS_PLANNED."""
    ranked: list[tuple[int, str, DomainScope]] = []
    for value, infos in domains_of(snapshot.nodes, level).items():
        names = frozenset(info.name for info in infos)
        inside = tuple(u for u in units if not names.isdisjoint(u.freed))
        room = _room(infos, inside, need)
        if room is None:
            continue
        ranked.append((room, value, DomainScope(level, value, names, inside)))
    ranked.sort(key=lambda item: (item[0], item[1]))
    return [scope for _, _, scope in ranked[:limit]]


def _room(infos: Sequence[NodeInfo], units: Sequence[Unit], need: Mapping[str, int]) -> int | None:
    """What would be left of the scarcest resource after placing the gang with every unit
    evicted; None when even that is short."""
    total = dict.fromkeys(need, 0)
    for info in infos:
        for name, amount in free_of(info, need).items():
            total[name] += max(0, amount)
    nodes = {info.name for info in infos}
    for unit in units:
        for node, amounts in unit.freed.items():
            if node not in nodes:
                continue  # freed outside the domain: of no use to the gang
            for name, amount in amounts.items():
                if name in total:
                    total[name] += amount
    left = [total[name] - amount for name, amount in need.items()]
    return min(left) if left and min(left) >= 0 else None

"""One policy on one workload, cluster and seed, by the paper's method: the entry point of
`batchsched simulate --policy` and `bench trace --policies`.

"default" is the scheduler's own profile (from the config, or the built-in one) untouched, so
its numbers are those `bench trace` gave before policies existed. Every other name is a policy
of sim/policies.py scoring alone on that profile's filters.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from batchsched.config import default_config, load_config
from batchsched.framework.profile import Profile
from batchsched.model.node import NodeView
from batchsched.sim.policies import PAPER_POLICIES, make_policy
from batchsched.sim.policy_plugin import policy_profile
from batchsched.sim.run import run_paper, trace_shape
from batchsched.sim.trace import DEFAULT_SCHEDULER_NAME, TracePod
from gpu.workload import Workload, typical_workload

DEFAULT_POLICY: Final = "default"
POLICY_NAMES: Final[tuple[str, ...]] = (DEFAULT_POLICY, *PAPER_POLICIES)


class UnknownPolicy(ValueError):
    pass


def parse_policies(text: str) -> list[str]:
    """ "default,fgd,bestfit" -> the names, in order, each once; UnknownPolicy names the bad one."""
    names: list[str] = []
    for part in (p.strip().lower() for p in text.split(",")):
        if not part or part in names:
            continue
        check_policy(part)
        names.append(part)
    if not names:
        raise UnknownPolicy(f"no policy named; choose from {', '.join(POLICY_NAMES)}")
    return names


def check_policy(name: str) -> str:
    if name not in POLICY_NAMES:
        raise UnknownPolicy(f"unknown policy {name!r}; choose from {', '.join(POLICY_NAMES)}")
    return name


def choose_profile(config_path: Path | None) -> Profile:
    """The config's profile for the default scheduler name (else its first), or the built-in
    profile without a config."""
    config = load_config(config_path) if config_path else default_config()
    profiles = config.build_profiles()
    return profiles.get(DEFAULT_SCHEDULER_NAME) or next(iter(profiles.values()))


def paper_target(trace: Sequence[TracePod]) -> Workload:
    """FGD's target workload as the artifact forms it: the most popular (cpu, GPU) shapes of
    the trace that cover 95 % of its pods; memory left out, as its node model has none."""
    return typical_workload(dataclasses.replace(trace_shape(row), memory=0) for row in trace)


def profile_for(policy: str, base: Profile, target: Workload, seed: int) -> Profile:
    """The profile that runs `policy`: `base` itself for "default"; `target` is the workload
    FGD's fragmentation expects (paper_target of a trace)."""
    if check_policy(policy) == DEFAULT_POLICY:
        return base
    return policy_profile(base, make_policy(policy, target, seed))


@dataclass(frozen=True, slots=True)
class PolicyRun:
    policy: str
    seed: int
    pods: int  # sampled, i.e. arrived
    placed: int
    gpu_alloc_pct_at_100: float | None  # None: the run never got that far
    gpu_alloc_pct_at_130: float | None
    frag_gpu_pct_at_130: float | None
    sim_s: float

    def row(self) -> dict[str, float | int | str | None]:
        return dataclasses.asdict(self)


def run_policy(
    policy: str,
    nodes: Sequence[NodeView],
    trace: Sequence[TracePod],
    *,
    seed: int,
    inflation: float = 1.3,
    config: Path | None = None,
) -> PolicyRun:
    """The paper's method (see run_paper) with `policy` placing the pods; GPU allocation at
    100 % and 130 % of the GPU capacity arrived."""
    profile = profile_for(policy, choose_profile(config), paper_target(trace), seed)
    outcome = run_paper(nodes, trace, profile, seed=seed, inflation=inflation)
    at_100, at_130 = outcome.at(100), outcome.at(130)
    return PolicyRun(
        policy,
        seed,
        outcome.pods,
        outcome.recorder.placed_count,
        at_100["gpu_alloc_pct"] if at_100 else None,
        at_130["gpu_alloc_pct"] if at_130 else None,
        at_130["frag_gpu_pct"] if at_130 else None,
        round(outcome.sim_s, 2),
    )

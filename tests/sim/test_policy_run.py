"""The paper's policies end to end: the profile each runs, the artifact's tie-break, one small
paper-method run per policy, default untouched, and the command lines that name them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from batchsched.cli import build_parser, main
from batchsched.framework.runner import ProfileRunner
from batchsched.sim.policies import PAPER_POLICIES, PodDemand, make_policy
from batchsched.sim.policy_plugin import policy_profile
from batchsched.sim.policy_run import (
    POLICY_NAMES,
    UnknownPolicy,
    choose_profile,
    paper_target,
    parse_policies,
    profile_for,
    run_policy,
)
from batchsched.sim.run import run_paper
from batchsched.sim.trace import TracePod, embedded_default_pods, embedded_gpu_nodes, read_nodes
from batchsched.sim.trace import read_pods as read_trace
from gpu.workload import DEFAULT_WORKLOAD
from tests.builders import NodeBuilder, make_node, make_pod, snapshot_of

NODES = read_nodes(embedded_gpu_nodes())[:24]


@pytest.fixture(scope="module")
def trace() -> list[TracePod]:
    return read_trace(embedded_default_pods())


def idle_nodes(*names: str) -> list[NodeBuilder]:
    return [
        make_node(n).cpu("96").memory("512Gi").gpus(8).label("nvidia.com/gpu.product", "G2")
        for n in names
    ]


def test_a_policy_profile_scores_by_the_policy_alone_and_reserves_its_gpus() -> None:
    base = choose_profile(None)
    profile = policy_profile(base, make_policy("bestfit", DEFAULT_WORKLOAD, 1))
    assert [s.plugin.name for s in profile.score] == [
        "PaperPolicy",
        "PaperTieBreakHigh",
        "PaperTieBreakLow",
    ]
    assert [s.weight for s in profile.score] == [101 * 101, 101, 1]
    reserve = [p.name for p in profile.reserve]
    assert "GpuTopology" not in reserve and reserve[0] == "PaperPolicy"
    assert [p.name for p in profile.filter] == [p.name for p in base.filter]


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_ties_go_to_the_smallest_node_name_as_in_the_artifact(seed: int) -> None:
    snap = snapshot_of(idle_nodes("node-c", "node-a", "node-b"))
    profile = policy_profile(choose_profile(None), make_policy("gpupacking", DEFAULT_WORKLOAD, 1))
    pod = make_pod("p").cpu("4").memory("1Gi").gpus(1).view()
    assert ProfileRunner(profile, seed=seed).schedule_one(pod, snap).node_name == "node-a"


def test_random_does_not_break_ties_by_name() -> None:
    profile = policy_profile(choose_profile(None), make_policy("random", DEFAULT_WORKLOAD, 1))
    chosen = set()
    for seed in range(12):
        snap = snapshot_of(idle_nodes("node-c", "node-a", "node-b"))
        pod = make_pod("p").cpu("4").memory("1Gi").gpus(1).view()
        chosen.add(ProfileRunner(profile, seed=seed).schedule_one(pod, snap).node_name)
    assert chosen == {"node-a", "node-b", "node-c"}


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_each_policy_runs_the_papers_method_end_to_end(policy: str, trace: list[TracePod]) -> None:
    result = run_policy(policy, NODES, trace, seed=42)
    assert result.policy == policy and result.pods > result.placed > 0
    assert result.gpu_alloc_pct_at_100 is not None and result.gpu_alloc_pct_at_130 is not None
    assert 50 < result.gpu_alloc_pct_at_100 <= result.gpu_alloc_pct_at_130 <= 100
    assert set(result.row()) >= {"gpu_alloc_pct_at_100", "gpu_alloc_pct_at_130", "policy"}


def test_default_is_the_schedulers_own_profile_untouched(trace: list[TracePod]) -> None:
    base = choose_profile(None)
    assert profile_for("default", base, paper_target(trace), 42) is base
    ours = run_policy("default", NODES, trace, seed=43)
    before = run_paper(NODES, trace, choose_profile(None), seed=43)
    point = before.at(130)
    assert point is not None and ours.gpu_alloc_pct_at_130 == point["gpu_alloc_pct"]
    assert ours.placed == before.recorder.placed_count


def test_a_policy_run_is_deterministic_for_its_seed(trace: list[TracePod]) -> None:
    first, again = (run_policy("random", NODES, trace, seed=5) for _ in range(2))
    assert dataclasses.replace(first, sim_s=0) == dataclasses.replace(again, sim_s=0)


def test_policy_names_parse_in_order_once_and_reject_unknown_ones() -> None:
    assert parse_policies("default, FGD,bestfit,fgd") == ["default", "fgd", "bestfit"]
    with pytest.raises(UnknownPolicy, match="unknown policy 'tetris'; choose from default, fgd"):
        parse_policies("default,tetris")
    with pytest.raises(UnknownPolicy, match="no policy named"):
        parse_policies(" , ")
    assert ("default", *PAPER_POLICIES) == POLICY_NAMES


def test_simulate_help_lists_every_policy(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["simulate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all(name in text for name in POLICY_NAMES)


def test_simulate_with_a_policy_names_it_and_a_bad_one_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn-0,64000,262144,4,T4\n")
    assert main(["simulate", "--quiet", "--nodes", str(nodes), "--policy", "bestfit"]) == 0
    out = capsys.readouterr().out
    assert "policy bestfit" in out.splitlines()[0]
    assert main(["simulate", "--quiet", "--nodes", str(nodes), "--policy", "tetris"]) == 2
    assert "batchsched simulate: unknown policy 'tetris'" in capsys.readouterr().err


def test_bench_trace_takes_a_policy_list() -> None:
    import argparse

    from batchsched.bench import trace as bench_trace

    parser = argparse.ArgumentParser()
    bench_trace.add_parser(parser.add_subparsers())
    args = parser.parse_args(["trace", "--policies", "default,fgd,bestfit"])
    assert parse_policies(args.policies) == ["default", "fgd", "bestfit"]
    assert parser.parse_args(["trace"]).policies == "default"


def test_random_gpu_choice_follows_its_seed() -> None:
    snap = snapshot_of(idle_nodes("n"))
    info = snap.get("n")
    assert info is not None
    shares = [PodDemand(1000, 0, 1, 300) for _ in range(20)]

    def draws(seed: int) -> list[tuple[int, ...] | None]:
        policy = make_policy("random", DEFAULT_WORKLOAD, seed)
        return [policy.choose(demand, info, [1000] * 8) for demand in shares]

    assert draws(7) == draws(7)
    assert draws(7) != draws(8)


def test_reserve_gives_a_share_the_gpu_the_policy_chooses() -> None:
    share = "batchsched.io/gpu-milli"
    bound = [
        make_pod("a").cpu("1").annotation(share, "500").node("n"),  # GPU 0: 500 left
        make_pod("b").cpu("1").gpus(1).node("n"),  # GPU 1: full
        make_pod("c").cpu("1").annotation(share, "600").node("n"),  # GPU 2: 400 left
    ]
    snap = snapshot_of(idle_nodes("n"), bound)
    info = snap.get("n")
    assert info is not None and info.gpu is not None and info.gpu.free[:3] == [500, 0, 400]
    profile = policy_profile(choose_profile(None), make_policy("bestfit", DEFAULT_WORKLOAD, 1))
    pod = make_pod("p").cpu("1").annotation(share, "350").view()
    assert ProfileRunner(profile, seed=1).schedule_one(pod, snap).node_name == "n"
    assert snap.gpu_grants(pod.uid) == ((2, 350),)  # the fullest GPU with room, not the first

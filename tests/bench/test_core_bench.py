"""The pure-core bench runs SchedulingBasic with and without lone-pod batching and compares."""

from __future__ import annotations

import argparse

import pytest

from batchsched.bench.core import run


def test_the_core_bench_places_every_pod_the_same_with_and_without_batching(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run(argparse.Namespace(nodes=40, pods=300, seed=2, batching="both")) == 0
    out = capsys.readouterr().out
    assert "no batching: placed 300/300" in out
    assert "lone-pod batching: placed 300/300" in out
    assert "same placements with and without batching: yes" in out

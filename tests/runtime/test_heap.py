"""The scheduler process's collector schedule (runtime/heap.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from batchsched.cli import EXIT_BAD_INPUT, main
from batchsched.runtime import heap


@pytest.fixture(autouse=True)
def restore_collector() -> Iterator[None]:
    yield
    gc.unfreeze()
    gc.enable()
    heap._held = False


def test_collection_is_held_from_the_start_until_the_heap_is_settled() -> None:
    heap.hold_collection()
    assert not gc.isenabled()
    kept: list[list[int]] = [[] for _ in range(100)]  # start-up's long-lived containers

    heap.settle_heap()

    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(kept)


def test_settling_a_heap_nobody_held_changes_nothing() -> None:
    heap.settle_heap()  # a test or an embedding process: its own policy stays

    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_the_heap_is_settled_once() -> None:
    heap.hold_collection()
    heap.settle_heap()
    gc.unfreeze()

    heap.settle_heap()  # a later resync must not freeze what the scheduler made since

    assert gc.get_freeze_count() == 0


def test_a_start_up_that_ends_early_gives_collection_back_unfrozen() -> None:
    heap.hold_collection()

    heap.release_collection()  # bad input: `batchsched run` returned before syncing

    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
    heap.settle_heap()
    assert gc.get_freeze_count() == 0


def test_batchsched_run_with_bad_input_leaves_the_collector_running(tmp_path: Path) -> None:
    bad = tmp_path / "config.yaml"
    bad.write_text("apiVersion: nonsense\n")

    code = main(["run", "--config", str(bad), "--log-level", "ERROR"])

    assert code == EXIT_BAD_INPUT
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0

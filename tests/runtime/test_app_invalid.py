"""A malformed object of any kind: counted under its informer's kind, and an Event on it."""

from __future__ import annotations

from batchsched.runtime.app_invalid import InvalidObjects
from batchsched.runtime.handlers import TopologyEvents
from tests.runtime.test_handlers import Recorded, setup


async def test_every_kind_gets_a_metric_and_an_event_naming_what_is_wrong() -> None:
    scheduler, _, _, recorded = setup()
    invalid = InvalidObjects(
        scheduler.metrics,
        scheduler.gangs,
        TopologyEvents(scheduler.cache, scheduler.queue),
        scheduler,
    )
    listed_pod = {"metadata": {"name": "bad", "namespace": "ml", "uid": "u1"}}  # no "kind"
    invalid.of("v1", "Pod")(listed_pod, ValueError("spec.containers[0].resources: 1Zi"))
    invalid.of("v1", "Node")({"metadata": {"name": "n9"}}, ValueError("bad allocatable"))
    invalid.of("v1", "Pod")({"metadata": []}, ValueError("metadata is not a mapping"))
    await scheduler.drain()
    assert isinstance(recorded, Recorded)
    assert [(key, reason) for key, reason, _ in recorded.events] == [
        ("ml/bad", "InvalidObject"),
        ("default/n9", "InvalidObject"),
    ]
    assert "1Zi" in recorded.events[0][2]
    sample = scheduler.metrics.registry.get_sample_value
    assert sample("batchsched_invalid_objects_total", {"kind": "Pod"}) == 2
    assert sample("batchsched_invalid_objects_total", {"kind": "Node"}) == 1

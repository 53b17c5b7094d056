"""`PodStatusWriter.flush` while other verdicts arrive: a deferred message that a newer verdict
wrote (or a deletion forgot) while flush awaited an earlier pod's write is skipped, not a
KeyError that ends the housekeeping task group and with it the live scheduler."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import cast

from kubernetes_asyncio.client import ApiClient

from batchsched.clock import FakeClock
from batchsched.kube.pod_status import PodStatusWriter
from batchsched.model.pod import PodView
from tests.builders import make_pod


class GatedWriter(PodStatusWriter):
    """The writer with its one API call replaced: records each pod's messages in order, and
    holds the write for the pod named `hold` until `release` is set."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(cast(ApiClient, None), clock=clock, min_rewrite=5.0)
        self.hold = ""
        self.holding = asyncio.Event()
        self.release = asyncio.Event()
        self.written: list[tuple[str, object]] = []

    async def _patch_status(self, pod: PodView, status: Mapping[str, object], what: str) -> bool:
        if pod.name == self.hold:
            self.hold = ""
            self.holding.set()
            await self.release.wait()
        conditions = cast(list[dict[str, object]], status["conditions"])
        self.written.append((pod.name, conditions[0]["message"]))
        return True


async def deferred_pair(clock: FakeClock) -> tuple[GatedWriter, PodView]:
    """Pods "first" and "second" marked once, then each given a newer message inside the
    rewrite interval; returns the writer and "second"."""
    writer = GatedWriter(clock)
    first, second = make_pod("first").view(), make_pod("second").view()
    await writer.mark_unschedulable(first, "first: 1")
    await writer.mark_unschedulable(second, "second: 1")
    clock.advance(1.0)
    await writer.mark_unschedulable(first, "first: 2")
    await writer.mark_unschedulable(second, "second: 2")
    clock.advance(5.0)
    return writer, second


async def test_a_deferred_message_written_by_a_newer_verdict_mid_flush_is_skipped() -> None:
    clock = FakeClock()
    writer, second = await deferred_pair(clock)
    writer.hold = "first"
    flushing = asyncio.create_task(writer.flush(lambda uid: True))
    await writer.holding.wait()
    await writer.mark_unschedulable(second, "second: 3")  # the interval has passed: written now
    writer.release.set()
    assert await flushing == 1
    assert writer.written[-2:] == [("second", "second: 3"), ("first", "first: 2")]


async def test_a_deferred_message_of_a_pod_forgotten_mid_flush_is_skipped() -> None:
    clock = FakeClock()
    writer, second = await deferred_pair(clock)
    writer.hold = "first"
    flushing = asyncio.create_task(writer.flush(lambda uid: True))
    await writer.holding.wait()
    writer.forget(second.uid)  # the pod was deleted
    writer.release.set()
    assert await flushing == 1
    assert ("second", "second: 2") not in writer.written

"""A preemptor's nominatedNodeName and its PodScheduled condition, asked for in the same
cycle, go in one status patch (kube-scheduler writes both at once); a nomination alone, or
one the condition write could not carry, is written by itself."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import cast

from kubernetes_asyncio.client import ApiClient

from batchsched.clock import FakeClock
from batchsched.kube.pod_status import PodStatusWriter
from batchsched.model.pod import PodView
from tests.builders import make_pod


class Patches(PodStatusWriter):
    """The writer with its API call replaced: records each status patch; fails while `fail`."""

    def __init__(self) -> None:
        super().__init__(cast(ApiClient, None), clock=FakeClock())
        self.patches: list[dict[str, object]] = []
        self.fail = False

    async def _patch_status(self, pod: PodView, status: Mapping[str, object], what: str) -> bool:
        await asyncio.sleep(0)  # a request takes at least a turn of the loop
        if self.fail:
            return False
        self.patches.append(dict(status))
        return True


def fields(patch: Mapping[str, object]) -> set[str]:
    return set(patch)


async def test_a_nomination_and_a_condition_asked_for_in_one_cycle_go_in_one_patch() -> None:
    writer, pod = Patches(), make_pod("p").view()
    nominate = asyncio.create_task(writer.set_nominated_node(pod, "n1"))
    mark = asyncio.create_task(writer.mark_unschedulable(pod, "preemption: ..."))
    await asyncio.gather(nominate, mark)
    assert len(writer.patches) == 1
    assert writer.patches[0]["nominatedNodeName"] == "n1"
    assert fields(writer.patches[0]) == {"conditions", "nominatedNodeName"}
    await writer.set_nominated_node(pod, "n1")  # written already: nothing more
    assert len(writer.patches) == 1


async def test_a_nomination_alone_is_written_by_itself() -> None:
    writer, pod = Patches(), make_pod("p").view()
    await writer.set_nominated_node(pod, "n1")
    await writer.set_nominated_node(pod, None)  # cleared
    assert writer.patches == [{"nominatedNodeName": "n1"}, {"nominatedNodeName": None}]


async def test_a_nomination_whose_carrying_write_failed_is_written_by_itself() -> None:
    writer, pod = Patches(), make_pod("p").view()
    writer.fail = True
    nominate = asyncio.create_task(writer.set_nominated_node(pod, "n1"))
    mark = asyncio.create_task(writer.mark_unschedulable(pod, "preemption: ..."))
    await mark
    writer.fail = False
    await nominate
    assert writer.patches == [{"nominatedNodeName": "n1"}]

"""Pod status writes land newest last: a verdict asked for while an older one is still being
written waits for it, and the older can never overwrite the newer."""

from __future__ import annotations

import asyncio

from batchsched.kube.pod_status import LatestWins
from batchsched.model.pod import PodView
from tests.builders import make_pod


class SlowApi:
    """Records writes in the order they complete; the first write waits for `release`."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.landed: list[str | None] = []

    async def write(self, pod: PodView, value: str | None) -> None:
        if not self.landed and not self.started.is_set():
            self.started.set()
            await self.release.wait()
        self.landed.append(value)


async def test_a_newer_verdict_asked_for_mid_write_lands_after_the_older() -> None:
    latest: LatestWins[str | None] = LatestWins()
    api, pod = SlowApi(), make_pod("p").view()
    first = asyncio.create_task(latest.write(("condition", pod.uid), "waiting", api.write, pod))
    await api.started.wait()
    await latest.write(("condition", pod.uid), "no devices", api.write, pod)
    api.release.set()
    await first
    assert api.landed == ["waiting", "no devices"]


async def test_verdicts_asked_for_mid_write_collapse_to_the_newest() -> None:
    latest: LatestWins[str | None] = LatestWins()
    api, pod = SlowApi(), make_pod("p").view()
    first = asyncio.create_task(latest.write(("condition", pod.uid), "a", api.write, pod))
    await api.started.wait()
    for message in ("b", "c", "d"):
        await latest.write(("condition", pod.uid), message, api.write, pod)
    api.release.set()
    await first
    assert api.landed == ["a", "d"]


async def test_other_pods_do_not_wait() -> None:
    latest: LatestWins[str | None] = LatestWins()
    api, slow, other = SlowApi(), make_pod("slow").view(), make_pod("other").view()
    first = asyncio.create_task(latest.write(("condition", slow.uid), "a", api.write, slow))
    await api.started.wait()
    await latest.write(("condition", other.uid), "b", api.write, other)
    assert api.landed == ["b"]
    api.release.set()
    await first
    assert api.landed == ["b", "a"]

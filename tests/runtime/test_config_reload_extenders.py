"""A config reload changes the HTTP extenders too: a changed `extenders:` list is put in force
between cycles with new clients (the next pods follow the new extender), an unchanged one
keeps the running clients, and a bad extender entry keeps the extenders in force, reported
like any bad config. Two real loopback extenders; driven by check_once, no sleeps."""

from __future__ import annotations

import os
from pathlib import Path

from batchsched.cache import SchedulerCache
from batchsched.clock import FakeClock
from batchsched.config import load_config
from batchsched.metrics import SchedulerMetrics
from batchsched.runtime.app_config import attach_binding_client, swap_profiles
from batchsched.runtime.app_extenders import (
    close_extenders,
    profiles_with_extenders,
    reloaded_profiles,
)
from batchsched.runtime.config_reload import INVALID, RELOADED, ConfigReloader
from batchsched.runtime.handlers import NodeEvents, PodEvents
from batchsched.runtime.queue import SchedulingQueue
from batchsched.runtime.scheduler import Scheduler
from tests.builders import make_node, make_pod
from tests.extenders.fake_extender import Verdicts, serving
from tests.runtime.test_config_reload import LEASE, FakeRecorder
from tests.runtime.test_handlers import Binds, Recorded


def document(extender: str) -> str:
    return f"""apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: gpu-scheduler
extenders:
{extender}
"""


def filtering(url: str, weight: int = 1) -> str:
    return f"""- urlPrefix: {url}
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: {weight}
"""


def write(path: Path, text: str) -> None:
    staging = path.with_suffix(".tmp")
    staging.write_text(text)
    os.replace(staging, path)


class Live:
    """A scheduler on three nodes whose config file can be edited and reloaded."""

    def __init__(self, path: Path) -> None:
        clock = FakeClock()
        self.metrics = SchedulerMetrics()
        self.binds = Binds()
        config = load_config(path)
        profiles = profiles_with_extenders(config, self.metrics)
        attach_binding_client(profiles, self.binds)
        cache = SchedulerCache(clock)
        queue = SchedulingQueue(profiles["gpu-scheduler"].queue_sort.less, clock)
        recorded = Recorded()
        self.scheduler = Scheduler(profiles, cache, queue, recorded, recorded, self.metrics, clock)
        nodes = NodeEvents(cache, queue)
        for name in ("n1", "n2", "n3"):
            nodes.on_add(make_node(name).cpu("8").view())
        self.pods = PodEvents(cache, queue, self.scheduler.admits, self.scheduler.gangs)
        self.recorder = FakeRecorder()
        self.reloader = ConfigReloader(
            path,
            config,
            apply=lambda new, profiles: swap_profiles(
                self.scheduler, profiles, 0, new.extenders == self.reloader.current.extenders
            ),
            recorder=self.recorder,
            regarding=LEASE,
            metrics=self.metrics,
            build=lambda current, new: reloaded_profiles(current, new, self.metrics),
        )

    async def place(self, name: str) -> str:
        self.pods.on_add(make_pod(name).cpu("1").view())
        while (queued := self.scheduler.queue.pop_ready()) is not None:
            extenders = self.scheduler.extenders
            assert extenders is not None
            await self.scheduler.schedule_one_asking(queued, extenders)
        await self.scheduler.drain()
        return dict(self.binds.bound)[f"default/{name}"]

    def reloads(self, result: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "batchsched_config_reload_total", {"result": result}
        )
        return value or 0.0

    async def close(self) -> None:
        for profiles in (*self.scheduler.retired, self.scheduler.profiles):
            await close_extenders(profiles)


async def test_the_next_pods_follow_the_extender_a_reload_names(tmp_path: Path) -> None:
    only_n3 = Verdicts(refuse={"n1": "no", "n2": "no"})
    only_n1 = Verdicts(refuse={"n2": "no", "n3": "no"})
    path = tmp_path / "config.yaml"
    async with serving(only_n3) as first, serving(only_n1) as second:
        write(path, document(filtering(first)))
        live = Live(path)
        assert await live.place("before") == "n3"
        running = live.scheduler.extenders

        write(path, document(filtering(second)))
        assert await live.reloader.check_once()
        assert await live.place("after") == "n1"
        assert live.scheduler.extenders is not running
        assert live.scheduler.retired  # the old clients are closed when the loop stops
        await live.close()
    assert live.recorder.reasons() == [RELOADED]
    assert [c for c, _ in only_n1.calls] == ["filter", "prioritize"]


async def test_a_reload_that_leaves_the_extenders_alone_keeps_the_running_clients(
    tmp_path: Path,
) -> None:
    path = tmp_path / "config.yaml"
    async with serving(Verdicts(refuse={"n1": "no"})) as url:
        write(path, document(filtering(url)))
        live = Live(path)
        running = live.scheduler.extenders
        write(path, document(filtering(url)) + "percentageOfNodesToScore: 50\n")
        assert await live.reloader.check_once()
        assert live.scheduler.extenders is running
        assert not live.scheduler.retired
        await live.close()


async def test_a_new_weight_takes_effect_with_new_clients(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    async with serving(Verdicts()) as url:
        write(path, document(filtering(url, weight=1)))
        live = Live(path)
        write(path, document(filtering(url, weight=7)))
        assert await live.reloader.check_once()
        extenders = live.scheduler.extenders
        assert extenders is not None and extenders.weight == 7
        await live.close()


async def test_a_bad_extender_entry_keeps_the_extenders_in_force_and_says_why(
    tmp_path: Path,
) -> None:
    only_n3 = Verdicts(refuse={"n1": "no", "n2": "no"})
    path = tmp_path / "config.yaml"
    async with serving(only_n3) as url:
        write(path, document(filtering(url)))
        live = Live(path)
        # A prioritizer without weight, then a CA file that is not there: both refused.
        write(path, document(filtering("http://127.0.0.1:9", weight=0)))
        assert not await live.reloader.check_once()
        missing = tmp_path / "missing-ca.pem"
        tls = f"  enableHTTPS: true\n  tlsConfig: {{caFile: {missing}}}\n"
        write(path, document(filtering("https://127.0.0.1:9") + tls))
        assert not await live.reloader.check_once()
        assert live.reloads("error") == 2
        assert live.recorder.reasons() == [INVALID, INVALID]
        notes = [note for _, _, _, note in live.recorder.events]
        assert "extenders[0].weight" in notes[0]
        assert "extenders[0].tlsConfig" in notes[1]
        assert await live.place("still") == "n3"  # the extender in force still decides
        await live.close()


async def test_extenders_swapped_while_they_answer_are_asked_again_before_the_cycle(
    tmp_path: Path,
) -> None:
    only_n3 = Verdicts(refuse={"n1": "no", "n2": "no"})
    only_n1 = Verdicts(refuse={"n2": "no", "n3": "no"})
    path = tmp_path / "config.yaml"
    async with serving(only_n3) as first, serving(only_n1) as second:
        write(path, document(filtering(first)))
        live = Live(path)
        write(path, document(filtering(second)))
        new = reloaded_profiles(live.reloader.current, load_config(path), live.metrics)
        attach_binding_client(new, live.binds)
        # The reload lands while the first extender is answering about the pod.
        only_n3.on_filter = lambda _: swap_profiles(live.scheduler, new, 0, keep_extenders=False)
        assert await live.place("p") == "n1"
        await live.close()
    assert [c for c, _ in only_n1.calls] == ["filter", "prioritize"]

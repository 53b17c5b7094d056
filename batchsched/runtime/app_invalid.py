"""What the App (runtime/app.py) does with an object its informers cannot parse.

Every such object is counted by kind and gets a Warning Event saying why it is left out
(the informer has logged it already, and kept the last good version). A malformed PodGroup
is also remembered, so its members say why they wait, and a malformed NodeResourceTopology
sends its node back to the GPUs its labels describe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from batchsched.kube.binder import ObjectRef
from batchsched.metrics import SchedulerMetrics
from batchsched.model.gang_ref import GangApi
from batchsched.runtime.gangs import GangTracker
from batchsched.runtime.handlers import TopologyEvents
from batchsched.runtime.scheduler import Scheduler
from gpu.nrt import API_VERSION, KIND


class InvalidObjects:
    """The informers' `on_invalid` callbacks: `count` for any kind, `pod_group` and
    `topology` for the kinds that need more than a count."""

    def __init__(
        self,
        metrics: SchedulerMetrics,
        gangs: GangTracker,
        topology_events: TopologyEvents,
        scheduler: Scheduler,
    ) -> None:
        self.metrics = metrics
        self.gangs = gangs
        self.topology_events = topology_events
        self.scheduler = scheduler

    def count(self, raw: Mapping[str, object], err: Exception) -> None:
        kind = str(raw.get("kind") or "unknown")
        self.metrics.invalid_objects.labels(kind=kind).inc()

    def of(self, api_version: str, kind: str) -> Callable[[Mapping[str, object], Exception], None]:
        """The callback for an informer of `kind`: listed items carry no kind of their own.
        Counts the object and posts an `InvalidObject` Warning Event on it."""

        def invalid(raw: Mapping[str, object], err: Exception) -> None:
            self.count({**raw, "kind": kind}, err)
            meta = raw.get("metadata")
            if not isinstance(meta, Mapping):
                return
            ref = ObjectRef(
                api_version,
                kind,
                _text(meta.get("namespace")) or "default",
                _text(meta.get("name")),
                _text(meta.get("uid")),
            )
            note = f"{kind} left out of scheduling (the last good version is kept): {err}"
            self.scheduler.spawn(
                self.scheduler.events.record(ref, "Warning", "InvalidObject", "Parsing", note)
            )

        return invalid

    def pod_group(self, raw: Mapping[str, object], err: Exception) -> None:
        """A malformed scheduler-plugins PodGroup (see `pod_group_in`)."""
        self.pod_group_in(GangApi.SCHEDULER_PLUGINS)(raw, err)

    def pod_group_in(self, api: GangApi) -> Callable[[Mapping[str, object], Exception], None]:
        """The callback for a PodGroup informer of this API: a malformed PodGroup is
        remembered (its members say why they wait), counted, and an Event on the object."""

        def invalid(raw: Mapping[str, object], err: Exception) -> None:
            self.count({**raw, "kind": "PodGroup"}, err)
            self.gangs.mark_invalid(raw, err, api)
            meta = raw.get("metadata")
            if not isinstance(meta, Mapping):
                return
            ref = ObjectRef(
                api.value,
                "PodGroup",
                _text(meta.get("namespace")),
                _text(meta.get("name")),
                _text(meta.get("uid")),
            )
            note = f"PodGroup is not scheduled: {err}"
            self.scheduler.spawn(
                self.scheduler.events.record(ref, "Warning", "InvalidPodGroup", "Validating", note)
            )

        return invalid

    def topology(self, raw: Mapping[str, object], err: Exception) -> None:
        """A malformed NodeResourceTopology: counted, an Event on it, its node back on labels."""
        self.count(raw, err)
        meta = raw.get("metadata")
        if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
            return
        name = str(meta["name"])
        self.topology_events.drop(name)
        ref = ObjectRef(API_VERSION, KIND, "default", name, str(meta.get("uid", "")))
        note = f"GPU topology ignored, node {name} falls back to its labels: {err}"
        self.scheduler.spawn(
            self.scheduler.events.record(ref, "Warning", "InvalidTopology", "Parsing", note)
        )


def _text(value: object) -> str:
    """A metadata string, or "" for anything else (a malformed object may hold anything)."""
    return value[:253] if isinstance(value, str) else ""

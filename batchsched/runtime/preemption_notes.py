"""What a preempting gang waits for, written to its PodGroup as an annotation.

The PodGroup status schema has no free-text field, so a gang's preemption progress (as
`Preempting.notes` describes it) is the annotation `batchsched.io/preemption`; its phase
stays Pending meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

from batchsched.kube.podgroups import gang_object_path

logger = logging.getLogger(__name__)

Patch = Callable[[str, Mapping[str, object]], Awaitable[object]]
PREEMPTION_ANNOTATION: Final = "batchsched.io/preemption"


class NotePublisher:
    """Writes each preempting gang's progress to its PodGroup as the annotation
    `batchsched.io/preemption` when it changes, and removes it when the preemption ends. (The
    PodGroup status schema has no free-text field; its phase stays Pending meanwhile.)"""

    def __init__(self, notes: Callable[[], Mapping[str, str]], patch: Patch) -> None:
        self.notes = notes
        self.patch = patch
        self._published: dict[str, str] = {}

    async def publish(self) -> None:
        current = self.notes()
        for key, note in current.items():
            if self._published.get(key) != note and await self._write(key, note):
                self._published[key] = note
        for key in [k for k in self._published if k not in current]:
            if await self._write(key, None):
                del self._published[key]

    async def _write(self, key: str, note: str | None) -> bool:
        path = gang_object_path(key)
        if path is None:
            return True  # a Kueue group: no object to annotate (its pods' Events say it)
        try:
            await self.patch(path, {"metadata": {"annotations": {PREEMPTION_ANNOTATION: note}}})
        except Exception as err:  # a gone PodGroup or a failing API server: try again later
            logger.debug("preemption note not written group=%s error=%s", key, err)
            return False
        return True

"""When the cyclic garbage collector runs in the scheduler's process.

CPython's collector runs after every few hundred container allocations and now and then walks
every tracked object. Start-up allocates what lives as long as the process (modules, the
listed Nodes and Pods), so while the scheduler starts the collector walks a growing heap again
and again, and afterwards each full collection walks it once more, finding nothing. On the
5000-pod backlog bench that was 0.5-1 CPU-s of the scheduler's ~4.5 (docs/benchmarks.md).

So `batchsched run` holds collection from its first line until the informers have synced;
then the heap is frozen (later collections pass over it; reference counting still frees its
objects) and collection resumes over what comes after. The price: reference cycles left by
start-up (about 80 000 objects from the imports) are frozen with the rest and never freed, a
bounded, once-paid amount; a full collection to free them first costs ~0.1 s of start-up.
"""

from __future__ import annotations

import gc
import logging

__all__ = ["hold_collection", "release_collection", "settle_heap"]

log = logging.getLogger(__name__)

_held = False


def hold_collection() -> None:
    """No cyclic collection until `settle_heap`."""
    global _held
    _held = True
    gc.disable()


def settle_heap() -> None:
    """After start-up: freeze what it built and let the collector run again. Does nothing
    unless `hold_collection` was called (a process embedding the App keeps its own policy)."""
    global _held
    if not _held:
        return
    _held = False
    gc.freeze()
    gc.enable()
    log.info("heap settled frozen_objects=%d", gc.get_freeze_count())


def release_collection() -> None:
    """Collect as before, without freezing, if the heap was never settled (start-up failed)."""
    global _held
    if _held:
        _held = False
        gc.enable()

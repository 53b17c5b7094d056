"""A file the scheduler reloads while it runs (the quota file, the scheduler config): polled
by the SHA-256 of its content, so a ConfigMap volume's symlink swap is seen like an edit.

`PolledFile.check_once` is the one loop both reloaders share: an unreadable file is reported
once until it changes, unchanged content is skipped, a changed file is loaded whole
(`_load`), and then put in force (`_accepted`) or refused with the old one kept
(`_rejected`). Events about it go on one object (`regarding`), whose uid is looked up the
first time one is posted.
"""

from __future__ import annotations

import asyncio
import hashlib
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final, Generic, TypeVar

from batchsched.configfile.errors import ConfigError, Issue
from batchsched.kube.binder import ObjectRef
from batchsched.runtime.live import Recorder

T = TypeVar("T")
Resolve = Callable[[ObjectRef], Awaitable[ObjectRef]]

UNREADABLE: Final = "unreadable"  # the digest of "could not read the file", so it logs once


class PolledFile(ABC, Generic[T]):
    """A reloaded file of `T` (module doc); subclasses say how to load, accept and reject."""

    def __init__(
        self,
        path: Path,
        *,
        interval: float,
        recorder: Recorder,
        regarding: ObjectRef,
        action: str,
        resolve: Resolve | None,
    ) -> None:
        self.path = path
        self.interval = interval
        self.regarding = regarding
        self._recorder = recorder
        self._action = action
        self._resolve = resolve
        self._digest: str | None = None  # of the content last looked at, good or bad

    async def run(self, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        """Poll forever (cancel to stop)."""
        while True:
            await sleep(self.interval)
            await self.check_once()

    async def check_once(self) -> bool:
        """Look at the file once; True when a new content was put in force."""
        try:
            digest, text = self._read()
        except ConfigError as err:
            if self._digest != UNREADABLE:
                self._digest = UNREADABLE
                await self._rejected(err)
            return False
        if digest == self._digest:
            return False
        self._digest = digest
        try:
            loaded = self._load(text)
        except ConfigError as err:
            await self._rejected(err)
            return False
        await self._accepted(loaded, digest)
        return True

    def _read(self) -> tuple[str, str]:
        try:
            data = self.path.read_bytes()  # through the symlinks a ConfigMap mount swaps
            return hashlib.sha256(data).hexdigest(), data.decode("utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise self._error([Issue("", f"cannot read the file: {err}")]) from err

    async def _record(self, type_: str, reason: str, note: str) -> None:
        if self._resolve is not None and not self.regarding.uid:
            self.regarding = await self._resolve(self.regarding)
        await self._recorder.record(self.regarding, type_, reason, self._action, note)

    @abstractmethod
    def _error(self, issues: list[Issue]) -> ConfigError:
        """This file's error type, naming the file."""

    @abstractmethod
    def _load(self, text: str) -> T:
        """The content, whole and checked; a ConfigError for anything wrong with it."""

    @abstractmethod
    async def _accepted(self, loaded: T, digest: str) -> None: ...

    @abstractmethod
    async def _rejected(self, err: ConfigError) -> None: ...

"""A one-line progress bar on stderr: no dependency, silent when stderr is not a terminal."""

from __future__ import annotations

import sys
import time
from typing import Final, TextIO

_WIDTH: Final = 30
_EVERY_S: Final = 0.1


class Progress:
    def __init__(self, total: int, label: str, stream: TextIO | None = None, enabled: bool = True):
        self.total = max(total, 1)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and self.stream.isatty()
        self._start = time.perf_counter()
        self._shown = 0.0

    def __call__(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._shown < _EVERY_S and done < self.total:
            return
        self._shown = now
        filled = _WIDTH * min(done, self.total) // self.total
        rate = done / max(now - self._start, 1e-9)
        bar = "#" * filled + "." * (_WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {done}/{self.total} pods, {rate:,.0f} pods/s")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()

"""Per-cycle scratch space that plugins share, keyed by typed keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar, cast

T = TypeVar("T")


@dataclass(frozen=True)
class StateKey(Generic[T]):
    """A typed key: `state.read(KEY)` returns what `state.write(KEY, value)` stored.

    Not slotted: `StateKey[int]("x")` sets `__orig_class__`, which needs an instance dict.
    """

    name: str


class MissingState(KeyError):
    """A plugin read state its own PreFilter/PreScore did not write: a bug, not a misfit."""


class CycleState:
    __slots__ = ("_data", "skip_filter", "skip_score")

    def __init__(self) -> None:
        self._data: dict[str, object] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()

    def write(self, key: StateKey[T], value: T) -> None:
        self._data[key.name] = value

    def read(self, key: StateKey[T]) -> T:
        # Hot path (Filter/Score read this per node): no cast() call, one dict lookup.
        try:
            return self._data[key.name]  # type: ignore[return-value]
        except KeyError:
            raise MissingState(key.name) from None

    def get(self, key: StateKey[T]) -> T | None:
        return cast("T | None", self._data.get(key.name))

    def clone(self) -> CycleState:
        copy = CycleState()
        copy._data = dict(self._data)
        copy.skip_filter = set(self.skip_filter)
        copy.skip_score = set(self.skip_score)
        return copy

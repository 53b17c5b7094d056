"""Which event loop `batchsched run` and `batchsched extender` run on.

uvloop (libuv, its TLS and transports in C) where it is installed, which it is on Linux with
batchsched's own dependencies; asyncio's loop otherwise or when asked. On the 5000-pod
backlog bench the scheduler took 3.87-3.93 CPU-s on uvloop against 4.04-4.32 on asyncio's
loop (docs/benchmarks.md): most of a pod's client cost is TLS records and transports, which
asyncio does in Python.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Final, TypeAlias

if TYPE_CHECKING:  # asyncio loads when a loop is made, not when the command line is built
    import asyncio

__all__ = [
    "EVENT_LOOPS",
    "EventLoopUnavailable",
    "add_event_loop_option",
    "loop_factory",
    "run_on_loop",
]

EVENT_LOOPS: Final = ("auto", "uvloop", "asyncio")


def add_event_loop_option(parser: argparse.ArgumentParser) -> None:
    """`--event-loop`, as `run` and `extender` take it."""
    parser.add_argument(
        "--event-loop",
        default="auto",
        choices=EVENT_LOOPS,
        help="auto (default): uvloop where installed, else asyncio's own loop",
    )


LoopFactory: TypeAlias = "Callable[[], asyncio.AbstractEventLoop]"


class EventLoopUnavailable(RuntimeError):
    """The loop asked for by name cannot be had here."""


def loop_factory(choice: str) -> tuple[str, LoopFactory]:
    """The loop's name and how to make one: `auto` is uvloop where importable, else asyncio."""
    import asyncio

    if choice not in EVENT_LOOPS:
        raise EventLoopUnavailable(f"event loop {choice!r}: one of {', '.join(EVENT_LOOPS)}")
    if choice == "asyncio":
        return "asyncio", asyncio.new_event_loop
    try:
        import uvloop
    except ImportError as err:
        if choice == "uvloop":
            raise EventLoopUnavailable(f"event loop uvloop: not installed ({err})") from err
        return "asyncio", asyncio.new_event_loop
    return "uvloop", uvloop.new_event_loop


def run_on_loop(choice: str, main: Callable[[], Coroutine[object, object, int]]) -> int:
    """Run `main()` to its end on the loop `choice` names, logged; `EventLoopUnavailable`
    before `main` is called when that loop cannot be had."""
    import asyncio

    name, new_loop = loop_factory(choice)
    logging.getLogger(__name__).info("event loop=%s", name)
    with asyncio.Runner(loop_factory=new_loop) as runner:
        return runner.run(main())

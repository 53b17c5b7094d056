"""`python -m batchsched.bench fuzz [--cases N] [--seed S] [--target NAME]`: bad input never
crashes a parser at the edge.

Runs N generated cases (valid, mutated and random inputs; fuzz_targets.py) spread evenly over
every parser and prints, per parser, how many were accepted, how many rejected with the
documented error, how many escaped with any other exception (must be 0), the rate and the
slowest case. Exits 1 if anything escaped, printing the first escaped input of each parser
and its traceback, replayable with the same seed.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import time
import traceback
from dataclasses import dataclass, field

from batchsched.bench.fuzz_targets import TARGETS, Outcome, Target, check, generate

DEFAULT_CASES = 100_000


@dataclass(slots=True)
class Tally:
    cases: int = 0
    accepted: int = 0
    rejected: int = 0
    escaped: int = 0
    seconds: float = 0.0
    slowest: float = 0.0
    # The first input that escaped at each (exception type, raising line), for the report.
    escapes: dict[str, tuple[int, object, BaseException]] = field(default_factory=dict)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("fuzz", help="every parser at the edge against hostile input")
    parser.add_argument("--cases", type=int, default=DEFAULT_CASES, help="in total, all parsers")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", action="append", choices=sorted(TARGETS), default=None)
    parser.set_defaults(run=run)


def fuzz_target(target: Target, cases: int, seed: int) -> Tally:
    """`cases` inputs for one parser from its own seeded stream (so one parser's count does
    not shift another's inputs)."""
    rng = random.Random(f"{seed}:{target.name}")
    tally = Tally()
    for _ in range(cases):
        value = generate(target, rng)
        start = time.perf_counter()
        outcome, err = check(target, value)
        spent = time.perf_counter() - start
        tally.cases += 1
        tally.seconds += spent
        tally.slowest = max(tally.slowest, spent)
        if outcome is Outcome.ACCEPTED:
            tally.accepted += 1
        elif outcome is Outcome.REJECTED:
            tally.rejected += 1
        else:
            assert err is not None
            tally.escaped += 1
            site = _site(err)
            seen, first, first_err = tally.escapes.get(site, (0, value, err))
            tally.escapes[site] = (seen + 1, first, first_err)
    return tally


def run(args: argparse.Namespace) -> int:
    names: list[str] = args.target or list(TARGETS)
    logging.disable(logging.WARNING)  # the config loaders warn about what the fuzzing writes
    per_target, extra = divmod(args.cases, len(names))
    print(f"fuzz: {args.cases} cases over {len(names)} parsers, seed {args.seed}")
    header = f"{'parser':36} {'cases':>7} {'accepted':>9} {'rejected':>9} {'escaped':>8}"
    print(f"{header} {'cases/s':>9} {'slowest':>9}")
    started = time.perf_counter()
    tallies: dict[str, Tally] = {}
    for i, name in enumerate(names):
        tally = fuzz_target(TARGETS[name], per_target + (1 if i < extra else 0), args.seed)
        tallies[name] = tally
        rate = tally.cases / tally.seconds if tally.seconds else 0.0
        print(
            f"{name:36} {tally.cases:7d} {tally.accepted:9d} {tally.rejected:9d} "
            f"{tally.escaped:8d} {rate:9.0f} {tally.slowest * 1000:7.1f}ms",
            flush=True,
        )
    total = Tally()
    for tally in tallies.values():
        total.cases += tally.cases
        total.accepted += tally.accepted
        total.rejected += tally.rejected
        total.escaped += tally.escaped
    wall = time.perf_counter() - started
    print(
        f"{'total':36} {total.cases:7d} {total.accepted:9d} {total.rejected:9d} "
        f"{total.escaped:8d} {total.cases / wall:9.0f}   wall {wall:.1f}s"
    )
    for name, tally in tallies.items():
        for site, (seen, value, err) in tally.escapes.items():
            print(f"\n{name}: {seen} escaped at {site}; first input: {_short(value)}")
            traceback.print_exception(err, file=sys.stdout, limit=-4)
    return 1 if total.escaped else 0


def _site(err: BaseException) -> str:
    """The exception type and where it was raised: one line per distinct bug."""
    frames = traceback.extract_tb(err.__traceback__)
    where = f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else "?"
    return f"{type(err).__name__} {where}"


def _short(value: object) -> str:
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an integer too long to print, deep nesting
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 600 else f"{text[:600]}... ({len(text)} chars)"

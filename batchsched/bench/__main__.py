"""`python -m batchsched.bench core --nodes 5000 --pods 10000`, `... bench parse --pods 5000`,
`... bench e2e --nodes 500 --pods 5000`, `... bench trace --seeds 42-51 --out results.json`,
`... bench kueue`, `... bench chaos --nodes 200 --gangs 1000 --kills 10`, `... bench topology`,
`... bench topology-e2e --racks 64`, `... bench extender --nodes 16 --pods 64`,
`... bench place-dump --nodes 1500 --pods 60000`, `... bench server-cost`."""

from __future__ import annotations

import argparse
import sys

from batchsched.bench import (
    chaos,
    core,
    dra_core,
    dra_e2e,
    e2e,
    e2e_gang,
    e2e_preemption,
    e2e_topology,
    extender,
    fuzz,
    gang_core,
    parse,
    place_dump,
    preemption_core,
    queues_kueue,
    server_cost,
    topology,
    trace,
)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m batchsched.bench")
    commands = parser.add_subparsers(dest="command", required=True)
    core.add_parser(commands)
    dra_core.add_parser(commands)
    dra_e2e.add_parser(commands)
    gang_core.add_parser(commands)
    parse.add_parser(commands)
    place_dump.add_parser(commands)
    e2e.add_parser(commands)
    e2e_gang.add_parser(commands)
    e2e_preemption.add_parser(commands)
    preemption_core.add_parser(commands)
    trace.add_parser(commands)
    queues_kueue.add_parser(commands)
    topology.add_parser(commands)
    e2e_topology.add_parser(commands)
    fuzz.add_parser(commands)
    chaos.add_parser(commands)
    extender.add_parser(commands)
    server_cost.add_parser(commands)
    args = parser.parse_args()
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())

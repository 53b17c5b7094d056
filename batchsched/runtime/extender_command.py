"""The `batchsched extender` subcommand: its options, and starting the extender server.

Light at import (argparse only), as the rest of the command line is: the server, the kube
client and the plugins load when the subcommand runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from batchsched.runtime.event_loop import add_event_loop_option

EXIT_BAD_INPUT = 2


def add_extender_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ext = commands.add_parser(
        "extender",
        help="serve as an HTTP extender (filter, prioritize) for an unmodified kube-scheduler",
        description="Watch the cluster read-only and answer kube-scheduler's extender calls "
        "(urlPrefix http://ADDRESS, filterVerb filter, prioritizeVerb prioritize) with "
        "batchsched's GPU topology and fragmentation scoring on the live cache. Without "
        "--config the profile is GpuTopology and DynamicResources.",
    )
    ext.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster)")
    ext.add_argument(
        "--address", default="0.0.0.0:8888", help="HOST:PORT to serve on (default 0.0.0.0:8888)"
    )
    ext.add_argument("--config", type=Path, help="KubeSchedulerConfiguration YAML (profiles)")
    ext.add_argument("--profile", help="the config's profile to answer with (default: first)")
    add_event_loop_option(ext)
    ext.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))


def run_extender(args: argparse.Namespace) -> int:
    import logging

    from batchsched.config import ConfigError, load_config
    from batchsched.kube.client import KubeConfigError
    from batchsched.runtime.event_loop import EventLoopUnavailable, run_on_loop
    from batchsched.runtime.extender_server import ExtenderOptions, extender_config, serve_extender

    logging.basicConfig(level=args.log_level, force=True)
    host, _, port = args.address.rpartition(":")
    if not port.isdigit():
        print(
            f"batchsched extender: --address wants HOST:PORT, got {args.address!r}", file=sys.stderr
        )
        return EXIT_BAD_INPUT
    try:
        config = load_config(args.config) if args.config else extender_config()
        names = [p.scheduler_name for p in config.profiles]
        if args.profile is not None and args.profile not in names:
            raise ConfigError.at("profiles", f"no profile {args.profile!r} (have {names})")
    except ConfigError as err:
        print(f"batchsched extender: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    options = ExtenderOptions(args.kubeconfig, host or "0.0.0.0", int(port), args.profile)
    try:
        return run_on_loop(args.event_loop, lambda: serve_extender(options, config))
    except (EventLoopUnavailable, KubeConfigError) as err:
        print(f"batchsched extender: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT

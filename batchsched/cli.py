"""The `batchsched` command line."""

from __future__ import annotations

import argparse
import gc
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata, resources
from pathlib import Path

from batchsched.runtime.event_loop import add_event_loop_option
from batchsched.runtime.extender_command import add_extender_parser, run_extender
from batchsched.sim.arguments import add_simulate_parser
from batchsched.views.commands import add_view_parsers

EXIT_BAD_INPUT = 2


def _example(name: str) -> Path:
    return Path(str(resources.files("batchsched") / "examples" / name))


def package_version() -> str:
    """The installed distribution's version (pyproject.toml's, as pip recorded it)."""
    try:
        return metadata.version("batchsched")
    except metadata.PackageNotFoundError:  # a source tree that was never pip-installed
        return "unknown (not installed)"


class _Version(argparse.Action):
    """`--version`, whose release is looked up only when asked: reading the installed
    distributions' metadata took ~14 ms of every command's start-up, `run`'s too (issue #17)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"{parser.prog} {package_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="batchsched", description=__doc__)
    parser.add_argument("--version", action=_Version, help="print the release and exit")
    commands = parser.add_subparsers(dest="command", required=True)
    add_view_parsers(commands)  # live views: queue, explain, gpus
    place = commands.add_parser(
        "place",
        help="what-if: where would the pending pods go on this cluster?",
        description="Schedule the pending pods of the given files in queue order, each placement "
        "visible to the next, and print where each went or why it could not. Without "
        "--cluster/--pods it uses a bundled example cluster.",
    )
    place.add_argument("--cluster", type=Path, help="Kubernetes YAML: Nodes, running Pods, ...")
    place.add_argument("--pods", type=Path, help="Kubernetes YAML: the pending Pods")
    place.add_argument("--config", type=Path, help="KubeSchedulerConfiguration YAML")
    place.add_argument("--seed", type=int, default=0, help="seed for tie-breaking (default 0)")
    place.add_argument("--output", choices=("json", "table"), default="table")
    place.add_argument(
        "--quiet", action="store_true", help="no progress or skipped-kinds lines on stderr"
    )
    place.add_argument("--quota", type=Path, help="tenant quota file: quotas, fair share apply")
    run = commands.add_parser(
        "run",
        help="schedule pods naming our profiles on a real cluster",
        description="Watch the API server and schedule pending pods whose schedulerName is one "
        "of the configured profiles (default: gpu-scheduler).",
    )
    run.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster)")
    run.add_argument("--config", type=Path, help="KubeSchedulerConfiguration YAML")
    run.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="elect a leader on a Lease before scheduling (default: as the config says, on)",
    )
    run.add_argument("--leader-elect-identity", dest="identity", help="lease holder identity")
    from batchsched.runtime.serving_flags import add_serving_arguments

    add_serving_arguments(run)
    run.add_argument("--seed", type=int, default=0, help="seed for tie-breaking")
    add_quota_arguments(run)
    run.add_argument(
        "--preemption-min-runtime",
        type=_duration,
        default=0.0,
        metavar="DURATION",
        help="pods that started less than this ago are never preempted, e.g. 10m "
        "(default 0: as kube-scheduler)",
    )
    add_event_loop_option(run)
    run.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    run.add_argument("--log-format", default="text", choices=("text", "json"))
    add_simulate_parser(commands)
    add_extender_parser(commands)
    return parser


def add_quota_arguments(run: argparse.ArgumentParser) -> None:
    """Tenant quota flags of `batchsched run` (docs/configuration.md, "Tenant quota file")."""
    run.add_argument("--quota", type=Path, help="tenant quota file (QuotaConfig YAML), reloaded")
    run.add_argument(
        "--quota-configmap",
        type=_object_ref,
        metavar="NAMESPACE/NAME",
        help="the ConfigMap the quota file is mounted from: reload Events are about it "
        "(default: the leader election Lease)",
    )
    run.add_argument(
        "--quota-poll-interval",
        type=_positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="how often the quota file is checked for a change (default 10)",
    )
    run.add_argument(
        "--config-poll-interval",
        type=_positive_seconds,
        default=5.0,
        metavar="SECONDS",
        help="how often the --config file is checked for a change (default 5); a valid "
        "change is swapped in between cycles",
    )


def _object_ref(text: str) -> str:
    from batchsched.runtime.quota_reload import parse_object_ref

    try:
        parse_object_ref(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def _duration(text: str) -> float:
    """A Go duration ("10m", "1h30m") or plain seconds, not negative."""
    from batchsched.configfile.document import parse_duration

    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = parse_duration(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text!r}")
    return seconds


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return seconds


def run_scheduler(args: argparse.Namespace) -> int:
    from batchsched.runtime.heap import hold_collection, release_collection

    hold_collection()  # until the informers have synced: runtime/heap.py says why
    try:
        return _run_scheduler(args)
    finally:
        release_collection()  # an early exit (bad input) leaves the collector as it was


def _run_scheduler(args: argparse.Namespace) -> int:

    from batchsched.config import ConfigError, default_config, load_config
    from batchsched.kube.client import KubeConfigError
    from batchsched.runtime.app import RunOptions, run
    from batchsched.runtime.event_loop import EventLoopUnavailable, run_on_loop
    from batchsched.runtime.serving_flags import serving_options
    from queues.config import load_quota_file

    configure_logging(args.log_level, args.log_format)
    try:
        serving = serving_options(args)
        config = load_config(args.config) if args.config else default_config()
        if args.quota is not None:
            load_quota_file(args.quota)  # fail before connecting; the App loads it again
    except (ConfigError, ValueError) as err:
        print(f"batchsched run: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    options = RunOptions(
        kubeconfig=args.kubeconfig,
        config=args.config,
        config_poll_interval=args.config_poll_interval,
        leader_elect=args.leader_elect,
        seed=args.seed,
        identity=args.identity,
        quota=args.quota,
        quota_configmap=args.quota_configmap,
        quota_poll_interval=args.quota_poll_interval,
        preemption_min_runtime=args.preemption_min_runtime,
        **serving,  # type: ignore[arg-type]
    )
    try:
        return run_on_loop(args.event_loop, lambda: run(options, config))
    # EventLoopUnavailable: refused before connecting; ConfigError: a bad or missing quota file
    except (EventLoopUnavailable, KubeConfigError, ConfigError) as err:
        print(f"batchsched run: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT


def configure_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, msg (our messages are key=value)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def run_place(args: argparse.Namespace) -> int:
    # Imported here, not at the top: `batchsched run` builds the same parser and would pay
    # for the cluster file reader (DRA, CEL) and the what-if driver at start-up (issue #17).
    from batchsched.cluster_file import ClusterFileError, load_cluster, skipped_text
    from batchsched.config import ConfigError, default_config, load_config
    from batchsched.sim.nrt_topologies import measured_topologies
    from batchsched.sim.progress import Progress
    from batchsched.views.place_tenants import what_if_tenants
    from batchsched.views.place_text import render
    from batchsched.whatif import DeviceObjects, place_pending
    from queues.config import load_quota_file

    cluster = args.cluster
    pods = args.pods
    if cluster is None and pods is None:
        cluster, pods = _example("cluster.yaml"), _example("pending-pods.yaml")
    paths = [p for p in (cluster, pods) if p is not None]
    note = _stderr_note("place", args.quiet)
    try:
        config = load_config(args.config) if args.config else default_config()
        profiles = config.build_profiles()
        policy = load_quota_file(args.quota) if args.quota is not None else None
        gc.disable()  # a dump is 10^6 acyclic objects: the collector only rescans them
        state = load_cluster(paths, devices=True, progress=note)
        topologies = measured_topologies(state.topologies)
    except (ClusterFileError, ConfigError) as err:
        print(f"batchsched place: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    finally:
        gc.freeze()  # what was read stays: later collections pass it over
        gc.enable()
    if state.skipped:
        note(skipped_text(state.skipped))
    tenants = None if policy is None else what_if_tenants(policy, profiles, state)
    started = time.monotonic()
    pending = sum(1 for p in state.pods if not p.node_name and not p.is_finished)
    note(f"placing {pending} pending pods on {len(state.nodes)} nodes")
    bar = Progress(pending, "batchsched place", enabled=not args.quiet)
    result = place_pending(
        state.nodes,
        state.pods,
        profiles,
        state.namespace_labels,
        seed=args.seed,
        pod_groups=state.pod_groups,
        now=time.time(),
        devices=DeviceObjects(state.device_classes, state.resource_slices, state.resource_claims),
        topologies=topologies,
        tenants=tenants,
        progress=bar,
    )
    bar.close()
    placed = sum(1 for node in result.placements.values() if node)
    took = time.monotonic() - started
    note(f"placed {placed} of {len(result.order)} pending pods ({took:.1f} s)")
    print(render(result, args.output))
    gc.unfreeze()
    return 0


def _stderr_note(command: str, quiet: bool) -> Callable[[str], None]:
    """A line on stderr per step of a what-if run; nothing with --quiet."""

    def note(line: str) -> None:
        if not quiet:
            print(f"batchsched {command}: {line}", file=sys.stderr, flush=True)

    return note


def run_simulate(args: argparse.Namespace) -> int:
    from batchsched.sim.command import SimulateRequest, execute

    request = SimulateRequest(
        nodes=args.nodes,
        cluster=args.cluster,
        pods=args.pods,
        generate=args.generate,
        method=args.method,
        inflation=args.inflation,
        seed=args.seed,
        config=args.config,
        percentage=args.percentage,
        json_out=args.json_out,
        report=args.report,
        quiet=args.quiet,
        policy=args.policy,
        quota=args.quota,
    )
    return execute(request, sys.stdout, sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
    args = build_parser().parse_args(argv)
    if args.command in ("queue", "explain", "gpus"):
        from batchsched.views.live import run_view

        return run_view(args)
    if args.command == "place":
        return run_place(args)
    if args.command == "run":
        return run_scheduler(args)
    if args.command == "simulate":
        return run_simulate(args)
    if args.command == "extender":
        return run_extender(args)
    return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())

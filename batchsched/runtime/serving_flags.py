"""`batchsched run`'s serving flags, named and defaulted as kube-scheduler's
(docs/operations.md, "Serving and security")."""

from __future__ import annotations

import argparse
from pathlib import Path

from batchsched.runtime.app_options import ALWAYS_ALLOW_PATHS

__all__ = ["add_serving_arguments", "serving_options"]

SECURE_PORT = 10259


def add_serving_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--secure-port",
        type=int,
        default=SECURE_PORT,
        help="HTTPS port for /metrics, /healthz, /livez, /readyz, /configz and "
        f"/debug/flags/v, with delegated authentication and authorization (default "
        f"{SECURE_PORT}; 0 turns it off)",
    )
    run.add_argument(
        "--bind-address", default="0.0.0.0", help="address of the secure port (default 0.0.0.0)"
    )
    run.add_argument("--tls-cert-file", type=Path, help="serving certificate (PEM)")
    run.add_argument("--tls-private-key-file", type=Path, help="its private key (PEM)")
    run.add_argument(
        "--cert-dir",
        type=Path,
        help="where a self-signed certificate is written when no --tls-cert-file is given "
        "(default: a new folder under $TMPDIR)",
    )
    run.add_argument(
        "--client-ca-file",
        type=Path,
        help="CA bundle: client certificates it signed authenticate as CN (user) and O (groups)",
    )
    run.add_argument(
        "--authorization-always-allow-paths",
        default=",".join(ALWAYS_ALLOW_PATHS),
        help="paths served on the secure port without a SubjectAccessReview; a trailing * "
        "matches a prefix (default %(default)s)",
    )
    run.add_argument(
        "--http-address",
        help="host:port of a plain HTTP listener for /healthz, /livez, /readyz and /metrics "
        "without authentication (off unless given; port 0 picks a free one)",
    )


def serving_options(args: argparse.Namespace) -> dict[str, object]:
    """RunOptions' serving fields from the flags; `ValueError` saying which flag is wrong."""
    if (args.tls_cert_file is None) != (args.tls_private_key_file is None):
        raise ValueError("--tls-cert-file and --tls-private-key-file go together")
    for flag in ("tls_cert_file", "tls_private_key_file", "client_ca_file"):
        path = getattr(args, flag)
        if path is not None and not path.is_file():
            raise ValueError(f"--{flag.replace('_', '-')}: no file at {path}")
    if not 0 <= args.secure_port <= 65535:
        raise ValueError(f"--secure-port: {args.secure_port} is not a port")
    options: dict[str, object] = {
        "bind_address": args.bind_address,
        "secure_port": args.secure_port or None,
        "tls_cert_file": args.tls_cert_file,
        "tls_private_key_file": args.tls_private_key_file,
        "cert_dir": args.cert_dir,
        "client_ca_file": args.client_ca_file,
        "always_allow_paths": tuple(
            p.strip() for p in args.authorization_always_allow_paths.split(",") if p.strip()
        ),
    }
    if args.http_address:
        host, _, port = args.http_address.rpartition(":")
        if not port.isdigit():
            raise ValueError(f"--http-address: {args.http_address!r} is not host:port")
        options.update(http_host=host or "0.0.0.0", http_port=int(port))
    return options

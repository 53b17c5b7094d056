"""Who wrote what: per-replica client certificates and the API server's audit log.

Every scheduler process of the chaos soak gets a client certificate of its own (signed by the
control plane's CA, CN `batchsched-<identity>`, group system:masters), so the API server's
audit log names the process behind every request. The API server is started with an audit
policy (through BATCHSCHED_APISERVER_EXTRA_ARGS, which scripts/control-plane.sh passes on)
that records, at Metadata level, every write by those users and every pod creation,
deletion or eviction by anyone.

`AuditCheck` (purely computational) then checks invariant 7's second half exactly: a
replica's write (anything but the election Lease itself) is legal only while that replica
holds the Lease, i.e. its last successful Lease write was its own acquisition or renewal and
is less than leaseDuration old (else: expired-lease-write), with no other replica's
successful Lease write since (else: standby-write). It also
counts successful Bindings per pod name, to compare with the uids the checker saw.
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Final

from batchsched.bench.chaos_pods import clock

USER_PREFIX: Final = "batchsched-"
REPLICA_PREFIX: Final = "batchsched-replica-"  # identities are replica-<slot>-<n>
WRITE_VERBS: Final = frozenset({"create", "update", "patch", "delete", "deletecollection"})


def audit_policy_yaml() -> str:
    return (
        "apiVersion: audit.k8s.io/v1\n"
        "kind: Policy\n"
        "omitStages: [RequestReceived]\n"
        "rules:\n"
        "- level: Metadata\n"
        '  userGroups: ["batchsched:replicas"]\n'
        f"  verbs: [{', '.join(sorted(WRITE_VERBS))}]\n"
        "- level: Metadata\n"
        "  verbs: [create, delete, deletecollection]\n"
        '  resources: [{group: "", resources: [pods]}]\n'
        "- level: Metadata\n"
        "  verbs: [create]\n"
        '  resources: [{group: "", resources: [pods/eviction]}]\n'
        "- level: None\n"
    )


def apiserver_audit_args(policy: Path, log: Path) -> str:
    """The value for BATCHSCHED_APISERVER_EXTRA_ARGS (split on blanks: no spaces in paths)."""
    return (
        f"--audit-policy-file={policy} --audit-log-path={log} --audit-log-maxsize=100000 "
        "--audit-log-maxbackup=1"
    )


def write_replica_kubeconfig(pki: Path, out_dir: Path, identity: str, server: str) -> Path:
    """A client certificate for `identity` signed by the control plane's CA, and a kubeconfig
    that talks to `server` with it."""
    key, csr, crt = (out_dir / f"{identity}.{ext}" for ext in ("key", "csr", "crt"))
    ext = out_dir / f"{identity}.ext"
    ext.write_text("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    subject = f"/O=system:masters/O=batchsched:replicas/CN={USER_PREFIX}{identity}"
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", str(key), "-subj", subject, "-out", str(csr))  # fmt: skip
    # A serial of its own, not -CAcreateserial: replicas started together would race on the
    # CA's shared serial file (openssl failed that way once in a smoke run).
    serial = str(secrets.randbits(63))
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(pki / "ca.crt"), "-CAkey",
             str(pki / "ca.key"), "-set_serial", serial, "-days", "2", "-extfile", str(ext),
             "-out", str(crt))  # fmt: skip
    path = out_dir / f"{identity}.kubeconfig"
    path.write_text(
        kubeconfig_text(server, (pki / "ca.crt").read_bytes(), crt.read_bytes(), key.read_bytes())
    )
    path.chmod(0o600)
    return path


def kubeconfig_text(server: str, ca: bytes, cert: bytes, key: bytes) -> str:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: chaos\n  cluster:\n    server: {server}\n"
        f"    certificate-authority-data: {b64(ca)}\n"
        f"users:\n- name: chaos\n  user:\n    client-certificate-data: {b64(cert)}\n"
        f"    client-key-data: {b64(key)}\n"
        "contexts:\n- name: chaos\n  context: {cluster: chaos, user: chaos}\n"
        "current-context: chaos\n"
    )


def _openssl(*args: str) -> None:
    done = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {done.stderr.strip()[-400:]}")


@dataclass(frozen=True)
class AuditRecord:
    at: float  # requestReceivedTimestamp, epoch seconds
    user: str
    verb: str
    resource: str  # resource[/subresource]
    namespace: str
    name: str
    code: int
    agent: str = ""  # the User-Agent's product ("kwok-v0.8.0"), for evidence

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 300

    def describe(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.verb} {self.resource} {where} -> {self.code}"


def parse_record(line: str) -> AuditRecord | None:
    """One audit log line (audit.k8s.io/v1 Event JSON); None for what is not a finished request."""
    try:
        raw = json.loads(line)
    except ValueError:
        return None
    if not isinstance(raw, dict) or raw.get("stage") != "ResponseComplete":
        return None
    ref = raw.get("objectRef") if isinstance(raw.get("objectRef"), dict) else {}
    user = raw.get("user") if isinstance(raw.get("user"), dict) else {}
    status = raw.get("responseStatus") if isinstance(raw.get("responseStatus"), dict) else {}
    assert isinstance(ref, dict) and isinstance(user, dict) and isinstance(status, dict)
    resource = str(ref.get("resource", ""))
    if ref.get("subresource"):
        resource += f"/{ref['subresource']}"
    return AuditRecord(
        at=parse_time(str(raw.get("requestReceivedTimestamp", ""))),
        user=str(user.get("username", "")),
        verb=str(raw.get("verb", "")),
        resource=resource,
        namespace=str(ref.get("namespace", "")),
        name=str(ref.get("name", "")),
        code=int(status.get("code", 0) or 0),
        agent=str(raw.get("userAgent", "")).split("/", 1)[0],
    )


def parse_time(text: str) -> float:
    """RFC 3339 with optional fractional seconds ("2026-11-26T08:50:00.123456Z") to epoch."""
    if not text:
        return 0.0
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass
class _Holding:
    user: str
    last_write: float


@dataclass
class AuditCheck:
    """Feed records in `requestReceivedTimestamp` order (`feed` sorts each batch)."""

    lease_name: str
    lease_duration_s: float
    holding: _Holding | None = None
    # (record, "standby-write" | "expired-lease-write", why)
    standby_writes: list[tuple[AuditRecord, str, str]] = field(default_factory=list)
    writes_by_user: dict[str, int] = field(default_factory=dict)
    bindings: dict[str, int] = field(default_factory=dict)  # ns/name -> successful Bindings
    deleters: dict[str, list[AuditRecord]] = field(default_factory=dict)  # ns/name -> requests
    acquisitions: list[tuple[float, str]] = field(default_factory=list)

    def feed(self, records: Iterable[AuditRecord]) -> None:
        for record in sorted(records, key=lambda r: r.at):
            self._one(record)

    def _one(self, r: AuditRecord) -> None:
        if (r.resource, r.verb) in (("pods", "delete"), ("pods/eviction", "create")):
            self.deleters.setdefault(f"{r.namespace}/{r.name}", []).append(r)
        if not r.user.startswith(REPLICA_PREFIX) or r.verb not in WRITE_VERBS:
            return
        if r.resource == "leases" and r.name == self.lease_name:
            if r.ok:
                if self.holding is None or self.holding.user != r.user:
                    self.acquisitions.append((r.at, r.user))
                self.holding = _Holding(r.user, r.at)
            return
        self.writes_by_user[r.user] = self.writes_by_user.get(r.user, 0) + 1
        kind, why = self._not_leading(r)
        if kind:
            self.standby_writes.append((r, kind, why))
        if r.resource == "pods/binding" and r.ok:
            key = f"{r.namespace}/{r.name}"
            self.bindings[key] = self.bindings.get(key, 0) + 1

    def _not_leading(self, r: AuditRecord) -> tuple[str, str]:
        """("", "") when `r.user` held the Lease when the server received `r`; else the
        violation's kind and why."""
        h = self.holding
        if h is None:
            return "standby-write", "no replica held the Lease yet"
        if h.user != r.user:
            return "standby-write", f"the Lease was held by {h.user}"
        age = r.at - h.last_write
        if age > self.lease_duration_s:
            limit = self.lease_duration_s
            why = f"its last Lease write was {age:.1f}s earlier (leaseDuration {limit:g}s)"
            return "expired-lease-write", why
        return "", ""


def read_new_records(path: Path, offset: int) -> tuple[list[AuditRecord], int]:
    """Complete lines appended since `offset`; the new offset (a partial last line waits)."""
    try:
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1
    records = [parse_record(line.decode(errors="replace")) for line in data[:end].splitlines()]
    return [r for r in records if r is not None], offset + end


def last_deleter(
    records: Mapping[str, list[AuditRecord]], key: str, seen: float
) -> AuditRecord | None:
    """The last successful delete or eviction of pod `key` received before its deletion was
    seen (`seen`, plus a second for the watch's delay), or None."""
    found = [r for r in records.get(key, []) if r.ok and r.at <= seen + 1.0]
    return max(found, key=lambda r: r.at, default=None)


def describe_deleters(records: Mapping[str, list[AuditRecord]], key: str, near: float) -> str:
    """Evidence: who asked for the deletion of pod `key` in the minute before `near`."""
    found = [r for r in records.get(key, []) if near - 60.0 <= r.at <= near + 1.0]
    return (
        "; ".join(f"{r.user} ({r.agent}) {r.describe()} at {clock(r.at)}" for r in found)
        or "no request"
    )

"""TLS for the secure port: the serving certificate (given, or self-signed at start as
kube-scheduler does without --tls-cert-file) and the client certificates it accepts."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import tempfile
from pathlib import Path

__all__ = ["ServingCert", "peer_identity", "self_signed", "server_context"]

_VALID_FOR = datetime.timedelta(days=365)


class ServingCert:
    """Paths of a PEM certificate and its key."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.cert = cert
        self.key = key


def self_signed(cert_dir: Path | None, host: str) -> ServingCert:
    """A self-signed ECDSA P-256 certificate for this host (the hostname, localhost,
    127.0.0.1 and `host` as subject alternative names), written to `cert_dir` (a new
    temporary folder when None): clients that do not pin it use insecureSkipVerify, as
    Prometheus does for kube-scheduler's self-signed certificate."""
    # Imported here: cryptography costs ~45 ms of start-up (issue #17), and only a secure port
    # without --tls-cert-file needs it (the Helm chart passes one; the benches serve none).
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder = cert_dir if cert_dir is not None else Path(tempfile.mkdtemp(prefix="batchsched-"))
    folder.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = socket.gethostname()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name}@batchsched")])
    sans: list[x509.GeneralName] = [x509.DNSName(name), x509.DNSName("localhost")]
    for address in {"127.0.0.1", host}:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(address)))
        except ValueError:
            continue  # a host name, already covered or not ours to claim
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALID_FOR)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(key, hashes.SHA256())
    )
    paths = ServingCert(folder / "batchsched.crt", folder / "batchsched.key")
    paths.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths.key.touch(mode=0o600)
    paths.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


def server_context(cert: ServingCert, client_ca: Path | None) -> ssl.SSLContext:
    """TLS 1.2+; with `client_ca`, a client certificate is asked for and, when sent, must be
    signed by it (a request without one still goes on, to token or anonymous authentication)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert.cert, cert.key)
    if client_ca is not None:
        context.load_verify_locations(cafile=str(client_ca))
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


def peer_identity(peercert: object) -> tuple[str, tuple[str, ...]] | None:
    """Purely computational: (user, groups) of a verified client certificate as the API
    server reads one (CN the user, each O a group); None for no certificate."""
    if not isinstance(peercert, dict) or not peercert.get("subject"):
        return None
    user = ""
    groups: list[str] = []
    for rdn in peercert["subject"]:
        for key, value in rdn:
            if key == "commonName":
                user = value
            elif key == "organizationName":
                groups.append(value)
    return (user, tuple(groups)) if user else None

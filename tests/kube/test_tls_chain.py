"""What a client context sends as its certificate chain, seen by a TLS server on loopback."""

from __future__ import annotations

import base64
import datetime
import socket
import ssl
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from batchsched.kube import tls_chain, transport
from batchsched.kube.client import api_client
from batchsched.kube.tls_chain import send_as_loaded, sends_as_loaded

_Key = ec.EllipticCurvePrivateKey


def _cert(
    name: str, key: _Key, issuer: tuple[x509.Certificate, _Key] | None, *, ca: bool
) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer[0].subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        san = x509.SubjectAlternativeName([x509.DNSName("localhost")])
        builder = builder.add_extension(san, critical=False)
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256())


def _pem(*certs: x509.Certificate) -> bytes:
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)


def _key_pem(key: _Key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


class _Pki:
    """A CA, an intermediate CA under it, and server and client certificates."""

    def __init__(self, folder: Path) -> None:
        ca_key, mid_key = (
            ec.generate_private_key(ec.SECP256R1()),
            ec.generate_private_key(ec.SECP256R1()),
        )
        ca = _cert("test-ca", ca_key, None, ca=True)
        mid = _cert("test-intermediate", mid_key, (ca, ca_key), ca=True)
        self.ca = folder / "ca.crt"
        self.ca.write_bytes(_pem(ca))
        self.bundle = folder / "bundle.crt"  # the CA and the intermediate, both trusted
        self.bundle.write_bytes(_pem(ca, mid))
        for name, issuer in (("server", (ca, ca_key)), ("client", (ca, ca_key))):
            key = ec.generate_private_key(ec.SECP256R1())
            (folder / f"{name}.crt").write_bytes(_pem(_cert(name, key, issuer, ca=False)))
            (folder / f"{name}.key").write_bytes(_key_pem(key))
        key = ec.generate_private_key(ec.SECP256R1())
        leaf = _cert("client-under-intermediate", key, (mid, mid_key), ca=False)
        (folder / "mid-client.crt").write_bytes(_pem(leaf))
        (folder / "mid-client-chain.crt").write_bytes(_pem(leaf, mid))
        (folder / "mid-client.key").write_bytes(_key_pem(key))
        self.folder = folder


def _chain_length_seen(pki: _Pki, client: ssl.SSLContext) -> int:
    """How many certificates a server receives from `client` in one handshake."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(pki.folder / "server.crt", pki.folder / "server.key")
    server.verify_mode = ssl.CERT_OPTIONAL
    server.load_verify_locations(pki.bundle)
    seen: list[int] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def serve() -> None:
            conn, _ = listener.accept()
            with server.wrap_socket(conn, server_side=True) as tls:
                chain: Callable[[], list[object]] = (
                    getattr(tls, "get_unverified_chain", None) or tls._sslobj.get_unverified_chain
                )  # type: ignore[attr-defined]
                seen.append(len(chain()))

        thread = threading.Thread(target=serve)
        thread.start()
        with (
            socket.create_connection(("127.0.0.1", port)) as raw,
            client.wrap_socket(raw, server_hostname="localhost") as tls,
        ):
            tls.do_handshake()
        thread.join(timeout=30)
    assert seen, "the server saw no handshake"
    return seen[0]


def _client(pki: _Pki, cert: str, cafile: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=cafile)
    context.load_cert_chain(
        pki.folder / f"{cert}.crt", pki.folder / f"{cert.split('-chain')[0]}.key"
    )
    return context


@pytest.fixture
def pki(tmp_path: Path) -> _Pki:
    return _Pki(tmp_path)


def test_openssl_adds_the_ca_to_a_lone_client_certificate(pki: _Pki) -> None:
    # The behaviour this module exists for: with its CA trusted, OpenSSL sends it too.
    assert _chain_length_seen(pki, _client(pki, "client", pki.ca)) == 2


def test_send_as_loaded_sends_the_certificate_alone(pki: _Pki) -> None:
    context = _client(pki, "client", pki.ca)
    assert not sends_as_loaded(context)
    assert send_as_loaded(context)
    assert sends_as_loaded(context)
    assert _chain_length_seen(pki, context) == 1


def test_a_chain_the_file_holds_is_still_sent(pki: _Pki) -> None:
    # Leaf + intermediate in the certificate file: both go, with or without auto-chaining.
    context = _client(pki, "mid-client-chain", pki.bundle)
    assert send_as_loaded(context)
    assert _chain_length_seen(pki, context) == 2


def test_auto_chaining_would_add_intermediate_and_root(pki: _Pki) -> None:
    # A lone leaf under an intermediate, both CAs trusted: OpenSSL would send all three;
    # as loaded, only the leaf goes, which is what a Go client (kubectl) sends.
    assert _chain_length_seen(pki, _client(pki, "mid-client", pki.bundle)) == 3
    context = _client(pki, "mid-client", pki.bundle)
    assert send_as_loaded(context)
    assert _chain_length_seen(pki, context) == 1


def test_left_alone_where_the_layout_is_unknown(pki: _Pki, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tls_chain, "_calls", lambda: None)
    context = _client(pki, "client", pki.ca)
    assert not send_as_loaded(context)
    assert _chain_length_seen(pki, context) == 2


def test_nothing_is_written_where_the_options_do_not_read_back(
    pki: _Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tls_chain._calls()
    assert real is not None  # CPython on Linux, where the tests run
    written: list[tuple[object, ...]] = []

    class Misread:
        def get_options(self, pointer: int) -> int:
            return int(real.get_options(pointer)) ^ 1

        def ctrl(self, *args: object) -> int:
            written.append(args)
            return 0

    monkeypatch.setattr(tls_chain, "_calls", Misread)
    context = _client(pki, "client", pki.ca)
    assert not send_as_loaded(context)
    assert written == []
    assert _chain_length_seen(pki, context) == 2


async def test_api_client_sends_a_kubeconfig_certificate_as_loaded(pki: _Pki) -> None:
    def data(name: str) -> str:
        return base64.b64encode((pki.folder / name).read_bytes()).decode()

    kubeconfig = pki.folder / "kubeconfig"
    kubeconfig.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:1
    certificate-authority-data: {data("ca.crt")}
users:
- name: u
  user:
    client-certificate-data: {data("client.crt")}
    client-key-data: {data("client.key")}
contexts:
- name: c
  context: {{cluster: c, user: u}}
current-context: c
"""
    )
    api = await api_client(str(kubeconfig))
    try:
        held = transport._held_context(api)
        assert held is not None
        assert sends_as_loaded(held)
        assert transport._tls_context(api) is held  # the lean pool presents the same
    finally:
        await api.close()

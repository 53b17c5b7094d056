"""Present the kubeconfig's client certificate as it is, not the chain OpenSSL builds for it.

When a context holds a client certificate and also trusts the CA that signed it (the
kubeconfig's `certificate-authority-data` usually is that CA), OpenSSL completes the client's
chain from its trust store and sends the CA along with the certificate. Go clients (kubectl,
client-go, kube-scheduler) send what the certificate file holds and nothing more. The API
server verifies the client's chain on every request, not once per connection: first as a
front-proxy candidate (`--requestheader-client-ca-file`), then against `--client-ca-file`, and
the extra certificate costs an ECDSA verification in each. In an 8-second CPU profile of the
API server during the 5000-pod backlog bench, chain verification took 2.37 of 8.67 CPU-seconds
for our requests, 0.86 of 6.59 for kube-scheduler's, and 0.77 once the CA was no longer sent
(docs/benchmarks.md, "The client certificate chain").

Python's ssl module has no switch for OpenSSL's SSL_MODE_NO_AUTO_CHAIN, so `send_as_loaded`
sets it on the context's SSL_CTX through ctypes, and only where that is known to be sound:
CPython with the usual object header, `_ssl` linked against an OpenSSL that exports the calls,
and the pointer found checked against the context's own options before anything is written.
Elsewhere it leaves the context alone (the old behaviour: correct, dearer for the server). A
certificate file that holds its intermediates still sends them: OpenSSL only builds a chain
when the file gave none.
"""

from __future__ import annotations

import ctypes
import logging
import ssl
import sys
import sysconfig
from functools import cache
from typing import Final

__all__ = ["send_as_loaded", "sends_as_loaded"]

log = logging.getLogger(__name__)

_SSL_CTRL_MODE: Final = 33  # SSL_CTX_ctrl(ctx, SSL_CTRL_MODE, bits, NULL): set mode bits
_SSL_MODE_NO_AUTO_CHAIN: Final = 0x8


class _Calls:
    """SSL_CTX_ctrl and SSL_CTX_get_options from the libssl that Python's _ssl is linked to
    (a lookup through _ssl's handle searches its dependencies)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.ctrl = lib.SSL_CTX_ctrl
        self.ctrl.restype = ctypes.c_long
        self.ctrl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
        self.get_options = lib.SSL_CTX_get_options
        self.get_options.restype = ctypes.c_uint64
        self.get_options.argtypes = [ctypes.c_void_p]


@cache
def _calls() -> _Calls | None:
    if sys.implementation.name != "cpython" or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return None  # another object layout
    if hasattr(sys, "getobjects"):
        return None  # Py_TRACE_REFS: a larger object header
    module = getattr(ssl, "_ssl", None)
    path = getattr(module, "__file__", None)
    if not path:
        return None  # built into the interpreter: no handle to search
    try:
        return _Calls(ctypes.CDLL(path))
    except (OSError, AttributeError):
        return None


def _ssl_ctx(context: ssl.SSLContext, calls: _Calls) -> int | None:
    """The SSL_CTX pointer: PySSLContext's first field, right after the object header
    (reference count and type). None unless OpenSSL reads the context's own options there."""
    header = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)
    pointer = ctypes.c_void_p.from_address(id(context) + header).value
    if not pointer or calls.get_options(pointer) != context.options:
        return None
    return pointer


def send_as_loaded(context: ssl.SSLContext) -> bool:
    """Make `context` send only the certificates its certificate file holds (as Go clients
    do); False where that cannot be done soundly, the context unchanged."""
    calls = _calls()
    pointer = _ssl_ctx(context, calls) if calls is not None else None
    if calls is None or pointer is None:
        log.info("tls: the client certificate's chain is sent as OpenSSL builds it")
        return False
    calls.ctrl(pointer, _SSL_CTRL_MODE, _SSL_MODE_NO_AUTO_CHAIN, None)
    return True


def sends_as_loaded(context: ssl.SSLContext) -> bool:
    """Is SSL_MODE_NO_AUTO_CHAIN set on `context`? (for tests and diagnostics)"""
    calls = _calls()
    pointer = _ssl_ctx(context, calls) if calls is not None else None
    if calls is None or pointer is None:
        return False
    return bool(calls.ctrl(pointer, _SSL_CTRL_MODE, 0, None) & _SSL_MODE_NO_AUTO_CHAIN)

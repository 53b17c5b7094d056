"""A raw TCP proxy between the schedulers and the API server that can cut every connection.

TLS passes through unchanged (the API server's certificate has IP SAN 127.0.0.1, so the
client verifies it as if it spoke to the server directly). It runs as a process of its own,
so the bench's own work never delays the schedulers' traffic:

    python -m batchsched.bench.chaos_proxy --upstream 127.0.0.1:6443   # prints "port=N"

SIGUSR1 resets every open connection (both sides, as a load balancer restart would: watches
and requests in flight all break); SIGTERM stops it. `ProxyProcess` drives it from the bench.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

_CHUNK: Final = 1 << 16
_READY_TIMEOUT_S: Final = 30.0


class Proxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.open: set[asyncio.StreamWriter] = set()
        self.cuts = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()  # the API server is down: the client retries
            return
        pair = {writer, up_writer}
        self.open |= pair
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            self.open -= pair
            for w in pair:
                w.transport.abort()

    def cut_all(self) -> None:
        self.cuts += 1
        for w in list(self.open):
            w.transport.abort()
        self.open.clear()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.transport.abort()


async def serve(upstream: str, listen_port: int) -> None:
    host, _, port = upstream.rpartition(":")
    proxy = Proxy(host, int(port))
    server = await asyncio.start_server(proxy.handle, "127.0.0.1", listen_port)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGUSR1, proxy.cut_all)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    print(f"port={server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await stop.wait()
    proxy.cut_all()


class ProxyProcess:
    """The proxy as a subprocess: `start()`, `cut()`, `stop()`; `port` once started."""

    def __init__(self, upstream: str, log: Path) -> None:
        self.upstream = upstream
        self.log = log
        self.port = 0
        self.cuts = 0
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [sys.executable, "-m", "batchsched.bench.chaos_proxy", "--upstream", self.upstream]
        with self.log.open("wb") as out:
            self._proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while not self.port:
            if self._proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chaos proxy did not start: {self.log.read_text()[-400:]}")
            text = self.log.read_text()
            if text.startswith("port="):
                self.port = int(text.split("=", 1)[1].split()[0])
            else:
                time.sleep(0.05)

    def cut(self) -> None:
        assert self._proc is not None
        self._proc.send_signal(signal.SIGUSR1)
        self.cuts += 1

    def stop(self) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m batchsched.bench.chaos_proxy")
    parser.add_argument("--upstream", required=True, help="host:port of the API server")
    parser.add_argument("--port", type=int, default=0, help="listen port (0: any free one)")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.upstream, args.port))


if __name__ == "__main__":
    main()

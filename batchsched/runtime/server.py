"""The scheduler's HTTP endpoints (aiohttp): /healthz, /livez, /readyz and /metrics, and on
the secure port also /configz and PUT /debug/flags/v.

The server only reports; it decides nothing. What "healthy" and "ready" mean is handed in
as callables by the app, so this module knows nothing of informers, loops or leases:

- /healthz: 200 "ok" while `health()` says the process's loops are alive, 500 otherwise
  (a liveness probe failing restarts the container).
- /readyz: 200 when every check from `ready()` passes, 503 otherwise; the body lists each
  check the way kube components do (`[+]informers-synced ok`, `[-]name failed: reason`),
  then `leader: true|false` (a standby is ready: it keeps a warm cache to take over with).
- /metrics: the Prometheus text exposition of the scheduler's own registry.
- /configz: the KubeSchedulerConfiguration in force, as JSON under "componentconfig".
- PUT /debug/flags/v: the body a klog verbosity; 4 and above set logging DEBUG, 0-3 INFO.

Who may call what is decided by middleware handed in (runtime/serving_auth.py).
"""

from __future__ import annotations

import json
import logging
import ssl
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType

from aiohttp import web

from batchsched.metrics import CONTENT_TYPE, SchedulerMetrics

logger = logging.getLogger(__name__)

HealthCheck = Callable[[], tuple[bool, str]]
ReadyChecks = Callable[[], Mapping[str, tuple[bool, str]]]
LeaderStatus = Callable[[], bool]
Configz = Callable[[], Mapping[str, object]]
Middleware = Callable[..., object]

# klog's convention: V(4) and above is debug detail; everything below is info.
DEBUG_FROM_V = 4


def verbosity_level(text: str) -> int:
    """Purely computational: the logging level for a klog verbosity (`ValueError` for
    anything but a whole number >= 0)."""
    v = int(text.strip())
    if v < 0:
        raise ValueError(f"verbosity must be >= 0, not {v}")
    return logging.DEBUG if v >= DEBUG_FROM_V else logging.INFO


def readyz_report(checks: Mapping[str, tuple[bool, str]], leader: bool | None) -> tuple[bool, str]:
    """Purely computational: (all checks passed, the /readyz body)."""
    lines = [
        f"[+]{name} ok" if passed else f"[-]{name} failed: {reason}"
        for name, (passed, reason) in checks.items()
    ]
    if leader is not None:
        lines.append(f"leader: {'true' if leader else 'false'}")
    ready = all(passed for passed, _ in checks.values())
    lines.append("readyz check passed" if ready else "readyz check failed")
    return ready, "\n".join(lines) + "\n"


def make_app(
    *,
    health: HealthCheck,
    ready: ReadyChecks,
    metrics: SchedulerMetrics,
    leader: LeaderStatus | None = None,
    configz: Configz | None = None,
    middlewares: Sequence[Middleware] = (),
) -> web.Application:
    """The aiohttp application; `leader` None leaves the leader line out (no election);
    `configz` given adds /configz and /debug/flags/v (the secure port's)."""

    async def healthz(_: web.Request) -> web.Response:
        try:
            alive, reason = health()
        except Exception as err:  # a broken check is a failed check, not a 500 traceback
            logger.exception("health check raised")
            alive, reason = False, f"health check raised {err!r}"
        if alive:
            return web.Response(text="ok")
        return web.Response(status=500, text=f"healthz check failed: {reason}\n")

    async def readyz(_: web.Request) -> web.Response:
        try:
            checks = dict(ready())
        except Exception as err:
            logger.exception("readiness checks raised")
            checks = {"readyz": (False, f"readiness checks raised {err!r}")}
        passed, body = readyz_report(checks, leader() if leader is not None else None)
        return web.Response(status=200 if passed else 503, text=body)

    async def metrics_page(_: web.Request) -> web.Response:
        return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    app = web.Application(middlewares=list(middlewares))  # type: ignore[arg-type]
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/livez", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics_page)
    if configz is not None:
        add_debug_routes(app, configz)
    return app


def add_debug_routes(app: web.Application, configz: Configz) -> None:
    async def configz_page(_: web.Request) -> web.Response:
        body = json.dumps({"componentconfig": configz()}, indent=2)
        return web.Response(text=body, content_type="application/json")

    async def set_verbosity(request: web.Request) -> web.Response:
        text = await request.text()
        try:
            level = verbosity_level(text)
        except ValueError:
            return web.Response(status=400, text=f"invalid verbosity {text.strip()!r}\n")
        logging.getLogger().setLevel(level)
        name = logging.getLevelName(level)
        logger.info("verbosity set v=%s level=%s", text.strip(), name)
        return web.Response(text=f"successfully set verbosity to {text.strip()} ({name})\n")

    app.router.add_get("/configz", configz_page)
    app.router.add_put("/debug/flags/v", set_verbosity)


class RunningServer:
    """A listening server: `port` is the bound one (useful with port 0). Close it once."""

    def __init__(self, runner: web.AppRunner, port: int) -> None:
        self._runner = runner
        self.port = port

    async def close(self) -> None:
        await self._runner.cleanup()

    async def __aenter__(self) -> RunningServer:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


async def serve(
    address: str,
    port: int,
    *,
    health: HealthCheck,
    ready: ReadyChecks,
    metrics: SchedulerMetrics,
    leader: LeaderStatus | None = None,
    configz: Configz | None = None,
    middlewares: Sequence[Middleware] = (),
    ssl_context: ssl.SSLContext | None = None,
) -> RunningServer:
    """Start listening on address:port and return once connections are accepted (TLS
    with `ssl_context`).

    Returning is the readiness signal; the returned server has the bound port. Stop it with
    `await server.close()` (or use it as `async with await serve(...) as server:`).
    """
    app = make_app(
        health=health,
        ready=ready,
        metrics=metrics,
        leader=leader,
        configz=configz,
        middlewares=middlewares,
    )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, address, port, ssl_context=ssl_context)
        await site.start()
        bound = int(runner.addresses[0][1])
    except BaseException:
        await runner.cleanup()
        raise
    scheme = "https" if ssl_context is not None else "http"
    logger.info("serving scheme=%s address=%s port=%d", scheme, address, bound)
    return RunningServer(runner, bound)

"""A small real extender for tests: an aiohttp server on loopback answering fixed verdicts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class Verdicts:
    """What the extender answers: nodes it refuses (and whether unresolvably), its scores,
    and a delay before answering (to test timeouts)."""

    refuse: dict[str, str] = field(default_factory=dict)
    unresolvable: dict[str, str] = field(default_factory=dict)
    scores: dict[str, int] = field(default_factory=dict)
    delay: float = 0.0
    calls: list[tuple[str, dict[str, object]]] = field(default_factory=list)
    # bind: what to do with ExtenderBindingArgs; its return is the answer's Error ("" = bound)
    bind: Callable[[dict[str, object]], Awaitable[str]] | None = None
    # called with each filter call's ExtenderArgs before it is answered (to act meanwhile)
    on_filter: Callable[[dict[str, object]], None] | None = None
    # preempt: ExtenderPreemptionArgs -> ExtenderPreemptionResult (None: keep every victim)
    preempt: Callable[[dict[str, object]], object] | None = None
    in_flight: int = 0  # filter calls being answered now, and the most there ever were
    most_in_flight: int = 0


def meta_victims(args: dict[str, object]) -> dict[str, list[str]]:
    """The victims' UIDs by node of ExtenderPreemptionArgs, whichever form it came in."""
    meta = args.get("NodeNameToMetaVictims")
    full = args.get("NodeNameToVictims")
    found: dict[str, list[str]] = {}
    if isinstance(meta, dict):
        for node, victims in meta.items():
            found[node] = [p["UID"] for p in victims["Pods"]]
    elif isinstance(full, dict):
        for node, victims in full.items():
            found[node] = [p["metadata"]["uid"] for p in victims["Pods"]]
    return found


def keeping(victims: dict[str, list[str]]) -> dict[str, object]:
    """An ExtenderPreemptionResult keeping these victim UIDs by node."""
    return {
        "NodeNameToMetaVictims": {
            node: {"Pods": [{"UID": uid} for uid in uids], "NumPDBViolations": 0}
            for node, uids in victims.items()
        }
    }


def _names(args: dict[str, object]) -> list[str]:
    names = args.get("NodeNames")
    if isinstance(names, list):
        return [str(n) for n in names]
    nodes = args.get("Nodes")
    items = nodes.get("items", []) if isinstance(nodes, dict) else []
    return [str(item["metadata"]["name"]) for item in items]


def extender_app(verdicts: Verdicts) -> web.Application:
    async def filter_(request: web.Request) -> web.Response:
        args = await request.json()
        verdicts.calls.append(("filter", args))
        if verdicts.on_filter is not None:
            verdicts.on_filter(args)
        verdicts.in_flight += 1
        verdicts.most_in_flight = max(verdicts.most_in_flight, verdicts.in_flight)
        try:
            await asyncio.sleep(verdicts.delay)  # the delay under test, not a wait in a test
        finally:
            verdicts.in_flight -= 1
        names = _names(args)
        refused = {**verdicts.refuse, **verdicts.unresolvable}
        passed = [n for n in names if n not in refused]
        body: dict[str, object] = {
            "FailedNodes": {n: w for n, w in verdicts.refuse.items() if n in names},
            "FailedAndUnresolvableNodes": {
                n: w for n, w in verdicts.unresolvable.items() if n in names
            },
            "Error": "",
        }
        if args.get("NodeNames") is not None:
            body["NodeNames"] = passed
        else:
            body["Nodes"] = {"items": [{"metadata": {"name": n}} for n in passed]}
        return web.json_response(body)

    async def prioritize(request: web.Request) -> web.Response:
        args = await request.json()
        verdicts.calls.append(("prioritize", args))
        await asyncio.sleep(verdicts.delay)
        scores = [{"Host": n, "Score": verdicts.scores.get(n, 0)} for n in _names(args)]
        return web.json_response(scores)

    async def bind(request: web.Request) -> web.Response:
        args = await request.json()
        verdicts.calls.append(("bind", args))
        error = await verdicts.bind(args) if verdicts.bind is not None else "no binder"
        return web.json_response({"Error": error})

    async def preempt(request: web.Request) -> web.Response:
        args = await request.json()
        verdicts.calls.append(("preempt", args))
        if verdicts.preempt is not None:
            return web.json_response(verdicts.preempt(args))
        return web.json_response(keeping(meta_victims(args)))

    app = web.Application()
    app.router.add_post("/filter", filter_)
    app.router.add_post("/prioritize", prioritize)
    app.router.add_post("/bind", bind)
    app.router.add_post("/preempt", preempt)
    return app


@asynccontextmanager
async def serving(verdicts: Verdicts, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve on a free loopback port; yields the URL prefix."""
    runner = web.AppRunner(extender_app(verdicts))
    await runner.setup()
    site = web.TCPSite(runner, host, 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()

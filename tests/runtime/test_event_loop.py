"""Which loop `batchsched run` and `batchsched extender` run on (runtime/event_loop.py)."""

from __future__ import annotations

import asyncio
import sys

import pytest
import uvloop

from batchsched.cli import EXIT_BAD_INPUT, main
from batchsched.runtime.event_loop import EventLoopUnavailable, loop_factory


async def _loop_type() -> type:
    return type(asyncio.get_running_loop())


def run_on(factory: object) -> type:
    assert callable(factory)
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(_loop_type())


def test_auto_is_uvloop_where_it_is_installed() -> None:
    name, factory = loop_factory("auto")

    assert name == "uvloop"
    assert run_on(factory) is uvloop.Loop


def test_asyncio_asked_for_is_asyncio_s_own_loop() -> None:
    name, factory = loop_factory("asyncio")

    assert name == "asyncio"
    assert not issubclass(run_on(factory), uvloop.Loop)


def test_auto_falls_back_to_asyncio_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError

    name, factory = loop_factory("auto")

    assert name == "asyncio"
    assert not issubclass(run_on(factory), uvloop.Loop)


@pytest.mark.parametrize(
    ("choice", "hidden", "says"),
    [
        pytest.param("uvloop", True, "uvloop: not installed", id="uvloop asked for, not installed"),
        pytest.param("trio", False, "one of auto, uvloop, asyncio", id="a loop nobody knows"),
    ],
)
def test_a_loop_that_cannot_be_had_is_an_error_saying_why(
    monkeypatch: pytest.MonkeyPatch, choice: str, hidden: bool, says: str
) -> None:
    if hidden:
        monkeypatch.setitem(sys.modules, "uvloop", None)

    with pytest.raises(EventLoopUnavailable, match=says):
        loop_factory(choice)


@pytest.mark.parametrize("command", ["run", "extender"])
def test_a_command_refuses_a_loop_it_cannot_have_before_connecting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)

    code = main([command, "--event-loop", "uvloop", "--kubeconfig", "/nonexistent/kubeconfig"])

    assert code == EXIT_BAD_INPUT
    assert f"batchsched {command}: event loop uvloop: not installed" in capsys.readouterr().err


def test_batchsched_extender_runs_on_the_loop_asked_for(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from batchsched.runtime import extender_server

    seen: list[type] = []

    async def serve(options: object, config: object) -> int:
        seen.append(type(asyncio.get_running_loop()))
        return 0

    monkeypatch.setattr(extender_server, "serve_extender", serve)

    assert main(["extender", "--event-loop", "asyncio", "--address", "127.0.0.1:0"]) == 0
    assert main(["extender", "--address", "127.0.0.1:0"]) == 0
    assert not issubclass(seen[0], uvloop.Loop)
    assert seen[1] is uvloop.Loop

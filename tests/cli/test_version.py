"""`batchsched --version` and `batchsched-agent --version` name the installed release."""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Sequence
from importlib import metadata

import pytest

from batchsched.cli import main as scheduler_main
from gpu.agent_cli import main as agent_main
from tests.integration.control_plane import ROOT

PROJECT_VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


@pytest.mark.parametrize(
    ("main", "prog"),
    [(scheduler_main, "batchsched"), (agent_main, "batchsched-agent")],
    ids=["the scheduler", "the node agent"],
)
def test_version_prints_the_installed_release_and_exits_0(
    main: Callable[[Sequence[str] | None], int],
    prog: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])

    assert done.value.code == 0
    assert capsys.readouterr().out == f"{prog} {metadata.version('batchsched')}\n"


def test_the_installed_release_is_pyproject_tomls() -> None:
    # A stale install (pyproject.toml bumped, not reinstalled) would print an old version.
    assert metadata.version("batchsched") == PROJECT_VERSION

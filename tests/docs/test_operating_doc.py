"""docs/operating.md: every `batchsched ...` command it tells an operator to type is one the
command line accepts (subcommand, flags and their values), so the page cannot drift from the
CLI unnoticed."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from batchsched.cli import build_parser

PAGE = Path(__file__).resolve().parents[2] / "docs" / "operating.md"
COMMAND = re.compile(r"`(batchsched [^`]+)`")


def commands() -> list[str]:
    return COMMAND.findall(PAGE.read_text())


def test_the_page_gives_commands_for_the_everyday_tasks() -> None:
    found = {shlex.split(c)[1] for c in commands() if len(shlex.split(c)) > 1}
    assert {"queue", "explain", "gpus", "place", "simulate"} <= found


@pytest.mark.parametrize("command", commands())
def test_each_command_on_the_page_parses(command: str) -> None:
    argv = shlex.split(command)[1:]
    try:
        build_parser().parse_args(argv)
    except SystemExit as exit_:  # argparse exits 0 for --version/--help, 2 for an error
        assert exit_.code == 0, f"{command!r} is refused by the command line"

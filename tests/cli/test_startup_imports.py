"""What `batchsched run` imports before it schedules (issue #17): start-up CPU is part of every
restart and failover, so modules only other commands or rare features need stay unimported.

Each case runs in a fresh interpreter, since this test process has imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from batchsched import cli

# Imported by `batchsched run` before its first cycle, these cost start-up for nothing: the
# live views and `batchsched place`'s reader and driver (other commands), the CEL engine (only
# once a DRA selector is compiled), cryptography (only to self-sign a serving certificate).
NOT_ON_THE_RUN_PATH = (
    "batchsched.views.live",
    "batchsched.views.explain",
    "batchsched.views.queue",
    "batchsched.views.render",
    "batchsched.views.place_text",
    "batchsched.cluster_file",
    "batchsched.whatif",
    "batchsched.dra.cel",
    "celpy",
    "lark",
    "cryptography",
)

# The real entry point up to connecting: a kubeconfig that does not exist fails there (exit 2).
RUN_UNTIL_CONNECTING = """
import json, sys
from batchsched.cli import main
code = main(["run", "--kubeconfig", "/nonexistent/kubeconfig", "--log-level", "ERROR"])
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""

BUILD_THE_PARSER = """
import json, sys
from batchsched.cli import build_parser
build_parser().parse_args(["place"])
print(json.dumps({"code": 0, "modules": sorted(sys.modules)}))
"""


def imported_by(script: str) -> tuple[int, set[str]]:
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    result = json.loads(done.stdout)
    return result["code"], set(result["modules"])


def within(package: str, modules: set[str]) -> bool:
    """Whether `package` or any module under it was imported."""
    return any(m == package or m.startswith(f"{package}.") for m in modules)


def test_batchsched_run_reaches_the_runtime_without_importing_what_only_other_paths_need() -> None:
    code, modules = imported_by(RUN_UNTIL_CONNECTING)

    assert code == 2  # the missing kubeconfig, after the run path was imported
    assert {"batchsched.runtime.app", "batchsched.dra.allocator"} <= modules
    assert [m for m in NOT_ON_THE_RUN_PATH if within(m, modules)] == []


def test_building_the_command_line_imports_no_kubernetes_client() -> None:
    # Every command builds the whole parser, `batchsched --version` and `place` included.
    _, modules = imported_by(BUILD_THE_PARSER)

    assert not within("kubernetes_asyncio", modules)
    assert not within("aiohttp", modules)
    assert {m for m in modules if within("batchsched.views", {m})} <= {
        "batchsched.views",
        "batchsched.views.commands",
    }


def test_building_the_command_line_reads_no_distribution_metadata(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # importlib.metadata.version reads every installed distribution: only --version needs it.
    def refuse(name: str) -> str:
        raise AssertionError(f"looked up the version of {name} while building the parser")

    monkeypatch.setattr("importlib.metadata.version", refuse)

    assert cli.build_parser().parse_args(["place"]).command == "place"

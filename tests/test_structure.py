"""The shape of the code: no module over 400 lines, no function over 60, no import cycle.

A file that grows past 400 lines is two ideas, a function past 60 is several steps, and two
modules that import each other are one idea cut across files (an import under
`if TYPE_CHECKING:` or inside a function counts: the cut is the same).

Each check has a KNOWN set of today's violations, which are being fixed. A check fails on a
violation that is not KNOWN, and on a KNOWN entry that is no longer a violation (delete it from
the set), so the sets only shrink and always say exactly what is left.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("batchsched", "gpu", "queues")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60

# Paths relative to the repository root.
KNOWN_LONG_MODULES: frozenset[str] = frozenset()
# "path::qualified.name" (a method is Class.method, a nested function outer.inner).
KNOWN_LONG_FUNCTIONS: frozenset[str] = frozenset()
# "importer -> imported": each direct import that closes a cycle (the imported module reaches
# back to the importer). Removing an import can only remove entries.
KNOWN_CYCLE_IMPORTS: frozenset[str] = frozenset()


# Measuring


def source_files() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, lines from `def` to the last line of its body) of every function."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = prefix + node.name
            assert node.end_lineno is not None
            yield name, node.end_lineno - node.lineno + 1
            yield from functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, prefix + node.name + ".")
        else:
            yield from functions(node, prefix)


def cycle_imports(graph: grimp.ImportGraph) -> dict[str, str]:
    """Each direct import on a cycle, as "importer -> imported", with that cycle as a chain."""
    found: dict[str, str] = {}
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is not None and importer != imported:
                found[f"{importer} -> {imported}"] = " -> ".join((importer, *back))
    return found


@cache
def long_modules() -> dict[str, int]:
    lengths = {relative(p): len(p.read_text().splitlines()) for p in source_files()}
    return {path: n for path, n in lengths.items() if n > MAX_MODULE_LINES}


@cache
def long_functions() -> dict[str, int]:
    found: dict[str, int] = {}
    for path in source_files():
        for name, n in functions(ast.parse(path.read_text(), str(path))):
            if n > MAX_FUNCTION_LINES:
                found[f"{relative(path)}::{name}"] = n
    return found


@cache
def project_graph() -> grimp.ImportGraph:
    # grimp reads the packages Python would import: they must be this checkout's.
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        origin = Path(spec.origin) if spec is not None and spec.origin else None
        assert origin is not None and origin.is_relative_to(ROOT), f"{package} is {origin}"
    # Imports under `if TYPE_CHECKING:` are in the graph unless excluded; no cache on disk.
    return grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False, cache_dir=None)


@cache
def project_cycle_imports() -> dict[str, str]:
    return cycle_imports(project_graph())


def import_line(edge: str) -> str:
    importer, imported = edge.split(" -> ")
    details = project_graph().get_import_details(importer=importer, imported=imported)
    return "; ".join(f"line {d['line_number']}: {d['line_contents']}" for d in details)


# The checks


def test_no_module_is_longer_than_400_lines_beyond_the_known_ones() -> None:
    new = {path: n for path, n in long_modules().items() if path not in KNOWN_LONG_MODULES}
    if new:
        pytest.fail(
            "modules over 400 lines (split each by idea):\n"
            + "\n".join(f"  {path}: {n} lines" for path, n in sorted(new.items()))
        )


def test_every_known_long_module_is_still_too_long_so_the_list_stays_exact() -> None:
    fixed = sorted(KNOWN_LONG_MODULES - long_modules().keys())
    if fixed:
        pytest.fail("no longer over 400 lines, delete from KNOWN_LONG_MODULES: " + ", ".join(fixed))


def test_no_function_is_longer_than_60_lines_beyond_the_known_ones() -> None:
    new = {name: n for name, n in long_functions().items() if name not in KNOWN_LONG_FUNCTIONS}
    if new:
        pytest.fail(
            "functions over 60 lines (split each into steps):\n"
            + "\n".join(f"  {name}: {n} lines" for name, n in sorted(new.items()))
        )


def test_every_known_long_function_is_still_too_long_so_the_list_stays_exact() -> None:
    fixed = sorted(KNOWN_LONG_FUNCTIONS - long_functions().keys())
    if fixed:
        pytest.fail(
            "no longer over 60 lines, delete from KNOWN_LONG_FUNCTIONS: " + ", ".join(fixed)
        )


def test_no_modules_import_each_other_in_a_cycle_beyond_the_known_ones() -> None:
    new = {e: chain for e, chain in project_cycle_imports().items() if e not in KNOWN_CYCLE_IMPORTS}
    if new:
        pytest.fail(
            "imports that close a cycle (move what both sides need into one module):\n"
            + "\n".join(f"  {chain}\n    {import_line(e)}" for e, chain in sorted(new.items()))
        )


def test_every_known_cycle_import_still_closes_a_cycle_so_the_list_stays_exact() -> None:
    fixed = sorted(KNOWN_CYCLE_IMPORTS - project_cycle_imports().keys())
    if fixed:
        pytest.fail(
            "no longer on a cycle, delete from KNOWN_CYCLE_IMPORTS:\n"
            + "\n".join(f"  {e}" for e in fixed)
        )


# The measures themselves


def test_a_method_is_named_by_its_class_and_measured_from_def_to_its_last_line() -> None:
    source = (
        "class A:\n"
        "    @property\n"
        "    def size(self):\n"
        "        def inner():\n"
        "            return 1\n"
        "        return inner()\n"
        "async def wait_ready():\n"
        "    if True:\n"
        "        def hidden():\n"
        "            pass\n"
    )
    assert dict(functions(ast.parse(source))) == {
        "A.size": 4,
        "A.size.inner": 2,
        "wait_ready": 4,
        "wait_ready.hidden": 2,
    }


def test_an_import_cycle_is_reported_once_per_import_as_a_chain_back_to_its_importer() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in (("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")):
        graph.add_import(importer=importer, imported=imported)
    assert cycle_imports(graph) == {
        "a -> b": "a -> b -> c -> a",
        "b -> c": "b -> c -> a -> b",
        "c -> a": "c -> a -> b -> c",
    }


def test_an_import_under_type_checking_or_inside_a_function_closes_a_cycle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "structure_probe"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "jobs.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from structure_probe.state import State\n"
    )
    (package / "state.py").write_text(
        "from structure_probe import jobs\ndef later():\n    from .shapes import shape\n"
    )
    (package / "shapes.py").write_text("from . import state\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("structure_probe", cache_dir=None)
    assert cycle_imports(graph) == {
        "structure_probe.jobs -> structure_probe.state": (
            "structure_probe.jobs -> structure_probe.state -> structure_probe.jobs"
        ),
        "structure_probe.shapes -> structure_probe.state": (
            "structure_probe.shapes -> structure_probe.state -> structure_probe.shapes"
        ),
        "structure_probe.state -> structure_probe.jobs": (
            "structure_probe.state -> structure_probe.jobs -> structure_probe.state"
        ),
        "structure_probe.state -> structure_probe.shapes": (
            "structure_probe.state -> structure_probe.shapes -> structure_probe.state"
        ),
    }

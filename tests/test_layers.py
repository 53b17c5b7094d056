"""The layers contract in pyproject.toml is docs/architecture.md's table, and covers every module.

`lint-imports` checks the imports against the contract; these tests check that the contract
says what the architecture page says, and that no module escapes it (import-linter's own
`exhaustive` option needs `containers`, which cannot order modules of three root packages).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("batchsched", "gpu", "queues")
# Package files of packages whose modules sit in several layers: a layer cannot hold them
# without holding the others. The layers section of docs/architecture.md names them.
SPANNING_PACKAGES = frozenset({"batchsched", "batchsched.gang", "gpu"})

Row = tuple[frozenset[str], bool]  # the modules of one layer; whether they are independent


def contract_rows() -> list[Row]:
    """The layers contract's rows, lowest first."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        contracts = tomllib.load(file)["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    return [
        (frozenset(name.strip() for name in re.split(r"[|:]", layer)), ":" not in layer)
        for layer in reversed(layers)
    ]


def table_rows() -> list[Row]:
    """The rows of the table under "Layers that exist", by number."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## Layers that exist", 1)[1].split("\n## ", 1)[0]
    rows: list[tuple[int, Row]] = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line)]
        if len(cells) == 5 and cells[1].isdigit():
            paths = re.findall(r"`([^`]+)`", cells[3])
            modules = frozenset(module_of(path) for path in paths)
            rows.append((int(cells[1]), (modules, "," not in cells[3])))
    assert [number for number, _ in rows] == list(range(1, len(rows) + 1))
    return [row for _, row in rows]


def module_of(path: str) -> str:
    """`batchsched/model/*` -> batchsched.model, `gpu/topology.py` -> gpu.topology."""
    return path.removesuffix("/*").removesuffix(".py").replace("/", ".")


def source_modules() -> list[str]:
    names = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def test_the_architecture_table_is_the_layers_contract() -> None:
    assert table_rows() == contract_rows()


def test_every_module_is_in_a_layer() -> None:
    layers = {name for modules, _ in contract_rows() for name in modules}

    def in_a_layer(module: str) -> bool:
        return any(module == layer or module.startswith(f"{layer}.") for layer in layers)

    outside = [m for m in source_modules() if not in_a_layer(m) and m not in SPANNING_PACKAGES]
    assert outside == [], "add each to a layer in pyproject.toml and docs/architecture.md"


def test_the_packages_left_out_of_the_layers_span_several() -> None:
    layers = {name for modules, _ in contract_rows() for name in modules}
    for package in SPANNING_PACKAGES:
        inside = [layer for layer in layers if layer.startswith(f"{package}.")]
        assert len(inside) > 1, f"{package} could be one layer"

"""The package's import graph: no module takes part in an import circle; and the layer
table of docs/design.md names the layers that pyproject.toml's contract enforces.

The layer contracts in pyproject.toml (checked by ``make check``) keep layers pointing one
way; this test also covers modules within one layer, TYPE_CHECKING and function-level
imports included, so a circle cannot hide inside a layer.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in graph.modules:
                continue
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_module_of_durq_is_in_an_import_circle() -> None:
    graph = grimp.build_graph("durq")
    # a package imports its own submodules to re-export them: that is not a circle
    for module in list(graph.modules):
        for child in graph.find_children(module):
            if graph.direct_import_exists(importer=module, imported=child):
                graph.remove_import(importer=module, imported=child)
    assert _circles(graph) == []


def _contract_layers() -> list[list[str]]:
    """The ``layers`` contract of pyproject.toml: each layer's modules, top first."""
    text = (ROOT / "pyproject.toml").read_text()  # tomllib is Python 3.11+
    contract = text.split('id = "layers"', 1)[1].split("[[tool.importlinter.contracts]]")[0]
    listed = re.search(r"^layers = (\[.*?^\])", contract, re.MULTILINE | re.DOTALL)
    assert listed, "no layers list in the layers contract"
    lines = [line for line in listed.group(1).splitlines() if not line.strip().startswith("#")]
    layers: list[str] = ast.literal_eval("\n".join(lines))
    return [re.split(r"\s*[|:]\s*", layer.strip()) for layer in layers]


def _table_rows() -> list[tuple[str, str]]:
    """The layer table of docs/design.md ("Where things live"): (layer cell, holds cell)."""
    text = (ROOT / "docs" / "design.md").read_text()
    table = text.split("<!-- layers:begin", 1)[1].split("<!-- layers:end -->", 1)[0]
    rows = [line.split(" | ", 1) for line in table.splitlines() if line.startswith("| ")]
    return [(layer.strip("| "), holds) for layer, holds in rows[1:]]  # no header


def test_the_layer_table_of_the_design_names_the_layers_of_the_contract() -> None:
    layers = _contract_layers()
    rows = _table_rows()
    leaves = layers.index(["lua"]) + 1
    named = [re.findall(r"`([\w]+)`", layer) for layer, _ in rows]
    assert named[:-1] == layers[:leaves], "the table's layers, top first, as in pyproject"
    assert rows[-1][0] == "leaves"
    for module in (m for layer in layers[leaves:] for m in layer):
        assert f"`{module}`" in rows[-1][1], f"the leaves row does not name {module}"

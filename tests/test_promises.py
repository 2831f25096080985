"""The promise -> test table of docs/guarantees.md ("Every promise and its test") cannot
rot: every test it names exists, every row names a test or a known bug, and a test the
table marks ``(xfail)`` is the one marked xfail in the code (and no other it names).

Tests are found by reading the test files (ast), not by collecting them: a test
re-exported with ``from module import *`` (tests/cluster/) counts, one removed with
``del`` does not.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "guarantees.md"
SECTION = "## Every promise and its test"
PAGES = (
    "docs/guarantees.md",
    "README.md",
    "docs/job-control.md",
    "docs/flow-control.md",
    "docs/schedules.md",
    "docs/workflows.md",
    "docs/process-pool.md",
    "docs/deployment.md",
    "docs/durable.md",
)
NODE = re.compile(r"`(tests/[\w/]+\.py)::(\w+)(?:::(\w+))?(\[[^`\]]*\])?`( \(xfail\))?")
PENDING = re.compile(r"\(pending: issue 30 bug (\d+)\)")


@dataclass(frozen=True)
class Row:
    page: str
    promise: str
    tests: tuple[tuple[str, str, bool], ...]  # (file, test name or Class::test, xfail)
    pending: tuple[int, ...]


def rows() -> list[Row]:
    """The table's rows, by page (the ``### <page>`` heading above them)."""
    text = DOC.read_text()
    assert SECTION in text, f"{DOC.name} has no section {SECTION!r}"
    out: list[Row] = []
    page = ""
    for line in text.split(SECTION, 1)[1].splitlines():
        if line.startswith("## "):
            break  # the next section
        if line.startswith("### "):
            page = line[4:].split(":")[0].strip()
            continue
        if not line.startswith("|") or line.startswith(("| promise", "|---")):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(cells) == 2, f"a row needs a promise and its tests: {line}"
        promise, tests = cells
        found = tuple(
            (m[1], f"{m[2]}::{m[3]}" if m[3] else m[2], bool(m[5])) for m in NODE.finditer(tests)
        )
        out.append(Row(page, promise, found, tuple(int(n) for n in PENDING.findall(tests))))
    return out


@functools.cache
def definitions(path: str) -> dict[str, bool]:
    """The tests a test file defines or re-exports: name (``Class::name`` for a method)
    -> whether it is marked xfail."""
    tree = ast.parse((ROOT / path).read_text())
    found: dict[str, bool] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = _xfail(node)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found[f"{node.name}::{item.name}"] = _xfail(item)
        elif isinstance(node, ast.ImportFrom) and node.module and node.names[0].name == "*":
            module = ROOT / "tests" / (node.module.replace(".", "/") + ".py")
            if module.exists():
                found.update(definitions(str(module.relative_to(ROOT))))
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found.pop(target.id, None)
    return found


def _xfail(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any("xfail" in ast.unparse(d) for d in node.decorator_list)


def test_the_table_covers_every_page() -> None:
    pages = {row.page for row in rows()}
    assert pages == set(PAGES), f"pages without a table, or unknown: {pages ^ set(PAGES)}"
    assert len(rows()) >= 100


def test_every_row_names_a_test_or_a_known_bug() -> None:
    for row in rows():
        assert row.tests or row.pending, f"{row.page}: no test for {row.promise!r}"
        assert all(1 <= n <= 12 for n in row.pending), f"issue 30 lists bugs 1..12: {row}"


def test_every_test_the_table_names_exists() -> None:
    missing = [
        f"{row.page}: {path}::{name}"
        for row in rows()
        for path, name, _ in row.tests
        if not (ROOT / path).exists() or name not in definitions(path)
    ]
    assert not missing, "tests named in docs/guarantees.md that do not exist:\n" + "\n".join(
        missing
    )


def test_a_test_is_marked_xfail_in_the_table_exactly_when_it_is_in_the_code() -> None:
    wrong = [
        f"{path}::{name}: the table says {'xfail' if marked else 'passing'}"
        for row in rows()
        for path, name, marked in row.tests
        if (ROOT / path).exists() and definitions(path).get(name, marked) != marked
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("| p | `tests/a.py::test_x`<br>`tests/b/c.py::T::test_y[1-2]` (xfail) |",
         (("tests/a.py", "test_x", False), ("tests/b/c.py", "T::test_y", True))),
        ("| p | *(pending: issue 30 bug 7)* |", ()),
    ],
)  # fmt: skip
def test_the_parser_reads_node_ids_classes_parameters_and_marks(
    line: str, expected: tuple[tuple[str, str, bool], ...]
) -> None:
    found = tuple(
        (m[1], f"{m[2]}::{m[3]}" if m[3] else m[2], bool(m[5])) for m in NODE.finditer(line)
    )
    assert found == expected

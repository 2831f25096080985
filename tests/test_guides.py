"""The guides read on GitHub as on the documentation site: no include markers (GitHub
shows ``--8<--`` lines, not the code), and the code they copy from examples/ is the
examples' code, which their tests run (tests/contrib/test_fastapi_example.py,
tests/contrib/test_sqlalchemy_recipe.py).

A code block whose first line is ``# examples/PATH`` is a copy of that file.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_COPY = re.compile(r"^```\w*\n# (examples/\S+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_no_guide_shows_an_include_marker_in_place_of_code() -> None:
    marked = [p.relative_to(ROOT) for p in PAGES if "--8<--" in p.read_text()]
    assert not marked


def test_the_code_a_guide_copies_from_examples_is_the_examples_code() -> None:
    copies = [(page, m[1], m[2]) for page in PAGES for m in _COPY.finditer(page.read_text())]
    assert {path for _, path, _ in copies} >= {
        "examples/fastapi_app/tasks.py",
        "examples/fastapi_app/main.py",
        "examples/sqlalchemy_on_commit.py",
    }
    for page, path, code in copies:
        assert code == (ROOT / path).read_text(), f"{page.relative_to(ROOT)}: {path} differs"

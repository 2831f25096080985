"""One exceptions module: durq.errors holds every exception of durq's API, and the tree
its docstring draws is the tree of the classes."""

from __future__ import annotations

import inspect
import re

import durq
from durq import errors


def _drawn() -> dict[str, str | None]:
    """Each class of the drawing in errors' docstring, with the class drawn above it."""
    parents: dict[str, str | None] = {}
    path: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        found = re.match(r"^    ([│├└─ ]*)([A-Z][A-Za-z]+)\b", line)
        if not found:
            continue
        depth = len(found.group(1)) // 4
        del path[depth:]
        parents[found.group(2)] = path[-1] if path else None
        path.append(found.group(2))
    return parents


def test_the_drawn_tree_is_the_tree_of_the_classes() -> None:
    drawn = _drawn()
    assert set(drawn) - {"Exception"} == set(errors.__all__)
    for name, parent in drawn.items():
        if parent is None:
            continue
        bases = [base.__name__ for base in getattr(errors, name).__bases__]
        assert parent in bases, f"{name} is drawn under {parent}, its bases are {bases}"


def test_every_exception_durq_exports_is_defined_in_errors() -> None:
    exported = {
        name
        for name in durq.__all__
        if inspect.isclass(getattr(durq, name)) and issubclass(getattr(durq, name), Exception)
    }
    assert exported == set(errors.__all__)
    for name in exported:
        assert getattr(durq, name).__module__ == "durq.errors", name

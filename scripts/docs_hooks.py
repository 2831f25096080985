"""MkDocs hooks of the documentation site (mkdocs.yml).

A public name without a docstring is a warning, so ``mkdocs build --strict`` (what
``make check`` runs) fails on it, as it fails on a broken link. Public means: exported
by ``__all__`` of a documented module, and the public methods and properties of the
classes among those.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import griffe

log = logging.getLogger("mkdocs.plugins.durq_docstrings")

# the modules whose exports the API reference documents
DOCUMENTED = (
    "durq",
    "durq.contrib.django",
    "durq.contrib.fastapi",
    "durq.dashboard",
    "durq.worker",
)


def _undocumented(obj: Any, where: str) -> list[str]:
    missing = [] if obj.docstring and obj.docstring.value.strip() else [where]
    if obj.kind is griffe.Kind.CLASS:
        for name, member in obj.members.items():
            if name.startswith("_") or member.is_alias:
                continue
            is_property = "property" in getattr(member, "labels", set())
            documented = member.docstring and member.docstring.value.strip()
            if (member.kind is griffe.Kind.FUNCTION or is_property) and not documented:
                missing.append(f"{where}.{name}")
    return missing


def missing_docstrings(search_paths: list[str]) -> list[str]:
    """The public names of the documented modules that have no docstring."""
    package = griffe.load("durq", search_paths=search_paths, resolve_aliases=True,
                          resolve_external=False)  # fmt: skip
    missing: list[str] = []
    for path in DOCUMENTED:
        module = package if path == "durq" else package[path.removeprefix("durq.")]
        for name in sorted(module.exports or ()):
            if name == "__version__":
                continue
            member = module[name]
            target = member.final_target if member.is_alias else member
            missing += _undocumented(target, f"{path}.{name}")
    return missing


def on_pre_build(config: Any, **kwargs: Any) -> None:
    """Warn about every public name without a docstring (an error with --strict)."""
    src = os.path.join(os.path.dirname(config.config_file_path), "src")
    for name in missing_docstrings([src]):
        log.warning("%s has no docstring", name)

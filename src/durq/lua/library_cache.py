"""durq's Functions library kept on disk between processes, like Python's bytecode.

Building the library (``durq.lua.functions.build``: some hundred Lua files flattened,
then hashed) was a large part of a worker's start, paid by every worker at its first
fetch (figures: docs/decisions/fast-start.md). The built library is written to
``durq/lua/__pycache__`` under a key that hashes its inputs (the builder's code, every
Lua file's path and text, the operations' names), so that any change to them builds and
writes a new one; hashing the inputs and reading the file back cost a small part of a
build. Nothing is written where Python writes no bytecode (``PYTHONDONTWRITEBYTECODE``,
``-B``) unless asked (``write=True``), nor where the directory is read-only: then each
process builds its own, as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

__all__ = ["cached_library", "path_of"]

_LUA_DIR = Path(__file__).resolve().parent
# the builder (durq.lua.functions, which imports this module when first asked for the
# library): its code is an input of the library as much as the Lua files
_BUILDER = _LUA_DIR / "functions.py"


class _Library(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def functions(self) -> dict[str, str]: ...


LibraryT = TypeVar("LibraryT", bound=_Library)


def _key(ops: Sequence[str], root: Path) -> str:
    digest = hashlib.sha1(_BUILDER.read_bytes())
    digest.update("\0".join(ops).encode())
    for path in sorted(root.rglob("*.lua")):
        digest.update(b"\0" + str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def path_of(ops: Sequence[str], root: Path = _LUA_DIR) -> Path:
    """Where the library of ``ops`` built from the Lua files under ``root`` is kept."""
    return root / "__pycache__" / f"durq-library-{_key(ops, root)}.json"


def cached_library(
    ops: Sequence[str],
    build: Callable[[], LibraryT],
    kind: Callable[[str, str, dict[str, str]], LibraryT],
    *,
    root: Path = _LUA_DIR,
    write: bool | None = None,
) -> LibraryT:
    """The library that ``build()`` makes, read from its file (into ``kind(name,
    source, functions)``) when one was written for the same inputs, else built (and
    written, see the module's docstring)."""
    path = path_of(ops, root)
    try:
        data = json.loads(path.read_text("utf-8"))
        return kind(str(data["name"]), str(data["source"]), dict(data["functions"]))
    except (OSError, ValueError, KeyError, TypeError):
        pass  # none yet, or unreadable: built below
    library = build()
    if write if write is not None else not sys.dont_write_bytecode:
        _write(path, library)
    return library


def _write(path: Path, library: _Library) -> None:
    data = {"name": library.name, "source": library.source, "functions": library.functions}
    try:
        path.parent.mkdir(exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".durq-library-")
    except OSError:  # a read-only install: every process builds its own
        return
    try:
        # whole or not at all: a reader never sees a file half written
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(data, out)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)

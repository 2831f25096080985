"""durq's Functions library kept on disk between processes (durq.lua.library_cache): a
worker reads it back instead of building it at every start (issue 33, fast start)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from durq.lua import SCRIPT_NAMES
from durq.lua.functions import Library, build, library
from durq.lua.library_cache import _LUA_DIR, cached_library, path_of


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A copy of durq's Lua files, to change without touching the package's."""
    copy = tmp_path / "lua"
    shutil.copytree(_LUA_DIR, copy, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    return copy


class Builder:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> Library:
        self.calls += 1
        return Library(f"durq_{self.calls:012d}", "#!lua name=x\n", {"enqueue": "f"})


def test_a_library_built_once_is_read_back_by_the_next_process(root: Path) -> None:
    builder = Builder()
    first = cached_library(SCRIPT_NAMES, builder, Library, root=root, write=True)
    assert path_of(SCRIPT_NAMES, root).exists()
    again = cached_library(SCRIPT_NAMES, builder, Library, root=root, write=True)
    assert builder.calls == 1
    assert again == first


def test_a_changed_lua_file_builds_and_keeps_a_new_library(root: Path) -> None:
    builder = Builder()
    first = cached_library(SCRIPT_NAMES, builder, Library, root=root, write=True)
    old = path_of(SCRIPT_NAMES, root)
    lua = next(root.rglob("*.lua"))
    lua.write_text(lua.read_text() + "\n-- changed\n")
    assert path_of(SCRIPT_NAMES, root) != old
    second = cached_library(SCRIPT_NAMES, builder, Library, root=root, write=True)
    assert builder.calls == 2 and second != first
    # a new operation list is another library too
    assert path_of(SCRIPT_NAMES[:-1], root) != path_of(SCRIPT_NAMES, root)


def test_a_corrupt_file_is_built_again_and_replaced(root: Path) -> None:
    builder = Builder()
    path = path_of(SCRIPT_NAMES, root)
    path.parent.mkdir()
    path.write_text('{"name": "durq_')  # cut short
    made = cached_library(SCRIPT_NAMES, builder, Library, root=root, write=True)
    assert builder.calls == 1
    assert cached_library(SCRIPT_NAMES, builder, Library, root=root, write=True) == made
    assert builder.calls == 1


def test_nothing_is_written_where_python_writes_no_bytecode(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    builder = Builder()
    cached_library(SCRIPT_NAMES, builder, Library, root=root)
    cached_library(SCRIPT_NAMES, builder, Library, root=root)
    assert builder.calls == 2
    assert not path_of(SCRIPT_NAMES, root).exists()


def test_the_driver_s_library_is_the_library_built_from_the_lua_files() -> None:
    assert library() == build(SCRIPT_NAMES)

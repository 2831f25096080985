"""luacheck over the scripts as the server runs them: each operation flattened (its
includes expanded, lua/__init__.py) and the Functions library (lua/functions.py).

`make check` runs luacheck over the files one by one (.luacheckrc gives each file the
names its includes declare). What only the assembled text shows is checked here: a
name used where no include declares it yet, and a local that shadows a name of an
include, which the file alone cannot see (a lib's `ms` hidden by another lib's local
in one group of the library, say).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from durq import lua
from durq.lua import functions
from helpers import in_ci

# what Redis gives every script (the library's functions get KEYS and ARGV as arguments)
READ_GLOBALS = ("redis", "KEYS", "ARGV", "cjson", "cmsgpack", "bit", "struct")
OPTIONS = ("--no-config", "--std", "lua51", "--read-globals", *READ_GLOBALS)
REPORT = ("--only", "1", "4", "--codes", "--no-color", "--formatter", "plain")


def luacheck(sources: dict[str, str], where: Path) -> str:
    """luacheck's report on the texts ``sources`` (file name -> text), globals (1xx) and
    shadowing (4xx) only; '' when they are clean."""
    binary = shutil.which("luacheck")
    if binary is None:
        reason = "no luacheck (Debian's lua-check)"
        if in_ci():
            pytest.fail(f"{reason}: CI installs it", pytrace=False)
        pytest.skip(reason)
    for name, source in sources.items():
        (where / name).write_text(source)
    done = subprocess.run(
        [binary, *sorted(sources), *OPTIONS, *REPORT],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr  # 1: warnings
    return done.stdout.strip()


def test_no_flattened_script_uses_an_undeclared_global_or_shadows_a_name(
    tmp_path: Path,
) -> None:
    scripts = {f"{name}.lua": script.source for name, script in lua.load_all().items()}
    assert luacheck(scripts, tmp_path) == ""


def test_the_functions_library_uses_no_undeclared_global_and_shadows_no_name(
    tmp_path: Path,
) -> None:
    # the first line is FUNCTION LOAD's shebang, not Lua
    source = functions.library().source.split("\n", 1)[1]
    assert luacheck({"library.lua": source}, tmp_path) == ""

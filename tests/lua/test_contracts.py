"""The scripts' contract headers, and the rule that every Lua file includes what it uses.

The loader inlines each file once, where it is first included, so a library file that
uses a name another file defines must include that file itself: otherwise it works only
while every script happens to include the definition first.
"""

from __future__ import annotations

import functools
import hashlib
import re

import pytest

from durq import lua
from durq.lua import SCRIPT_NAMES
from durq.lua.functions import flags

SECTIONS = ("KEYS", "ARGV", "Returns", "Errors", "Cost")
_INCLUDE = re.compile(r'^--- @include "([A-Za-z0-9_/]+)"\s*$', re.MULTILINE)


def _text(name: str) -> str:
    return lua._read(name)


def _code(text: str) -> str:
    """Lua source without comments and string literals (enough for the files durq has)."""
    text = re.sub(r"--\[\[.*?\]\]", "", text, flags=re.DOTALL)
    text = re.sub(r"--.*", "", text)
    return re.sub(r"'[^'\n]*'|\"[^\"\n]*\"", "''", text)


LIBS = lua.lib_names()


# -- headers --------------------------------------------------------------------------


def _section(header: str, name: str) -> str:
    """The text of section ``name``: its line and the indented lines that continue it."""
    match = re.search(rf"^{name}\b.*(?:\n[ \t]+.*)*", header, re.MULTILINE)
    return match.group(0) if match else ""


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_every_script_documents_its_contract_in_its_header(name: str) -> None:
    script = lua.load(name)
    header = script.header
    assert header.startswith(f"{name}:"), header[:40]
    for section in SECTIONS:
        assert _section(header, section), f"{name}: no {section} section"
    assert script.sha == hashlib.sha1(script.source.encode()).hexdigest()
    assert "@include" not in script.source


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_every_error_a_script_can_return_is_named_in_its_header(name: str) -> None:
    script = lua.load(name)
    body = re.sub(r"--\[\[.*?\]\]", "", script.source, count=1, flags=re.DOTALL)
    raised = set(re.findall(r"'(DURQ_[A-Z]+)\b", body))
    errors = _section(script.header, "Errors")
    if re.match(r"Errors\s+none\b", errors):
        assert not raised, f"{name} says it returns no error but can return {raised}"
    else:
        assert raised <= set(re.findall(r"DURQ_[A-Z]+", errors)), name


# -- includes -------------------------------------------------------------------------


@functools.cache
def _defines(name: str) -> frozenset[str]:
    """The names a library file defines at its top level."""
    names: set[str] = set()
    for line in _code(_text(name)).splitlines():
        if match := re.match(r"local function (\w+)", line):
            names.add(match.group(1))
        elif match := re.match(r"local ([\w, ]+?)\s*=", line):
            names.update(n.strip() for n in match.group(1).split(","))
    return frozenset(names)


@functools.cache
def _reachable(name: str) -> frozenset[str]:
    """The files ``name`` includes, directly or through other includes."""
    out: set[str] = set()
    for included in _INCLUDE.findall(_text(name)):
        out |= {included, *_reachable(included)}
    return frozenset(out)


def _used(name: str) -> set[str]:
    return set(re.findall(r"(?<![.:\w])([A-Za-z_]\w*)", _code(_text(name))))


@pytest.mark.parametrize("name", LIBS + list(SCRIPT_NAMES))
def test_every_file_includes_the_library_files_whose_names_it_uses(name: str) -> None:
    used = _used(name)
    available = set(_defines(name)) if name.startswith("lib/") else set()
    for lib in _reachable(name):
        available |= _defines(lib)
    missing = {
        f"{symbol} (from {lib})"
        for lib in LIBS
        if lib != name
        for symbol in _defines(lib) & used
        if symbol not in available
        and not re.search(rf"\blocal\b[^\n=]*\b{symbol}\b", _code(_text(name)))
    }
    assert not missing, f"{name} uses names it does not include: {sorted(missing)}"


@pytest.mark.parametrize("name", LIBS)
def test_a_library_file_using_the_queue_keys_includes_lib_keys_itself(name: str) -> None:
    if name in ("lib/core/keys",) or not re.search(r"\bK_[A-Z]+", _code(_text(name))):
        return
    assert "lib/core/keys" in _INCLUDE.findall(_text(name))


def test_the_include_rule_sees_a_missing_include() -> None:
    used = _used("lib/core/dead_letter")
    assert {"K_DEAD", "count", "get_conf", "rec_encode"} <= used
    assert "lib/core/keys" in _reachable("lib/core/dead_letter")
    assert "K_DEAD" in _defines("lib/core/keys")


# -- memory pressure ------------------------------------------------------------------

_GUARDS = {
    "lib/core/frees_memory": "redis.call('DEL', K_PREFIX)",
    "lib/core/needs_memory": "redis.call('SET', K_PREFIX, '', 'XX')",
}


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_a_scripts_rule_at_maxmemory_is_in_its_header_flags_and_first_command(name: str) -> None:
    """A script that runs at maxmemory (allow-oom) or is refused there says so in its
    header, and under EVALSHA its guard is its first command at the top level, after
    Redis 6.2's replicate_commands() (which a write before it would disable)."""
    script = lua.load(name)
    included = [lib for lib in _GUARDS if f'--- @include "{lib}"' in _text(name)]
    assert len(included) <= 1
    assert bool(_section(script.header, "Memory")) == bool(included), name
    assert ("allow-oom" in flags(name)) == (included == ["lib/core/frees_memory"]), name
    if not included:
        return
    top = [line for line in script.source.splitlines() if line.startswith(("redis.", "if redis."))]
    calls = [line for line in top if line.startswith("redis.call(")]
    assert calls[0] == _GUARDS[included[0]], name
    assert top.index("if redis.replicate_commands then redis.replicate_commands() end") < top.index(
        calls[0]
    )

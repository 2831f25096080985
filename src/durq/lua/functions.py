"""The operation scripts as one Redis Functions library (Redis 7+, Valkey), for FCALL.

With EVALSHA, Lua runs a script's whole flattened text on every call: each ``local
function`` and table of the included ``lib/`` files is made again each time. A Functions
library runs its text once, at FUNCTION LOAD; each FCALL then runs only the body of the
function it names. :func:`library` builds that library from the same files, with no
second copy of any Lua:

* every operation becomes a ``do ... end`` block of the library holding its own copy of
  the libs it includes (so that no chunk exceeds Lua's 200 locals), the libs' text at
  block level (made once) and the operation's own text inside a function ``run`` (made
  per call, as under EVALSHA: its locals are per call by nature);
* functions receive ``(keys, args)`` rather than the KEYS and ARGV globals: each block
  declares ``KEYS`` and ``ARGV`` locals, which the registered function sets first;
* what a lib computes per call at its top level (the K_* keys from KEYS, caches, flags,
  counters) sits between ``--- @per-call`` and ``--- @end`` lines. Under EVALSHA those
  lines are comments; here the block's ``local`` statements become block-level
  declarations plus a function that assigns them, run at the start of every call, so each
  call starts exactly as a fresh EVALSHA would. A lib's other top-level locals are
  functions or constants (``UPPER_CASE``, never assigned): tests/lua/test_functions.py
  fails on any other;
* an include indented under a ``local function`` (lib/flow.lua includes lib/flow_hooks
  so) is part of that function's body, made per call of it: it stays as it is.

Every function name carries a hash of the library's text (``durq_<hash>_<op>``), and the
library is named ``durq_<hash>``: a new durq version loads its own library next to an
older one that workers still run, and function names (global on a server) never clash.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from durq import lua
from durq.lua import _INCLUDE, SCRIPT_NAMES, ScriptLoadError

__all__ = ["COLLECTOR_STEP", "Library", "build", "library", "per_call_block"]

_PER_CALL = re.compile(r"^--- @per-call[^\n]*\n(.*?)^--- @end[^\n]*$", re.MULTILINE | re.DOTALL)
# text that only EVALSHA runs (Redis 6.2's replicate_commands, a name Functions refuse)
_EVAL_ONLY = re.compile(r"^--- @eval-only[^\n]*\n.*?^--- @end[^\n]*$", re.MULTILINE | re.DOTALL)
# one statement of a per-call block: `local a, b = ...` or `local a` (nil)
_LOCAL = re.compile(r"^local ([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)[ \t]*(=?)", re.MULTILINE)

#: operations whose own text refers to more library-level names than a Lua 5.1 closure
#: may capture (60 upvalues): their whole flattened text runs per call inside the
#: registered function, as it would under EVALSHA (FUNCTION LOAD names any that must be)
WHOLE_PER_CALL: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Library:
    """The Functions library: its name, its source (for FUNCTION LOAD) and the function
    that runs each operation, by operation name."""

    name: str
    source: str
    functions: dict[str, str]


def per_call_block(text: str) -> tuple[list[str], str]:
    """The names a ``--- @per-call`` block declares and the body of the function that
    gives them their per-call values (its statements without ``local``)."""
    names: list[str] = []

    def assign(match: re.Match[str]) -> str:
        declared = [n.strip() for n in match.group(1).split(",")]
        names.extend(declared)
        if match.group(2):
            return match.group(1) + " ="
        return match.group(1) + " = " + ", ".join("nil" for _ in declared)

    body = _LOCAL.sub(assign, text)
    if not names:
        raise ScriptLoadError("a --- @per-call block declares no local")
    return names, body


def _hoisted(name: str, seen: set[str], nested: bool, read: Callable[[str], str]) -> str:
    """The flattened text of lib ``name`` for a library block: per-call blocks of a lib
    at block level become declarations and a reset function; an include inside a
    function (``nested``) keeps its text as it is."""
    if name in seen:
        return ""
    seen.add(name)
    text = _EVAL_ONLY.sub("", read(name))
    if not nested:
        # the lib's own blocks only: a lib it includes inside a function stays as it is
        text = _PER_CALL.sub(_reset, text)

    def expand(match: re.Match[str]) -> str:
        return _hoisted(match.group(2), seen, nested or bool(match.group(1)), read)

    return _INCLUDE.sub(expand, text)


def _reset(match: re.Match[str]) -> str:
    """A per-call block as block-level declarations and a function run at every call."""
    names, body = per_call_block(match.group(1))
    return f"local {', '.join(names)}\ndurq_resets[#durq_resets + 1] = function()\n{body}end\n"


def _block(op: str, function: str, read: Callable[[str], str]) -> str:
    """The ``do ... end`` block of the library that registers ``function`` for ``op``."""
    text = read(op)
    if op in WHOLE_PER_CALL:
        return (
            f"do\nredis.register_function('{function}', function(KEYS, ARGV)\n"
            f"{lua.load(op).source}\nend)\nend\n"
        )
    seen: set[str] = set()
    libs: list[str] = []

    def hoist(match: re.Match[str]) -> str:
        if match.group(1):
            raise ScriptLoadError(f"{op}.lua: an operation's includes must be at its top level")
        libs.append(_hoisted(match.group(2), seen, False, read))
        return ""

    declarations, body = _declarations(_INCLUDE.sub(hoist, text))
    return (
        "do\nlocal KEYS, ARGV\nlocal durq_resets = {}\n"
        + "".join(libs)
        + declarations
        + f"\nlocal function durq_run()\n{body}\nend\n"
        + f"redis.register_function('{function}', function(keys, args)\n"
        + "  KEYS, ARGV = keys, args\n"
        + "  for i = 1, #durq_resets do durq_resets[i]() end\n"
        + (_RUN_AND_STEP if op in COLLECTOR_STEP else "  return durq_run()\n")
        + "end)\nend\n"
    )


#: operations whose every call ends with one increment of the server's Lua collector
#: (docs/design.md, "The library"): the worker's release, which runs after its jobs,
#: off the pickup path and off a producer's; an increment costs about 5 µs of server
#: time, which an enqueue or a fetch would pay on a caller's path
COLLECTOR_STEP: frozenset[str] = frozenset({"release"})
_RUN_AND_STEP = "  local reply = durq_run()\n  collectgarbage('step', 0)\n  return reply\n"


_CONSTANT = re.compile(r"local [A-Z][A-Z0-9_]* = (?:-?[0-9][0-9.e]*|'[^'\\]*')\s*(?:--.*)?")
_FUNCTION = re.compile(r"local function ([A-Za-z_]\w*)")


def _continues(lines: list[str], j: int) -> bool:
    """True when the statement before line ``j`` goes on: the next line with code is
    indented (a one-line ``local function ... end`` is followed by one that is not)."""
    for line in lines[j:]:
        if line.strip() and not line.startswith("--"):
            return line[0].isspace()
    return False


def _declarations(text: str) -> tuple[str, str]:
    """Split an operation's own text into the leading run of top-level ``local``
    statements, for block level, and the rest (from its first other statement on), the
    body run per call. In the declarations, a ``local function`` is made once; a literal
    ``UPPER_CASE`` constant is kept once; any other local is per-call state, declared at
    block level and assigned by a reset function, in order, before the body runs: as
    these statements only declare, running them all before the body is the order they
    had. A function that the rest reassigns ends the run."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--[["):  # a long comment (the contract header)
            end = next(j for j in range(i, len(lines)) if "]]" in lines[j])
            out.extend(lines[i : end + 1])
            i = end + 1
            continue
        if not line.strip() or line.startswith("--"):
            out.append(line)
            i += 1
            continue
        if not line.startswith("local "):
            break
        j = i + 1
        function = _FUNCTION.match(line)
        if function and _continues(lines, j):  # to its `end` at column 0
            while j < len(lines) and not re.match(r"end\b", lines[j]):
                j += 1
            if j == len(lines):
                break  # not a layout this understands: the rest stays per call
            j += 1
        else:  # to the next line at column 0 that is not a closing one
            while j < len(lines) and (
                not lines[j].strip()
                or lines[j][0].isspace()
                or re.match(r"(?:end\b|\}|\))", lines[j])
            ):
                j += 1
        item = "\n".join(lines[i:j])
        rest = "\n".join(lines[j:])
        if function:
            assigned = rf"(?m)^\s*{function.group(1)}\s*=(?!=)"
            if re.search(assigned, rest):
                break
            out.append(item)
        elif _CONSTANT.fullmatch(item.strip()) and not re.search(
            rf"(?m)^\s*{item.split()[1]}\s*=(?!=)", rest
        ):
            out.append(item)
        else:
            names, body = per_call_block(item + "\n")
            out.append(
                f"local {', '.join(names)}\ndurq_resets[#durq_resets + 1] = function()\n{body}end"
            )
        i = j
    return "\n".join(out) + "\n", "\n".join(lines[i:])


@functools.cache
def library() -> Library:
    """The library of every operation in ``SCRIPT_NAMES``, as the driver loads it."""
    return build(SCRIPT_NAMES)


def build(ops: Sequence[str]) -> Library:
    """A library of the operations ``ops`` (files of this package, without ``.lua``)."""
    # the hash covers the blocks with a placeholder for itself
    read = functools.cache(lua._read)  # each file is included by many operations
    blocks = {op: _block(op, f"durq_@_{op}", read) for op in ops}
    digest = hashlib.sha1("".join(blocks.values()).encode("utf-8")).hexdigest()[:12]
    name = f"durq_{digest}"
    functions = {op: f"{name}_{op}" for op in ops}
    body = "".join(b.replace(f"'durq_@_{op}'", f"'{functions[op]}'") for op, b in blocks.items())
    return Library(name, f"#!lua name={name}\n{body}", functions)

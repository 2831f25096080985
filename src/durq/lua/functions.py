"""The operation scripts as one Redis Functions library (Redis 7+, Valkey), for FCALL.

With EVALSHA, Lua runs a script's whole flattened text on every call: each ``local
function`` and table of the included ``lib/`` files is made again each time. A Functions
library runs its text once, at FUNCTION LOAD; each FCALL then runs only the body of the
function it names. :func:`library` builds that library from the same files, with no
second copy of any Lua:

* the operations fall into a few groups (today two), each a ``do ... end`` block of the
  library holding ONE copy of every lib its members include, at block level (made once,
  shared by its members). A lib's objects stay in the server's Lua heap for good, and the
  collector walks all of them in every cycle, its periodic step in the sweep in one call
  (issue 19: the pickup p99): one copy per group rather than one per operation makes the
  heap 2.3 times smaller (0.5 MB, 221 ``local function``s for 148 names, against 1.2 MB
  and 990). Groups exist because Lua 5.1 allows 200
  active locals in a function, the main chunk included, and all libs hold more: an
  operation joins the group whose libs it adds fewest locals to, when the total stays
  under that, no two libs of the group declare one name and every lib it shares reads the
  same for it (a lib's include inside a function differs with what the operation included
  before). The libs go in an order where each follows the libs it includes;
* within its group each operation is a nested ``do ... end`` block: its own top-level
  declarations (made once) and its own text inside a function ``run`` (made per call, as
  under EVALSHA: its locals are per call by nature);
* functions receive ``(keys, args)`` rather than the KEYS and ARGV globals: each group
  declares ``KEYS`` and ``ARGV`` locals, which the registered function sets first (calls
  run one at a time on a server, so the members share them);
* what a lib computes per call at its top level (the K_* keys from KEYS, caches, flags,
  counters) sits between ``--- @per-call`` and ``--- @end`` lines. Under EVALSHA those
  lines are comments; here the block's ``local`` statements become group-level
  declarations plus a reset function that assigns them (``durq_lib_resets['lib/core/keys#1']``).
  Each registered function runs, at the start of every call, the reset functions of the
  libs its operation includes, in the order of its flattened text, then those of its own
  per-call declarations, so each call starts exactly as a fresh EVALSHA would, whatever
  another member of the group ran before it. A lib's other top-level locals are functions
  or constants (``UPPER_CASE``, never assigned): tests/lua/test_functions.py fails on any
  other;
* an include indented under a ``local function`` (lib/limits/gate.lua includes lib/limits/gate_hooks
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

__all__ = [
    "COLLECTOR_STEP",
    "COLLECTOR_STEPMUL",
    "FREES_MEMORY",
    "Library",
    "build",
    "flags",
    "library",
    "per_call_block",
]

_PER_CALL = re.compile(r"^--- @per-call[^\n]*\n(.*?)^--- @end[^\n]*$", re.MULTILINE | re.DOTALL)
# text that only EVALSHA runs (Redis 6.2's replicate_commands, a name Functions refuse)
_EVAL_ONLY = re.compile(r"^--- @eval-only[^\n]*\n.*?^--- @end[^\n]*$", re.MULTILINE | re.DOTALL)
# one statement of a per-call block: `local a, b = ...` or `local a` (nil)
_LOCAL = re.compile(r"^local ([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)[ \t]*(=?)", re.MULTILINE)


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


def _nested(name: str, seen: set[str], read: Callable[[str], str]) -> str:
    """The flattened text of lib ``name`` included inside a function: its text as it
    is, with its own includes, each file once per operation (``seen``)."""
    if name in seen:
        return ""
    seen.add(name)
    text = _EVAL_ONLY.sub("", read(name))
    return _INCLUDE.sub(lambda match: _nested(match.group(2), seen, read), text)


@dataclass(frozen=True)
class _Op:
    """One operation as a group of the library takes it: its libs in the order of its
    flattened text (each lib's own text, its top-level includes taken out), the keys of
    the libs' reset functions in the order EVALSHA would run their blocks, and its own
    declarations and body."""

    name: str
    libs: tuple[tuple[str, str], ...]
    names: dict[str, list[str]]  # lib -> the locals it declares at the chunk's level
    resets: tuple[str, ...]
    declarations: str
    body: str


_SENTINEL = re.compile("\x00([A-Za-z0-9_/]*)\x00")
_RESET_KEY = re.compile(r"^durq_lib_resets\['([^']+)'\] = function\(\)$", re.MULTILINE)


def _op(op: str, read: Callable[[str], str]) -> _Op:
    """Split operation ``op`` into its libs and its own text (see :class:`_Op`)."""
    seen: set[str] = set()
    pieces: dict[str, str] = {}
    names: dict[str, list[str]] = {}
    inline: dict[str, str] = {}

    def include(name: str) -> str:
        """A top-level include: a placeholder where the lib's text would go, the first
        time only."""
        if name in seen:
            return ""
        visit(name)
        return f"\x00{name}\x00"

    def visit(name: str) -> None:
        seen.add(name)
        count = 0

        def reset(match: re.Match[str]) -> str:
            nonlocal count
            count += 1
            declared, body = per_call_block(match.group(1))
            key = f"{name}#{count}"
            return (
                f"local {', '.join(declared)}\ndurq_lib_resets['{key}'] = function()\n{body}end\n"
            )

        def expand(match: re.Match[str]) -> str:
            if match.group(1):  # inside a function of this lib: its text, per call of it
                return _nested(match.group(2), seen, read)
            return include(match.group(2))

        text = _PER_CALL.sub(reset, _EVAL_ONLY.sub("", read(name)))
        names[name] = _names(_INCLUDE.sub("", text))  # not those of a nested include
        text = _INCLUDE.sub(expand, text)
        pieces[name] = _SENTINEL.sub("", text)
        inline[name] = _SENTINEL.sub(lambda m: inline.get(m.group(1), ""), text)

    def hoist(match: re.Match[str]) -> str:
        if match.group(1):
            raise ScriptLoadError(f"{op}.lua: an operation's includes must be at its top level")
        return include(match.group(2))

    own = _INCLUDE.sub(hoist, read(op))
    flat = _SENTINEL.sub(lambda m: inline.get(m.group(1), ""), own)
    declarations, body = _declarations(_SENTINEL.sub("", own))
    return _Op(
        op, tuple(pieces.items()), names, tuple(_RESET_KEY.findall(flat)), declarations, body
    )


_TOP_LOCAL = re.compile(
    r"^local (?:function ([A-Za-z_]\w*)|([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*))", re.MULTILINE
)


def _names(text: str) -> list[str]:
    """The locals that ``text`` declares at its top level (column 0)."""
    return [
        n.strip()
        for fn, names in _TOP_LOCAL.findall(text)
        for n in ([fn] if fn else names.split(","))
    ]


#: Lua 5.1's ceiling on the locals active at once in one function (LUAI_MAXVARS): a
#: group's libs and its largest operation's own declarations share the main chunk's
#: (each operation's own sit in a nested block, so only one operation's count at once)
_MAX_LOCALS = 200
_GROUP_LOCALS = 3  # KEYS, ARGV, durq_lib_resets
_OP_LOCALS = 2  # durq_resets, durq_run


class _Group:
    """Operations that share one copy of their libs: the libs in an order that is each
    member's own, no two libs declaring one name, and every lib's text the same for each
    member that includes it."""

    def __init__(self) -> None:
        self.ops: list[_Op] = []
        self.libs: dict[str, str] = {}
        self.owner: dict[str, str] = {}  # top-level name -> lib declaring it
        self.locals = _GROUP_LOCALS
        self.own = 0  # the most locals an operation's own declarations hold

    def cost(self, op: _Op) -> int | None:
        """The locals that ``op`` would add to this group, or None when it cannot join."""
        added = 0
        owner = dict(self.owner)
        for lib, text in op.libs:
            if lib in self.libs:
                if self.libs[lib] != text:
                    return None
                continue
            for name in op.names[lib]:
                if owner.setdefault(name, lib) != lib:
                    return None
                added += 1
        own = max(self.own, len(_names(op.declarations)) + _OP_LOCALS)
        if self.locals + added + own > _MAX_LOCALS:
            return None
        return added

    def add(self, op: _Op) -> None:
        self.ops.append(op)
        for lib, text in op.libs:
            if lib not in self.libs:
                self.libs[lib] = text
                self.locals += len(op.names[lib])
                for name in op.names[lib]:
                    self.owner[name] = lib
        self.own = max(self.own, len(_names(op.declarations)) + _OP_LOCALS)


def _groups(ops: list[_Op]) -> list[_Group]:
    """Operations in groups, greedily: the largest first, each into the group where its
    libs add the fewest locals (most shared), a new group when none can take it."""
    groups: list[_Group] = []
    for op in sorted(ops, key=lambda o: (-sum(map(len, o.names.values())), o.name)):
        fits = [(cost, i) for i, g in enumerate(groups) if (cost := g.cost(op)) is not None]
        if fits:
            groups[min(fits)[1]].add(op)
        else:
            group = _Group()
            if group.cost(op) is None:
                raise ScriptLoadError(f"{op.name}.lua: its libs hold too many locals for one chunk")
            group.add(op)
            groups.append(group)
    return groups


#: the lib an operation includes to run while the server is at maxmemory
#: (lib/core/frees_memory.lua): its function is registered with the allow-oom flag
FREES_MEMORY = "lib/core/frees_memory"


def flags(op: str) -> tuple[str, ...]:
    """The flags of operation ``op``'s function: ``allow-oom`` when the operation itself
    includes lib/core/frees_memory, which gives its EVALSHA script the same effect."""
    included = {match.group(2) for match in _INCLUDE.finditer(lua._read(op))}
    return ("allow-oom",) if FREES_MEMORY in included else ()


def _register(function: str, params: str, op: str) -> str:
    """The head of the registration of ``function`` (its callback's body follows, then
    ``_REGISTERED``), with ``op``'s flags."""
    named = ", ".join(f"'{flag}'" for flag in flags(op))
    return (
        f"redis.register_function{{function_name = '{function}', flags = {{{named}}},\n"
        f"callback = function({params})\n"
    )


_REGISTERED = "end}\n"


def _block(op: _Op, function: str) -> str:
    """The ``do ... end`` block, inside its group's, that registers ``function``."""
    resets = ", ".join(f"durq_lib_resets['{key}']" for key in op.resets)
    return (
        f"do -- {op.name}\nlocal durq_resets = {{{resets}}}\n"
        + op.declarations
        + f"\nlocal function durq_run()\n{op.body}\nend\n"
        + _register(function, "keys, args", op.name)
        + "  KEYS, ARGV = keys, args\n"
        + _pace()
        + "  for i = 1, #durq_resets do durq_resets[i]() end\n"
        + (_RUN_AND_STEP if op.name in COLLECTOR_STEP else "  return durq_run()\n")
        + _REGISTERED
        + "end\n"
    )


#: operations whose every call ends with one increment of the server's Lua collector
#: (docs/design.md, "The library"): the worker's release, which runs after its jobs,
#: off the pickup path and off a producer's; an enqueue or a fetch would pay the
#: increment on a caller's path (docs/decisions/collector-step.md)
COLLECTOR_STEP: frozenset[str] = frozenset({"release"})
_RUN_AND_STEP = "  local reply = durq_run()\n  collectgarbage('step', 0)\n  return reply\n"

#: the step multiplier every call of the library gives the Functions VM's collector
#: (docs/design.md, "The library"). The server's own periodic step (every 50th script
#: call) does 50 increments of work sized by it: at Lua's 200 enough collector work in
#: one call to set the pickup's p99; at 50 a quarter of it, for a larger heap
#: (docs/decisions/collector-step-multiplier.md). A library's load cannot set it (the
#: servers refuse ``collectgarbage`` there), so each call does, for next to nothing.
COLLECTOR_STEPMUL = 50


def _pace() -> str:
    """The first line of every registered function: the collector's step multiplier."""
    return f"  collectgarbage('setstepmul', {COLLECTOR_STEPMUL})\n"


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
    """The library of every operation in ``SCRIPT_NAMES``, as the driver loads it (kept
    on disk between processes: ``durq.lua.library_cache``)."""
    from durq.lua.library_cache import cached_library

    return cached_library(SCRIPT_NAMES, lambda: build(SCRIPT_NAMES), Library)


def build(ops: Sequence[str]) -> Library:
    """A library of the operations ``ops`` (files of this package, without ``.lua``)."""
    read = functools.cache(lua._read)  # each file is included by many operations
    order = {op: i for i, op in enumerate(ops)}
    text = ""
    for group in _groups([_op(op, read) for op in ops]):
        members = sorted(group.ops, key=lambda o: order[o.name])
        text += (
            f"do -- {', '.join(o.name for o in members)}\n"
            "local KEYS, ARGV\nlocal durq_lib_resets = {}\n"
            + "".join(group.libs.values())
            + "".join(_block(o, f"durq_@_{o.name}") for o in members)
            + "end\n"
        )
    # the hash covers the text with a placeholder for itself
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]
    name = f"durq_{digest}"
    functions = {op: f"{name}_{op}" for op in ops}
    body = re.sub(r"'durq_@_(\w+)'", lambda m: f"'{functions[m.group(1)]}'", text)
    return Library(name, f"#!lua name={name}\n{body}", functions)

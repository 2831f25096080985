"""The Lua scripts behind every queue operation, one file per operation.

Each script starts with a contract header (``--[[ name: purpose ... ]]``) that lists its
KEYS, ARGV, replies, errors and cost; shared helpers live in ``lib/`` and are pulled in
with ``--- @include "lib/name"`` lines. :func:`load` resolves the includes (each file at
most once, cycles and missing files are errors that name the include stack) and returns
the flattened source with its SHA1, ready for EVALSHA. On servers with Functions the
same files run as one library instead (``durq.lua.functions``).
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from importlib import resources

__all__ = ["SCRIPT_NAMES", "Script", "ScriptLoadError", "load", "load_all"]

# an indented include is inside a function of the including file (lib/functions.py)
_INCLUDE = re.compile(r'^([ \t]*)--- @include "([A-Za-z0-9_/]+)"\s*$', re.MULTILINE)

SCRIPT_NAMES: tuple[str, ...] = (
    "cancel",
    "configure",
    "dead_letters",
    "defer",
    "dequeue",
    "enqueue",
    "enqueue_control",
    "enqueue_plain",
    "enqueue_single",
    "extend",
    "flow_info",
    "flow_pause",
    "groups",
    "job",
    "progress",
    "publish",
    "purge",
    "rate_limited",
    "release",
    "replay",
    "requeue",
    "schedule_control",
    "schedule_list",
    "schedule_refill",
    "schedule_upsert",
    "stats",
    "workflow_cancel",
    "workflow_deliver",
    "workflow_submit",
)


class ScriptLoadError(RuntimeError):
    """A script or one of its includes is missing, or the includes form a cycle."""


@dataclass(frozen=True)
class Script:
    """A flattened script: its name, its source and the SHA1 that EVALSHA uses."""

    name: str
    source: str
    sha: str

    @property
    def header(self) -> str:
        """The contract header: the text of the leading ``--[[ ... ]]`` block."""
        match = re.match(r"--\[\[(.*?)\]\]", self.source, re.DOTALL)
        return match.group(1).strip() if match else ""


def _read(name: str) -> str:
    path = resources.files(__package__).joinpath(f"{name}.lua")
    if not path.is_file():
        raise ScriptLoadError(f"no Lua file {name}.lua in {__package__}")
    return path.read_text(encoding="utf-8")


def _flatten(name: str, stack: tuple[str, ...], seen: set[str]) -> str:
    if name in stack:
        raise ScriptLoadError("include cycle: " + " -> ".join((*stack, name)))
    if name in seen:
        return ""
    seen.add(name)
    try:
        text = _read(name)
    except ScriptLoadError as exc:
        via = " (included from " + " -> ".join(stack) + ")" if stack else ""
        raise ScriptLoadError(f"{exc}{via}") from None

    def expand(match: re.Match[str]) -> str:
        return _flatten(match.group(2), (*stack, name), seen)

    return _INCLUDE.sub(expand, text)


@functools.cache
def load(name: str) -> Script:
    """Return the flattened script ``name`` (a file in this package, without ``.lua``)."""
    source = _flatten(name, (), set())
    return Script(name, source, hashlib.sha1(source.encode("utf-8")).hexdigest())


def load_all() -> dict[str, Script]:
    """Every operation script, by name."""
    return {name: load(name) for name in SCRIPT_NAMES}

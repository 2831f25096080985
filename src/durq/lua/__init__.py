"""The Lua scripts behind every queue operation, one file per operation.

- ``ops/<operation>.lua``: one script per operation, each starting with a contract header
  (``--[[ name: purpose ... ]]``) that lists its KEYS, ARGV, replies, errors and cost;
- ``lib/<area>/<name>.lua``: the helpers they share, one concept per file, by area
  (``core``, ``groups``, ``limits``, ``control``, ``schedules``, ``workflows``,
  ``durable``), pulled in
  with ``--- @include "lib/<area>/<name>"`` lines;
- this module, the loader: :func:`load` resolves the includes (each file at most once,
  cycles and missing files are errors that name the include stack) and returns the
  flattened source with its SHA1, ready for EVALSHA;
- ``functions``: the same files as one Functions library, for FCALL (Redis 7+, Valkey).

A name with a slash is a path under this package without ``.lua`` (``lib/core/keys``);
a bare name is an operation (``dequeue``: ``ops/dequeue.lua``).
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from importlib import resources

from durq.errors import ScriptLoadError

__all__ = ["SCRIPT_NAMES", "Script", "ScriptLoadError", "lib_names", "load", "load_all"]

# an indented include is inside a function of the including file (functions.py)
_INCLUDE = re.compile(r'^([ \t]*)--- @include "([A-Za-z0-9_/]+)"\s*$', re.MULTILINE)

SCRIPT_NAMES: tuple[str, ...] = (
    "cancel",
    "caps",
    "caps_seen",
    "configure",
    "dead_letters",
    "defer",
    "dequeue",
    "enqueue",
    "enqueue_control",
    "enqueue_plain",
    "enqueue_single",
    "extend",
    "groups",
    "hold",
    "job",
    "limits_info",
    "limits_pause",
    "parked_counts",
    "progress",
    "publish",
    "purge",
    "rate_limited",
    "release",
    "replay",
    "requeue",
    "scaling",
    "schedule_control",
    "schedule_list",
    "schedule_refill",
    "schedule_upsert",
    "settle",
    "signal",
    "signal_deliver",
    "stats",
    "unhold",
    "step_list",
    "step_record",
    "step_sleep",
    "step_wait",
    "workflow_cancel",
    "workflow_deliver",
    "workflow_submit",
    "workflow_submit_legacy",
)


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


def _path(name: str) -> str:
    """The file of ``name``: a path under this package, or an operation's in ``ops/``."""
    return f"{name}.lua" if "/" in name else f"ops/{name}.lua"


def _read(name: str) -> str:
    path = resources.files(__package__).joinpath(_path(name))
    if not path.is_file():
        raise ScriptLoadError(f"no Lua file {_path(name)} in {__package__}")
    return path.read_text(encoding="utf-8")


def lib_names() -> list[str]:
    """Every shared helper, as its include names it (``lib/core/keys``), sorted."""
    root = resources.files(__package__).joinpath("lib")
    return sorted(
        f"lib/{area.name}/{path.name[:-4]}"
        for area in root.iterdir()
        if area.is_dir()
        for path in area.iterdir()
        if path.name.endswith(".lua")
    )


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
    """The flattened script ``name``: an operation, or a path such as ``lib/core/record``."""
    source = _flatten(name, (), set())
    return Script(name, source, hashlib.sha1(source.encode("utf-8")).hexdigest())


def load_all() -> dict[str, Script]:
    """Every operation script, by name."""
    return {name: load(name) for name in SCRIPT_NAMES}

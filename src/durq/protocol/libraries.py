"""durq's Redis Functions libraries on a server: which are loaded, and removing the
libraries of other durq versions.

Each durq version loads its own library, ``durq_<hash>`` (:mod:`durq.lua.functions`),
next to those already there, so that workers of two versions can run side by side during
an upgrade; durq never deletes one by itself. A library holds about 2.4 MB of the
server's memory, so a server that has seen many upgrades keeps many. Removing them is
safe at any time: a worker of an older version that still runs gets "Function not found"
on its next call, loads its library again and resends the call (the driver does so
after a restart or FUNCTION FLUSH too), which costs it one FUNCTION LOAD.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from durq.protocol.calls import Op, reply_or_error, text

__all__ = ["LibraryInfo", "loaded_libraries", "prune_libraries"]

# durq's own library names: "durq_" and 12 hex digits of the library's hash; a user's
# library that merely starts with "durq_" is never listed or deleted
_NAME = re.compile(r"durq_[0-9a-f]{12}")


@dataclass(frozen=True)
class LibraryInfo:
    """One of durq's Functions libraries on a server."""

    #: ``durq_<hash>``
    name: str
    #: how many functions (operations) it registers
    functions: int
    #: True for the library of this durq version
    current: bool


def _pairs(entry: Any) -> Iterator[tuple[str, Any]]:
    items = list(entry)
    for i in range(0, len(items) - 1, 2):
        yield text(items[i]), items[i + 1]


def loaded_libraries(current: str) -> Op[list[LibraryInfo] | None]:
    """durq's libraries on the server, this version's (named ``current``) first; None
    when the server has no Functions (Redis 6.2: durq runs its scripts with EVALSHA)."""
    reply = yield from reply_or_error("FUNCTION", "LIST", "LIBRARYNAME", "durq_*")
    if isinstance(reply, Exception):
        if "unknown command" in str(reply).lower():
            return None
        raise reply
    out: list[LibraryInfo] = []
    for entry in reply or ():
        fields = dict(_pairs(entry))
        name = text(fields.get("library_name", ""))
        if _NAME.fullmatch(name):
            out.append(LibraryInfo(name, len(fields.get("functions") or ()), name == current))
    out.sort(key=lambda lib: (not lib.current, lib.name))
    return out


def prune_libraries(current: str) -> Op[list[str] | None]:
    """Delete durq's libraries other than ``current``; return their names (None when
    the server has no Functions). A library deleted meanwhile by someone else is skipped."""
    libraries = yield from loaded_libraries(current)
    if libraries is None:
        return None
    deleted: list[str] = []
    for lib in libraries:
        if lib.current:
            continue
        reply = yield from reply_or_error("FUNCTION", "DELETE", lib.name)
        if isinstance(reply, Exception):
            if "library not found" in str(reply).lower():
                continue  # deleted meanwhile (another prune): what was asked holds
            raise reply
        deleted.append(lib.name)
    return deleted

"""durq's Redis Functions libraries on a server: trusting this version's before calling
it, which are loaded, and removing the libraries of other durq versions.

A library's name and its functions' names are fixed and public (``durq_<hash>``), and a
function runs with the permissions of whoever calls it: anyone allowed FUNCTION LOAD
could load code of theirs under durq's names and have durq's callers run it. So before
its first FCALL on a server a client runs :func:`trust_library`, which reads the library
back with its code and accepts only durq's own, byte for byte; "already exists" is never
taken for "loaded". It cannot see a library replaced after that check: only denying
FUNCTION LOAD (and DELETE, FLUSH, RESTORE) to all but an admin closes that
(docs/deployment.md, "AUTH and ACL").

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
from typing import Any

from durq.errors import ForeignLibrary
from durq.lua.functions import Library
from durq.models import LibraryInfo, Trust
from durq.protocol.calls import Op, reply_or_error, text

__all__ = ["loaded_libraries", "prune_libraries", "trust_library"]

# durq's own library names: "durq_" and 12 hex digits of the library's hash; a user's
# library that merely starts with "durq_" is never listed or deleted
_NAME = re.compile(r"durq_[0-9a-f]{12}")


def _pairs(entry: Any) -> Iterator[tuple[str, Any]]:
    """The fields of a map reply: a flat list (RESP2 as durq's driver reads it) or a dict
    (redis-py's own parsing of FUNCTION LIST)."""
    if isinstance(entry, dict):
        for key, value in entry.items():
            yield text(key), value
        return
    items = list(entry)
    for i in range(0, len(items) - 1, 2):
        yield text(items[i]), items[i + 1]


def _refusal(reply: Exception) -> Trust:
    """What a refused FUNCTION command says about the server or the user; other errors
    are raised."""
    message = str(reply)
    if message.lower().startswith("unknown command"):
        return Trust.NO_FUNCTIONS
    if "permission" in message and "'function|" in message:
        return Trust.NOT_ALLOWED
    if "maxmemory" in message:
        return Trust.OUT_OF_MEMORY
    raise reply


def _code_of(reply: Any, name: str) -> str | None:
    """The code of library ``name`` in a FUNCTION LIST ... WITHCODE reply (None: absent)."""
    for entry in reply or ():
        fields = dict(_pairs(entry))
        if text(fields.get("library_name", "")) == name:
            return text(fields.get("library_code", ""))
    return None


def _holder(reply: Any, lib: Library) -> str | None:
    """The library that registers one of ``lib``'s function names, in a FUNCTION LIST
    reply."""
    ours = set(lib.functions.values())
    for entry in reply or ():
        fields = dict(_pairs(entry))
        for function in fields.get("functions") or ():
            if text(dict(_pairs(function)).get("name", "")) in ours:
                return text(fields.get("library_name", "?"))
    return None


def trust_library(lib: Library, *, replace: bool = False) -> Op[Trust]:
    """Make sure the server holds ``lib``, durq's library, and no other code under its
    names; return how durq may run its scripts there.

    Reads the library back with its code (FUNCTION LIST LIBRARYNAME ... WITHCODE): its
    own, byte for byte, is trusted. A missing one is loaded (FUNCTION LOAD), and a load
    refused with "already exists" is looked at again (another client may have loaded
    it meanwhile), never taken for loaded. Raises ForeignLibrary when the library of
    that name holds other code (``replace``: loads durq's over it instead, for an admin
    who found who wrote it), or when another library registers its function names.
    """
    for _ in range(2):
        reply = yield from reply_or_error("FUNCTION", "LIST", "LIBRARYNAME", lib.name, "WITHCODE")
        if isinstance(reply, Exception):
            return _refusal(reply)
        code = _code_of(reply, lib.name)
        if code == lib.source:
            return Trust.VERIFIED
        if code is not None and not replace:
            raise ForeignLibrary(lib.name, "a library of that name holds other code")
        load = ("REPLACE", lib.source) if code is not None else (lib.source,)
        reply = yield from reply_or_error("FUNCTION", "LOAD", *load)
        if not isinstance(reply, Exception):
            return Trust.LOADED
        if "already exists" not in str(reply):
            return _refusal(reply)
    # durq's library is not there, yet a load says its functions exist: another holds them
    reply = yield from reply_or_error("FUNCTION", "LIST")
    holder = None if isinstance(reply, Exception) else _holder(reply, lib)
    raise ForeignLibrary(lib.name, f"library {holder or '?'} registers the names of its functions")


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

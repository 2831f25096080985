"""RESP for the drivers' requests, packed by hiredis's C packer (IO-free; both drivers
share it): redis-py's own packer first converts every argument in Python, which cost as
much as the round trip for large batches. durq only sends str, bytes, int and float
arguments, which hiredis takes as they are."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import hiredis

__all__ = ["HEADS_MAX", "pack"]


def pack(commands: Sequence[tuple[Any, ...]]) -> list[bytes]:
    """RESP for ``commands``: a list of chunks, as redis-py's ``send_packed_command``
    takes them."""
    if len(commands) == 1:  # most requests: no join, no copy
        return [_one(commands[0])]
    return [b"".join([_one(c) for c in commands])]


#: the RESP of a script call's head (FCALL or EVALSHA, the function or SHA, the key
#: count, the keys), by that head: the same for every call of one script on one queue
_HEADS: dict[tuple[Any, ...], bytes] = {}
#: a bound on _HEADS (many queues); past it the cache starts again
HEADS_MAX = 4096


def _one(command: tuple[Any, ...]) -> bytes:
    """RESP for one command. A script call's head, which is most of its bytes (17 keys
    for a queue), is packed once and kept: RESP is an array header followed by each
    argument on its own, so the head's bytes are the same in every call. The head is
    the cache key itself, so a call that moves to EVALSHA (or back to FCALL) uses its
    own head."""
    if command[0] != "FCALL" and command[0] != "EVALSHA":
        whole: bytes = hiredis.pack_command(tuple(command))
        return whole
    end: int = 3 + command[2]
    head = command[:end]
    packed = _HEADS.get(head)
    if packed is None:
        if len(_HEADS) >= HEADS_MAX:
            _HEADS.clear()
        whole = hiredis.pack_command(head)
        packed = _HEADS[head] = whole[whole.index(b"\r\n") + 2 :]
    body = hiredis.pack_command(command[end:]) if len(command) > end else b"*0\r\n"
    # the array header counts head and arguments; the arguments' own header goes
    return b"".join((b"*%d\r\n" % len(command), packed, body[body.index(b"\r\n") + 2 :]))

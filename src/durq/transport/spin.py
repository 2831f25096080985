"""Spin, then sleep: how a blocking connection waits for the first bytes of a reply.

A blocking ``recv`` puts the calling thread to sleep, and the kernel wakes it when the
reply lands. On a virtual machine that wake-up is the larger part of a round trip to a
server on the same host: a loopback ``LPUSH`` measured 22-25 µs from a caller that polls
the socket without sleeping and 42-76 µs from one that sleeps, for about the same CPU
(the sleeper pays the scheduler instead; ``bench/archive/``). So the sync front end's exchange
polls for up to ``budget()`` seconds (``DURQ_REPLY_SPIN_US``, 100 µs by default; 0 turns
it off) before it sleeps in ``recv`` as before.

A reply that takes longer than the budget (a remote server, a blocking wait, a large
batch) gains nothing from the poll, so a connection that misses ``MISSES`` times in a row
stops polling for its next ``REST`` exchanges and then tries again: against a server
across a network the poll costs at most ``budget() * MISSES`` of CPU every ``REST``
exchanges. Only plain TCP and Unix sockets are polled (TLS has to read whole records);
the asyncio front end never polls (its event loop has other work to run while it waits).
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from durq.errors import InvalidArgument

__all__ = ["MISSES", "REST", "budget", "first_read", "set_budget"]

#: consecutive polls that found nothing within the budget before a connection rests
MISSES = 4
#: exchanges a resting connection makes without polling before it tries again
REST = 256

_SPIN_ATTR = "_durq_spin"  # per connection: misses in a row (>= 0) or rest left (< 0)
_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
# polling needs both non-blocking reads (POSIX); elsewhere the budget stays 0
_CAN_POLL = bool(_DONTWAIT) and hasattr(os, "readv")


def _budget_from_env() -> float:
    raw = os.environ.get("DURQ_REPLY_SPIN_US", "100")
    try:
        micros = float(raw)
    except ValueError:
        raise InvalidArgument(
            f"DURQ_REPLY_SPIN_US must be a number of microseconds, not {raw!r}"
        ) from None
    return max(micros, 0.0) / 1e6 if _CAN_POLL else 0.0


_budget = _budget_from_env()


def budget() -> float:
    """Seconds a blocking exchange polls for its reply before it sleeps (0: never)."""
    return _budget


def set_budget(seconds: float) -> None:
    """Set the poll budget for this process (``0`` turns polling off)."""
    global _budget
    _budget = max(float(seconds), 0.0) if _CAN_POLL else 0.0


def first_read(conn: Any, sock: Any, buffer: bytearray) -> int:
    """Read the first bytes of a reply on ``sock`` (``conn``'s socket) into ``buffer``:
    poll without sleeping for up to the budget, then block as ``recv_into`` does.
    Returns the number of bytes read (0: the server closed the connection); raises what
    ``recv_into`` raises (its timeout included)."""
    state: int = conn.__dict__.get(_SPIN_ATTR, 0)
    # only the standard library's own socket class: TLS sockets (ssl) are another, and so
    # are gevent's and eventlet's cooperative ones, whose other greenlets a poll would hold up
    if state < 0 or not _budget or type(sock).__module__ != "socket":
        if state < 0:
            conn.__dict__[_SPIN_ATTR] = state + 1
        return int(sock.recv_into(buffer))
    # a socket with a timeout is non-blocking underneath, and its recv_into would poll()
    # with the timeout before reading: read its descriptor directly instead. A socket
    # without one blocks, so it is asked not to.
    fd = sock.fileno() if sock.gettimeout() is not None else -1
    deadline = time.perf_counter() + _budget
    while True:
        try:
            size = os.readv(fd, (buffer,)) if fd >= 0 else sock.recv_into(buffer, 0, _DONTWAIT)
        except BlockingIOError:
            if time.perf_counter() < deadline:
                continue
            conn.__dict__[_SPIN_ATTR] = -REST if state + 1 >= MISSES else state + 1
            return int(sock.recv_into(buffer))
        if state:
            conn.__dict__[_SPIN_ATTR] = 0
        return size

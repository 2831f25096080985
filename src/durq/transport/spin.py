"""Spin, then sleep: how a blocking connection may wait for the first bytes of a reply.

A blocking ``recv`` puts the calling thread to sleep, and the kernel wakes it when the
reply lands. Where that wake-up is a large part of a round trip (a virtual machine, a
server on the same host, a producer sending back to back), polling the socket for a
moment before sleeping can shorten the round trip. It costs CPU in the caller's thread,
and in a threaded application it gains nothing measurable, so it is off by default:
``DURQ_REPLY_SPIN_US`` (microseconds) turns it on for a process, ``set_budget`` for the
running one. The figures and the choice are in ``docs/decisions/reply-spin.md``.

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

_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
# polling needs both non-blocking reads (POSIX); elsewhere the budget stays 0
_CAN_POLL = bool(_DONTWAIT) and hasattr(os, "readv")


def _budget_from_env() -> float:
    raw = os.environ.get("DURQ_REPLY_SPIN_US", "0")
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


def first_read(sock: Any, buffer: bytearray, state: int) -> tuple[int, int]:
    """Read the first bytes of a reply on ``sock`` into ``buffer``: poll without sleeping
    for up to the budget, then block as ``recv_into`` does. ``state`` is the connection's
    (kept by the caller; 0 for a new one): polls in a row that found nothing (>= 0), or
    exchanges left to rest (< 0). Returns the number of bytes read (0: the server closed
    the connection) and the connection's next state; raises what ``recv_into`` raises (its
    timeout included)."""
    # only the standard library's own socket class: TLS sockets (ssl) are another, and so
    # are gevent's and eventlet's cooperative ones, whose other greenlets a poll would hold up
    if state < 0 or not _budget or type(sock).__module__ != "socket":
        return int(sock.recv_into(buffer)), state + 1 if state < 0 else state
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
            missed = -REST if state + 1 >= MISSES else state + 1
            return int(sock.recv_into(buffer)), missed
        return size, 0

"""The fence around redis-py's internals: every use durq makes of what redis-py does not
offer as its API lives in this module. ``make check`` fails when another module names a
private redis-py attribute (``scripts/check_redispy_fence.py``), so a redis-py release
that changes these things breaks this module and its tests (``tests/transport/``) only.

**Versions.** Tested with redis-py 7.4.1, the oldest supported, and 8.1.0, the newest:
``pyproject.toml`` pins ``redis[hiredis]>=7.4.1,<9``, and CI runs the fence's tests and a
smoke of the drivers on both, each in a venv of its own (``make test-redispy``;
``tests/transport/test_redispy_fence.py`` keeps the pin, the Makefile and this
paragraph in agreement). Older releases miss what durq needs: before 5.3 a pool's
``get_connection`` wants a command name; before 7.2 a refresh of a Cluster's slot map
(``NodesManager.initialize``) disconnects the connections other threads are using; before
7.4.1 the asyncio Cluster client warns about a ``lib_name`` argument it passes itself.

**What durq uses, and what for.**

- The lean exchanges (``sync_exchange``, ``async_exchange``) write a request's commands on
  a pooled connection and read its replies without redis-py's per-reply layers (a
  timeout per reply, health bookkeeping per reply, push handling). They use
  ``redis._parsers``: ``_HiredisParser`` and ``_AsyncHiredisParser`` (a connection's
  parser is redis-py's hiredis one), ``NOT_ENOUGH_DATA`` (the marker its reader answers
  for an incomplete reply: a reader answering False could not be told from a reply of
  false) and ``SERVER_CLOSED_CONNECTION_ERROR`` (redis-py's words for a closed
  connection); a blocking connection's ``_sock`` and its parser's ``_reader`` and
  ``_buffer``; an asyncio connection's ``_reader`` and ``_writer`` streams and its
  parser's ``_reader`` and ``_read_size``; and ``_host_error()``, how redis-py names the
  server in an error. A connection they do not fit (another parser or connection class,
  RESP3, a reply left unread, a redis-py laid out otherwise) takes redis-py's public path:
  ``send_packed_command`` and ``read_response``.
- State durq keeps on redis-py's objects (``attached``: their instance dictionary, under
  names that start with ``durq_``): a pool's connections idle between durq's requests
  (``IDLE``, the driver's checkout cache), the scripts and library known to be loaded
  (``SCRIPTS``), when a Sentinel pool last asked its Sentinels (``SENTINELS_ASKED``), a
  connection's reply spin (``SPIN``, ``durq.transport.spin``). The queues of an App or a
  worker share one client's pools, so the state is shared with them and goes with them.
- The Sentinel pools (``async_sentinel_pool``, ``sync_sentinel_pool``) subclass redis-py's
  ``SentinelConnectionPool`` to follow the Sentinel with the newest configuration epoch:
  they read its ``sentinel_manager``, ``service_name`` and ``is_master`` and set the
  primary's address where redis-py keeps it (``master_address``; the blocking pool's
  ``proxy``).
- The asyncio Cluster client's ``_initialize`` (``async_cluster_started``): whether its
  first use, ``initialize()``, which ``aclose()`` undoes, has run.
"""

from __future__ import annotations

import asyncio
import builtins
import math
import sys
import time
from collections.abc import Sequence
from typing import Any

import redis
from redis import connection as _redis_connection
from redis.asyncio import connection as _redis_async_connection
from redis.exceptions import ConnectionError, ResponseError, TimeoutError

from durq.transport.spin import first_read

__all__ = [
    "IDLE",
    "SCRIPTS",
    "SENTINELS_ASKED",
    "SPIN",
    "async_cluster_started",
    "async_exchange",
    "async_sentinel_pool",
    "attached",
    "sync_exchange",
    "sync_sentinel_pool",
]

# -- durq's state on redis-py's objects --------------------------------------------------

#: a pool's connections idle between durq's requests: (process id, [(connection, since)])
IDLE = "durq_idle"
#: the scripts known to be loaded, per node (``durq._async.driver._script_cache``)
SCRIPTS = "durq_scripts"
#: when a Sentinel pool last asked its Sentinels for the primary (time.monotonic())
SENTINELS_ASKED = "durq_sentinels_asked"
#: a connection's reply spin: misses in a row (>= 0) or exchanges left to rest (< 0)
SPIN = "durq_spin"


def attached(obj: Any) -> dict[str, Any]:
    """The state durq keeps on ``obj``, one of redis-py's objects (a pool, a connection):
    its instance dictionary, where durq's names (``IDLE``, ``SCRIPTS``,
    ``SENTINELS_ASKED``, ``SPIN``) start with ``durq_`` and redis-py's never do. Raises
    TypeError for an object without one."""
    try:
        state: dict[str, Any] = obj.__dict__
    except AttributeError:
        raise TypeError(f"{type(obj).__name__} keeps no attributes of its own") from None
    return state


def async_cluster_started(client: Any) -> bool:
    """True once an asyncio Cluster client has run its first ``initialize()`` (the one
    that ``aclose()`` undoes); later refreshes of its slot map go to its nodes manager."""
    return not client._initialize


# -- one request's exchange on a pooled connection (what durq's drivers send) ----------

# redis-py's parser internals the lean exchange uses; a redis-py without them (older, or
# laid out otherwise) keeps its own path for every exchange. Its reader must be built
# with this "not enough data" marker: a reader that answers False instead cannot be told
# from a reply of false.
_HiredisParser: Any
_AsyncHiredisParser: Any
try:
    from redis._parsers.hiredis import NOT_ENOUGH_DATA as _NOT_ENOUGH_DATA
    from redis._parsers.hiredis import _AsyncHiredisParser, _HiredisParser
    from redis._parsers.socket import SERVER_CLOSED_CONNECTION_ERROR as _SERVER_CLOSED
except ImportError:  # pragma: no cover - depends on the redis-py version
    _HiredisParser = _AsyncHiredisParser = None

# the connection classes whose read_response is the parser's alone (Sentinel's turns a
# READONLY reply into an error, maintenance-aware and caching ones do more)
_PLAIN_CONNECTIONS = frozenset(
    {
        _redis_connection.Connection,
        _redis_connection.SSLConnection,
        _redis_connection.UnixDomainSocketConnection,
    }
)
_PLAIN_ASYNC_CONNECTIONS = frozenset(
    {
        _redis_async_connection.Connection,
        _redis_async_connection.SSLConnection,
        _redis_async_connection.UnixDomainSocketConnection,
    }
)
_RESP2 = (None, 2, "2")

# asyncio.timeout (3.11+): one deadline for a whole exchange. redis-py's asyncio
# connection otherwise sends under asyncio.wait_for (a Task and a timer) and reads each
# reply under a timeout of its own: CPU and a loop turn per round trip.
_deadline = getattr(asyncio, "timeout", None) if sys.version_info >= (3, 11) else None


async def async_exchange(
    conn: Any, packed: Sequence[bytes], count: int, block: float = 0.0
) -> list[Any]:
    """Send ``packed`` (RESP of ``count`` commands) on ``conn`` and read the ``count``
    replies, error replies in place, within the connection's socket timeout for the
    whole exchange, plus ``block``: the seconds a blocking command among them may wait
    on the server (an idle consumer's wait outlasts the socket timeout). Raises
    redis-py's ConnectionError and TimeoutError as its own methods do; the caller
    disconnects ``conn`` on any error, cancellation included (a half-read reply leaves
    the socket unusable)."""
    limit = conn.socket_timeout
    if limit and block:
        limit += block
    writer = getattr(conn, "_writer", None)  # redis-py's stream, set while connected
    if _deadline is None or not limit or writer is None:
        await conn.send_packed_command(packed, check_health=False)
        return [await _reply(conn, limit if block else None) for _ in range(count)]
    stream = conn._reader
    reader = _lean_reader(conn, _PLAIN_ASYNC_CONNECTIONS, _AsyncHiredisParser)
    try:
        async with _deadline(limit):
            writer.writelines(packed)
            await writer.drain()
            if reader is None:
                return [await _reply(conn, math.inf) for _ in range(count)]
            # the lean path: redis-py's hiredis reader fed from its StreamReader (TLS
            # too: asyncio decrypts below it), without its read_response layers (a
            # timeout per reply, health bookkeeping per reply, push handling)
            size = conn._parser._read_size
            replies: list[Any] = []
            for _ in range(count):
                reply = reader.gets()
                while reply is _NOT_ENOUGH_DATA:
                    data = await stream.read(size)
                    if not data:
                        raise ConnectionError(_SERVER_CLOSED)
                    reader.feed(data)
                    reply = reader.gets()
                replies.append(_checked(reply))
    except TimeoutError:
        raise
    except asyncio.TimeoutError:  # the builtin TimeoutError on 3.11+, not redis-py's
        raise TimeoutError(f"Timeout in a round trip with {conn._host_error()}") from None
    except OSError as exc:
        raise ConnectionError(f"Error in a round trip with {conn._host_error()}: {exc}") from exc
    if conn.health_check_interval:  # as redis-py's read_response keeps it, on the loop's clock
        conn.next_health_check = asyncio.get_running_loop().time() + conn.health_check_interval
    return replies


async def _reply(conn: Any, timeout: float | None = None) -> Any:
    try:
        return await conn.read_response(timeout=timeout)
    except ResponseError as exc:
        return exc


def _lean_reader(conn: Any, plain: frozenset[type], parser_type: Any) -> Any:
    """The hiredis reader of ``conn``'s parser when the lean exchanges may read from it,
    else None (redis-py's path).

    Only plain connection classes (Sentinel's turns a READONLY reply into an error,
    maintenance-aware and caching ones do more), redis-py's hiredis parser, RESP2 (no
    push messages), and a reader holding nothing: a reply left unread takes redis-py's
    path, which returns it first."""
    if type(conn) not in plain or parser_type is None or conn.protocol not in _RESP2:
        return None
    parser = conn._parser
    if type(parser) is not parser_type:
        return None
    reader = parser._reader
    if reader is None or reader.has_data():
        return None
    return reader


def _checked(reply: Any) -> Any:
    """``reply`` as the lean exchanges return it: error replies stay in place as the
    ResponseError subclasses redis-py's reader makes (its parse_error: NoScriptError,
    the Cluster redirects); LOADING and MASTERDOWN, as a reply or first in one, raise
    as redis-py raises them (ConnectionError: the server cannot serve now)."""
    if isinstance(reply, ConnectionError):
        raise reply
    if type(reply) is list and reply and isinstance(reply[0], ConnectionError):
        raise reply[0]
    return reply


def sync_exchange(conn: Any, packed: Sequence[bytes], count: int, block: float = 0.0) -> list[Any]:
    """``async_exchange`` for blocking connections (the socket timeout, plus ``block``,
    applies to each send and read)."""
    sock = conn._sock
    timeout = sock.gettimeout() if sock is not None and block else None
    if timeout is None:
        return _sync_exchange(conn, packed, count)
    sock.settimeout(timeout + block)
    try:
        return _sync_exchange(conn, packed, count)
    finally:
        sock.settimeout(timeout)


def _sync_exchange(conn: Any, packed: Sequence[bytes], count: int) -> list[Any]:
    sock = conn._sock
    reader = _lean_reader(conn, _PLAIN_CONNECTIONS, _HiredisParser)
    if sock is None or reader is None:
        return _redis_py_exchange(conn, packed, count)
    # redis-py's own socket, reader and buffer, without its read_response layers (their
    # CPU per round trip); the bytes of a later reply stay in its reader
    buffer = conn._parser._buffer
    replies: list[Any] = []
    try:
        for chunk in packed:
            sock.sendall(chunk)
        first = True  # the first read waits for the server: it may poll (durq.transport.spin)
        for _ in range(count):
            reply = reader.gets()
            while reply is _NOT_ENOUGH_DATA:
                if first:
                    state = conn.__dict__
                    spin = state.get(SPIN, 0)
                    size, spun = first_read(sock, buffer, spin)
                    if spun != spin:
                        state[SPIN] = spun
                    first = False
                else:
                    size = sock.recv_into(buffer)
                if not size:
                    raise ConnectionError(_SERVER_CLOSED)
                reader.feed(buffer, 0, size)
                reply = reader.gets()
            replies.append(_checked(reply))
    except builtins.TimeoutError:  # the socket's timeout (socket.timeout)
        raise TimeoutError(f"Timeout in a round trip with {conn._host_error()}") from None
    except OSError as exc:
        raise ConnectionError(f"Error in a round trip with {conn._host_error()}: {exc}") from exc
    if conn.health_check_interval:
        conn.next_health_check = time.monotonic() + conn.health_check_interval
    return replies


def _redis_py_exchange(conn: Any, packed: Sequence[bytes], count: int) -> list[Any]:
    conn.send_packed_command(packed, check_health=False)
    replies: list[Any] = []
    for _ in range(count):
        try:
            replies.append(conn.read_response())
        except ResponseError as exc:
            replies.append(exc)
    return replies


# -- the Sentinel pools: the primary named by the newest configuration ----------------


def async_sentinel_pool() -> Any:
    """A Sentinel pool class that follows the Sentinel with the newest configuration
    (see ``_newest``), and whose disconnect (on the client's aclose) also closes the
    connections to the Sentinels themselves, which redis-py leaves open."""
    from redis.asyncio import sentinel as sentinels

    base: Any = sentinels.SentinelConnectionPool

    class Pool(base):  # type: ignore[misc]
        async def get_master_address(self) -> tuple[str, int]:
            states = []
            for client in self.sentinel_manager.sentinels:
                try:
                    states.append(await client.sentinel_master(self.service_name))
                except redis.RedisError:
                    continue  # a Sentinel down or unaware: the others decide
            address = _newest(self, states)
            pool: Any = self  # redis-py leaves master_address unannotated
            if self.is_master and pool.master_address != address:
                pool.master_address = address
                await self.disconnect(inuse_connections=False)
            return address

        async def disconnect(self, inuse_connections: bool = True) -> None:
            await super().disconnect(inuse_connections)
            for client in self.sentinel_manager.sentinels:
                await client.connection_pool.disconnect()

    return Pool


def sync_sentinel_pool() -> Any:
    """The blocking twin of ``async_sentinel_pool``."""
    from redis import sentinel as sentinels

    base: Any = sentinels.SentinelConnectionPool

    class Pool(base):  # type: ignore[misc]
        def get_master_address(self) -> tuple[str, int]:
            states = []
            for client in self.sentinel_manager.sentinels:
                try:
                    states.append(client.sentinel_master(self.service_name))
                except redis.RedisError:
                    continue
            address = _newest(self, states)
            proxy: Any = self.proxy
            if self.is_master and proxy.master_address != address:
                proxy.master_address = address  # where redis-py keeps it here
                self.disconnect(inuse_connections=False)
            return address

        def disconnect(self, inuse_connections: bool = True) -> None:
            super().disconnect(inuse_connections)
            for client in self.sentinel_manager.sentinels:
                client.connection_pool.disconnect()

    return Pool


def _newest(pool: Any, states: list[Any]) -> tuple[str, int]:
    """The primary named by the Sentinel with the newest configuration epoch. redis-py
    takes the first Sentinel's word, and after a switch a Sentinel that has not heard
    of it yet names the old primary for seconds, while that one still takes writes."""
    from redis.sentinel import MasterNotFoundError

    valid = [st for st in states if pool.sentinel_manager.check_master_state(st, pool.service_name)]
    if not valid:
        raise MasterNotFoundError(f"No master found for {pool.service_name!r}")
    # the Sentinel leading a failover names the old primary until the failover ends,
    # with the new epoch already: the others' word counts first
    settled = [st for st in valid if "failover_in_progress" not in str(st.get("flags"))]
    votes: dict[tuple[str, int], tuple[int, int]] = {}
    for st in settled or valid:
        address = (str(st["ip"]), int(st["port"]))
        epoch, count = votes.get(address, (0, 0))
        votes[address] = (max(epoch, int(st.get("config-epoch", 0))), count + 1)
    return max(votes, key=lambda address: votes[address])

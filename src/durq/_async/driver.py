"""Runs protocol requests on a redis-py asyncio client.

This file is the source of truth; ``durq/_sync/driver.py`` is generated from it by
``scripts/unasync.py`` (CI fails when they drift).
"""

from __future__ import annotations

import os
import time
from asyncio import sleep
from collections.abc import Callable, Sequence
from contextlib import suppress
from os import getpid, register_at_fork
from typing import Any, TypeVar

from redis.asyncio import Redis as AsyncRedis
from redis.exceptions import (
    ConnectionError,
    NoScriptError,
    OutOfMemoryError,
    ResponseError,
    TimeoutError,
)

from durq.errors import DurqError
from durq.lua.functions import library
from durq.models import Trust
from durq.protocol.calls import (
    Command,
    Op,
    Pipeline,
    Request,
    ScriptCall,
    Sleep,
    WaitCall,
    block_timeout,
    script_error,
)
from durq.protocol.libraries import trust_library
from durq.transport import cluster
from durq.transport.cluster import async_node_pool, async_refresh
from durq.transport.packing import pack
from durq.transport.redispy import IDLE, SCRIPTS, SENTINELS_ASKED, async_exchange, attached

__all__ = ["AsyncDriver"]

T = TypeVar("T")
Wire = tuple[Any, ...]

# commands that name no key: in a Cluster they go where the request's keys go (WAIT
# confirms the writes of its own connection), or to any node when alone
_KEYLESS = frozenset({"WAIT", "WAITAOF", "INFO", "CONFIG", "PING", "TIME", "SCRIPT", "FUNCTION"})

#: set (to anything but "" or "0") to run every script with EVALSHA, even on servers
#: with Functions (debugging; the tests of both paths)
EVALSHA_ENV = "DURQ_EVALSHA"
#: a node's entry in the script cache when it runs durq's scripts with EVALSHA: Redis 6.2
#: (no Functions), or a user not allowed FCALL, FUNCTION LIST or (the library missing)
#: FUNCTION LOAD. Its entry once durq's library there is known to be its own is the
#: library's name (``_trust_library``).
_NO_FUNCTIONS = "evalsha"


def _evalsha(call: ScriptCall) -> Wire:
    return ("EVALSHA", call.script.sha, len(call.keys), *call.keys, *call.args)


def _wire(call: ScriptCall | Command, functions: dict[str, str] | None) -> Wire:
    if not isinstance(call, ScriptCall):
        return call.args
    name = functions.get(call.script.name) if functions is not None else None
    if name is None:
        return _evalsha(call)
    return ("FCALL", name, len(call.keys), *call.keys, *call.args)


def _function_missing(reply: Any) -> bool:
    """An FCALL not executed because the server lacks durq's library (a restart without
    persistence, FUNCTION FLUSH, a failover to a node that never had it)."""
    return isinstance(reply, ResponseError) and str(reply).startswith("Function not found")


def _without_functions(reply: Any) -> bool:
    """An FCALL refused by a server without Functions (Redis 6.2) or for a user without
    the permission: that node runs the scripts with EVALSHA."""
    if not isinstance(reply, ResponseError):
        return False
    text = str(reply)
    if text.startswith("unknown command"):
        return "FCALL" in text.upper()
    return text.startswith("User ") and "'fcall'" in text


def _calls_a_script(calls: Sequence[ScriptCall | Command]) -> bool:
    return any(isinstance(call, ScriptCall) for call in calls)


def _route(calls: Sequence[ScriptCall | Command]) -> str | None:
    """The key whose slot serves these calls: the first key of the first call that has
    one (every call of a durq request touches the same slot)."""
    for call in calls:
        if isinstance(call, ScriptCall):
            if call.keys:
                return str(call.keys[0])
        elif len(call.args) > 1 and str(call.args[0]).upper() not in _KEYLESS:
            return str(call.args[1])
    return None


_SEND_AGAIN = (NoScriptError, *cluster.REDIRECTS)


def _error(reply: ResponseError) -> Exception:
    """A script's error reply as the exception to raise: an out-of-memory refusal as
    OutOfMemoryError whatever the server (Redis 6.2 reports it inside a script's error,
    "ERR Error running script ... -OOM command not allowed ..."), else as
    ``script_error`` makes it."""
    if not isinstance(reply, OutOfMemoryError) and "OOM command not allowed" in str(reply):
        return OutOfMemoryError(str(reply))
    return script_error(reply)


def _retry_from(replies: Sequence[Any], fcall: bool) -> int | None:
    """Index of the first reply that means "not executed, send again" (NOSCRIPT, or a
    Cluster redirect), else None."""
    for i, reply in enumerate(replies):
        if not isinstance(reply, Exception):  # the common case: a reply
            continue
        if isinstance(reply, _SEND_AGAIN):
            return i
        if fcall and (_function_missing(reply) or _without_functions(reply)):
            # (only while FCALL is in use: a plain FUNCTION command that a server
            # without Functions refuses is an answer, not a call to resend)
            return i
        if fcall and isinstance(reply, OutOfMemoryError):
            # a function (no allow-oom flag) is refused before it runs when the server
            # is out of memory; a script without flags runs until its first write that
            # could grow memory: resent with EVALSHA, a read (stats) still works
            return i
    return None


#: seconds a node whose server, out of memory, refused to load durq's library runs the
#: scripts with EVALSHA before the load is tried again
_RETRUST_AFTER = 1.0

#: how often a client of a Sentinel-managed primary asks the Sentinels which server is
#: the primary (redis-py asks only when it opens a connection, and an old primary keeps
#: accepting writes after a switch until the Sentinels demote it, seconds later)
SENTINEL_CHECK = 1.0


def _refused_write(replies: Sequence[Any]) -> Any:
    """The first reply that refused a write, else None: a primary demoted to a replica
    by a failover, or one that lost its replicas under min-replicas-to-write. Redis 6.2
    reports it from inside the script (ERR ... -READONLY), later servers before running
    it: either way nothing was written."""
    for reply in replies:
        if isinstance(reply, ResponseError):
            text = str(reply)[:200]
            if "READONLY" in text or "NOREPLICAS" in text:
                return reply
    return None


#: a connection kept idle longer than this goes back through redis-py's pool, whose
#: checkout checks it (a server restart or its idle timeout may have closed it)
IDLE_CHECK = 1.0


def _idle_of(pool: Any) -> list[tuple[Any, float]]:
    """The connections taken from ``pool`` and idle between durq's requests, most
    recently used last. Kept on the pool, which the queues of an App or a worker share;
    a forked child starts with none (its parent's sockets are not its own)."""
    pid = _process[0]
    state = attached(pool)
    idle: tuple[int, list[tuple[Any, float]]] | None = state.get(IDLE)
    if idle is None or idle[0] != pid:  # (get: setdefault would build a default per call)
        idle = state[IDLE] = (pid, [])
    return idle[1]


# this process's id, kept current across forks (os.getpid is a system call per request)
_process = [getpid()]
register_at_fork(after_in_child=lambda: _process.__setitem__(0, getpid()))


async def _return_idle(pool: Any, idle: list[tuple[Any, float]]) -> None:
    """Give every idle connection of ``pool`` back to it."""
    while True:
        try:
            conn = idle.pop()[0]
        except IndexError:  # none left (another thread may have taken the last one)
            return
        await pool.release(conn)


async def _checkout(pool: Any, idle: list[tuple[Any, float]]) -> Any:
    # redis-py's checkout (a lock, a health probe, metrics) costs as much as a
    # quarter of a loopback round trip: a connection used a moment ago skips it
    try:
        conn, since = idle.pop()
    except IndexError:
        return await pool.get_connection()
    if time.monotonic() - since < IDLE_CHECK:
        return conn
    # idle too long, and the others longer still: all go back through the pool's check
    await pool.release(conn)
    await _return_idle(pool, idle)
    return await pool.get_connection()


def _blocks(commands: Sequence[Wire]) -> float:
    """The seconds the server may hold the replies of ``commands`` back: the timeout of
    a blocking wait sent first (an idle consumer's BZPOPMIN, which may outlast the
    socket timeout), else 0."""
    first = commands[0]
    return float(first[-1]) if first[0] == "BZPOPMIN" else 0.0


async def _send_on(pool: Any, commands: Sequence[Wire]) -> list[Any]:
    """Send ``commands`` on one connection of ``pool`` in one round trip; error replies
    come back in place."""
    idle = _idle_of(pool)
    try:
        conn = await _checkout(pool, idle)
    except AttributeError as exc:  # closed while connecting (see below); the pool took it back
        raise ConnectionError("the connection was closed while it connected") from exc
    primary = getattr(pool, "master_address", None)  # a Sentinel pool's current primary
    if primary is not None and (conn.host, int(conn.port)) != (primary[0], int(primary[1])):
        await conn.disconnect()  # opened to a former primary: reconnects to the new one
    try:
        replies = await async_exchange(conn, pack(commands), len(commands), _blocks(commands))
        refused = _refused_write(replies)
        if refused is not None:
            # the caller retries as after a lost connection, and reconnects to the
            # server that is the primary now
            raise ConnectionError(f"the server refused the write (failover?): {refused}")
    except BaseException as exc:
        # redis-py may close a pooled connection while it is in use: on a Sentinel
        # switch its pool disconnects its idle connections from tasks that run later,
        # after one of them was handed out, and using it then fails with an
        # AttributeError. That is a lost connection, which callers retry.
        closed = isinstance(exc, AttributeError) and not conn.is_connected
        # a half-read reply (error, timeout, cancellation) leaves the socket unusable
        await conn.disconnect()
        await pool.release(conn)
        if closed:
            raise ConnectionError("the connection was closed while in use") from exc
        raise
    idle.append((conn, time.monotonic()))
    return replies


def _script_cache(home: Any) -> dict[str, set[str]]:
    """The scripts known to be loaded, as node name ('' without a Cluster) -> SHAs.

    Kept on ``home``, the client's connection pool (a Cluster client itself), which the
    queues of an App or a worker share: each script is loaded once per pool rather than
    once per queue object. Server state, not sockets, so a forked child keeps it."""
    try:
        cache: dict[str, set[str]] = attached(home).setdefault(SCRIPTS, {})
    except TypeError:  # an object without a __dict__: the cache is the driver's own
        cache = {}
    return cache


class AsyncDriver:
    """Executes the requests of protocol operations.

    Scripts run as Redis Functions (FCALL of durq's library, ``durq.lua.functions``)
    where the server has them, else with EVALSHA (Redis 6.2, a user without FCALL or
    FUNCTION LIST permission, or ``functions`` set False, as the DURQ_EVALSHA environment
    variable does). Before the first FCALL on a node, and again after a reply that says
    a function is missing (a new server, a restart without persistence, FUNCTION FLUSH,
    a failover to a node that never had it), the node's library is read back and
    trusted only when its code is exactly durq's (``durq.protocol.libraries``), loading
    it when missing: a foreign one raises ForeignLibrary. That costs a round trip once
    per connection pool and node, none per call. A server or user that refuses it, or
    a reply that says FCALL is unknown or not allowed, marks the node as an EVALSHA one.
    Under EVALSHA, the scripts a request uses that are not yet known to be loaded on its
    node are loaded with SCRIPT LOAD before it is sent (one round trip for all of them).
    What each node runs and holds is remembered per connection pool (``_script_cache``).
    A NOSCRIPT or missing-function reply forgets what that node holds, loads again and
    resends the request from the call that was not executed, so that a WAIT after it
    still follows it on its connection.

    With a plain ``Redis`` client (Sentinel's included) the commands go straight through
    a pooled connection (redis-py's packer and parser): the client's per-command wrapper
    costs about as much as a loopback round trip, and durq runs its own retry policy
    anyway. With a Cluster client each request goes the same way to the node that
    serves its slot (see ``durq.transport.cluster``), following MOVED, ASK, TRYAGAIN and
    CLUSTERDOWN replies; the scripts' first key, the queue's prefix, never exists, so a
    script never runs in a slot that is half migrated (it is redirected until the
    migration ends). Other clients are driven through their public ``execute_command``.
    """

    def __init__(self, client: AsyncRedis) -> None:
        self.client = client
        self._cluster = cluster.is_cluster(client)
        home = client if self._cluster else getattr(client, "connection_pool", None)
        self._loaded = _script_cache(client if home is None else home)
        self._direct = type(client) is AsyncRedis and client.connection is None
        self._stale = self._cluster  # the slot map must be (re)loaded before use
        self._node_pools: dict[str, Any] = {}  # a Cluster's, by node name
        # node -> when to try again to load the library that an out-of-memory server
        # refused (EVALSHA until then)
        self._untrusted: dict[str, float] = {}
        #: False: EVALSHA even where the server has Functions
        self.functions = os.environ.get(EVALSHA_ENV, "") in ("", "0")

    async def release_idle(self) -> None:
        """Give the connections durq keeps idle back to the client's pool (when the
        client is someone else's and stays open after the queue closes)."""
        pools = list(self._node_pools.values())
        pools.append(getattr(self.client, "connection_pool", None))
        for pool in pools:
            if pool is not None and IDLE in attached(pool):
                await _return_idle(pool, _idle_of(pool))

    async def run(self, op: Op[T]) -> T:
        """Drive ``op`` to completion and return its result."""
        try:
            request = next(op)
            while True:
                reply = await self.execute(request)
                request = op.send(reply)
        except StopIteration as stop:
            result: T = stop.value
            return result
        finally:
            op.close()

    async def run_all(self, ops: Sequence[Op[Any]]) -> list[Any]:
        """Run several operations at once: their first requests, when all are script
        calls or pipelines of script calls (a batch of several calls), go in one round
        trip (one pipeline); any later request of an operation runs on its own. Each
        result is the operation's value, or the exception it raised (connection errors
        propagate: nothing is known then)."""
        firsts = [next(op) for op in ops]
        spans: list[tuple[int, int]] = []  # each first request's calls in the pipeline
        calls: list[ScriptCall] = []
        for r in firsts:
            parts = r.calls if isinstance(r, Pipeline) else (r,)
            if not all(isinstance(c, ScriptCall) for c in parts):
                break
            spans.append((len(calls), len(parts) if isinstance(r, Pipeline) else 0))
            calls.extend(parts)  # type: ignore[arg-type]
        if len(spans) == len(firsts):
            flat = await self._pipeline(Pipeline(tuple(calls)))
            replies = [flat[at : at + n] if n else flat[at] for at, n in spans]
        else:
            replies = [await self.execute(r) for r in firsts]
        results: list[Any] = []
        for op, reply in zip(ops, replies, strict=True):
            try:
                request = op.throw(reply) if isinstance(reply, Exception) else op.send(reply)
                while True:
                    request = op.send(await self.execute(request))
            except StopIteration as stop:
                results.append(stop.value)
            except (ResponseError, DurqError) as exc:
                results.append(exc)
            finally:
                op.close()
        return results

    async def execute(self, request: Request) -> Any:
        """Execute one request and return its raw reply."""
        if isinstance(request, ScriptCall):
            reply = (await self._calls((request,)))[0]
            if isinstance(reply, ResponseError):
                raise _error(reply)
            return reply
        if isinstance(request, Pipeline):
            return await self._pipeline(request)
        if isinstance(request, (WaitCall, Command)):
            if isinstance(request, WaitCall):
                command = Command(("BZPOPMIN", *request.keys, block_timeout(request.timeout)))
            else:
                command = request
            reply = (await self._calls((command,)))[0]
            if isinstance(reply, ResponseError):
                raise _error(reply)  # e.g. a wake marker of another type
            if isinstance(reply, Exception):
                raise reply
            return reply
        if isinstance(request, Sleep):
            await sleep(request.seconds)
            return None
        raise TypeError(f"not a protocol request: {request!r}")

    async def _pipeline(self, request: Pipeline) -> list[Any]:
        replies = await self._calls(request.calls)
        return [_error(r) if isinstance(r, ResponseError) else r for r in replies]

    async def _calls(self, calls: Sequence[ScriptCall | Command]) -> list[Any]:
        """Send ``calls`` in one round trip, loading scripts and following redirects;
        error replies come back in place. A call that was not executed (NOSCRIPT, a
        redirect) is sent again with every call after it, in order."""
        key = _route(calls) if self._cluster else None
        functions: dict[str, str] | None = None
        wire: list[Wire] = []
        replies: list[Any] = [None] * len(calls)
        start, attempt = 0, 0
        # EVALSHA for this request: the server refused an FCALL (or to load the library)
        # for want of memory
        oom = False
        give_up = 0.0  # set at the first retry: the common path stays cheap
        while True:
            node = await self._node(key) if self._cluster else ""
            loaded = self._loaded.get(node, ())
            fcall = self.functions and not oom and _NO_FUNCTIONS not in loaded
            if fcall and library().name not in loaded and _calls_a_script(calls):
                fcall = await self._trust_library(node)
                oom = not fcall and _NO_FUNCTIONS not in self._loaded.get(node, ())
                loaded = self._loaded.get(node, ())
            uses = library().functions if fcall else None
            if uses is not functions or not wire:
                functions = uses
                wire = [_wire(c, functions) for c in calls]
            missing: dict[str, ScriptCall] = {}
            for c in calls[start:] if start else calls:  # a loop: no comprehension's frame
                if (
                    isinstance(c, ScriptCall)
                    and (functions is None or c.script.name not in functions)
                    and c.script.sha not in loaded
                ):
                    missing[c.script.sha] = c
            if missing:
                await self._load(node, list(missing.values()))
            got = await self._send(node, wire[start:] if start else wire)
            again = _retry_from(got, uses is not None)
            if again is None and not start:
                return got  # the common case: every call ran at the first send
            replies[start : start + len(got)] = got
            if again is None:
                return replies
            error = got[again]
            start += again
            attempt += 1
            give_up = give_up or time.monotonic() + cluster.REDIRECT_BUDGET
            # an OOM reply comes back here only for an FCALL, not run: resent by EVALSHA
            oom = oom or isinstance(error, OutOfMemoryError)
            if isinstance(error, OutOfMemoryError) or await self._reload(node, error, attempt):
                continue
            if time.monotonic() > give_up:
                return replies
            if cluster.needs_refresh(error):
                self._stale = True
            await sleep(cluster.redirect_pause(error, attempt))

    async def _node(self, key: str | None) -> str:
        """The name of the node to send to ('' without a Cluster)."""
        if not self._cluster:
            return ""
        if self._stale:
            await async_refresh(self.client)
            self._stale = False
        manager = self.client.nodes_manager  # type: ignore[attr-defined]
        if key is None:
            return str(self.client.get_default_node().name)  # type: ignore[attr-defined]
        return str(manager.get_node_from_slot(cluster.slot_of(key)).name)

    async def _follow_sentinels(self, pool: Any) -> None:
        """Ask the Sentinels for the primary at most once per SENTINEL_CHECK; on a
        switch redis-py's pool drops its idle connections, and ``_send_on`` the others."""
        now = time.monotonic()
        # kept on the pool, which the queues of an App or a worker share
        state = attached(pool)
        if now - state.get(SENTINELS_ASKED, 0.0) < SENTINEL_CHECK:
            return
        state[SENTINELS_ASKED] = now
        # when no Sentinel answers, the connections themselves tell the rest
        with suppress(ConnectionError, TimeoutError):
            await pool.get_master_address()

    async def _load(self, node: str, calls: Sequence[ScriptCall]) -> None:
        sources = {call.script.sha: call.script.source for call in calls}
        for reply in await self._send(node, [("SCRIPT", "LOAD", s) for s in sources.values()]):
            if isinstance(reply, Exception):
                raise reply
        self._loaded.setdefault(node, set()).update(sources)

    async def _reload(self, node: str, error: Exception, attempt: int) -> bool:
        """After ``error``, a reply that says ``node`` lacks what a call runs: forget
        what the node holds, load again, and return True to resend at once."""
        if isinstance(error, NoScriptError):  # the node lost its script cache
            self._loaded.pop(node, None)
            return attempt < 3  # reloaded at once, twice; then as a redirect is followed
        if _without_functions(error):  # sent again with EVALSHA
            self._loaded.setdefault(node, set()).add(_NO_FUNCTIONS)
            return True
        if _function_missing(error):  # the node lost (or never had) the library
            # forgotten: the next sending reads back (and loads) the library first
            self._loaded.pop(node, None)
            return attempt < 3  # sent at once, twice; then as a redirect is followed
        return False

    async def _trust_library(self, node: str) -> bool:
        """Before the first FCALL on ``node``: make sure it holds durq's own library
        (``trust_library``: loaded when missing; ForeignLibrary when code that is not
        durq's holds its names) and return True to use FCALL. A server or user that
        refuses Functions makes the node an EVALSHA one; a server out of memory that
        cannot load the library runs this request with EVALSHA (False)."""
        if time.monotonic() < self._untrusted.get(node, 0.0):
            return False
        trust = await self._run_on(node, trust_library(library()))
        if trust in (Trust.VERIFIED, Trust.LOADED):
            self._loaded.setdefault(node, set()).add(library().name)
            return True
        if trust is Trust.OUT_OF_MEMORY:
            # not the library's 230 KB again with every request while the server is full
            self._untrusted[node] = time.monotonic() + _RETRUST_AFTER
        else:
            self._loaded.setdefault(node, set()).add(_NO_FUNCTIONS)
        return False

    async def run_on_primaries(self, make: Callable[[], Op[T]]) -> list[tuple[str, T]]:
        """Drive an operation that ``make`` returns, whose requests are pipelines of plain
        commands, on each server that holds its own Functions libraries: the server, or
        each Cluster primary. Returns (where, result) per server."""
        if not self._cluster:
            kwargs = getattr(self.client, "connection_pool", None)
            kwargs = getattr(kwargs, "connection_kwargs", {})
            where = kwargs.get("path") or f"{kwargs.get('host')}:{kwargs.get('port')}"
            return [(str(where), await self._run_on("", make()))]
        await async_refresh(self.client)
        self._stale = False
        primaries = self.client.get_primaries()  # type: ignore[attr-defined]
        return [(str(n.name), await self._run_on(str(n.name), make())) for n in primaries]

    async def _run_on(self, node: str, op: Op[T]) -> T:
        """Drive ``op``, whose requests are pipelines of plain commands, on ``node``."""
        try:
            request = next(op)
            while True:
                if not isinstance(request, Pipeline):
                    raise TypeError(f"not a pipeline of commands: {request!r}")
                commands = [call.args for call in request.calls if isinstance(call, Command)]
                request = op.send(await self._send(node, commands))
        except StopIteration as stop:
            result: T = stop.value
            return result
        finally:
            op.close()

    async def _send(self, node: str, commands: Sequence[Wire]) -> list[Any]:
        """Send ``commands`` to ``node`` in one round trip; error replies in place."""
        # redis-py's connection layer is not fully annotated
        client: Any = self.client
        if self._cluster:
            target = client.nodes_manager.get_node(node_name=node)
            if target is None:  # dropped from the slot map meanwhile
                self._stale = True
                raise ConnectionError(f"cluster node {node} is gone")
            try:
                return await _send_on(async_node_pool(client, target, self._node_pools), commands)
            except (ConnectionError, TimeoutError, OSError):
                self._stale = True  # the node may have failed over
                raise
        if self._direct:
            pool = client.connection_pool
            if hasattr(pool, "get_master_address"):
                await self._follow_sentinels(pool)
            return await _send_on(pool, commands)
        if len(commands) == 1:
            try:
                return [await client.execute_command(*commands[0])]
            except ResponseError as exc:
                return [exc]
        pipe = client.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        replies: list[Any] = await pipe.execute(raise_on_error=False)
        return replies

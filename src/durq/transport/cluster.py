"""Redis Cluster plumbing for the drivers: which node serves a key, and its connections.

The drivers route every request themselves rather than through redis-py's cluster
client, because a pipeline must stay on one connection of one node: a blocking
``BZPOPMIN`` followed by the dequeue script (one round trip after a wake-up), and an
enqueue script followed by ``WAIT``/``WAITAOF`` (which have no key, and confirm only the
writes of the connection they are sent on). Every durq request touches one slot (a
queue's keys share its hash tag), so the node of its first key serves all of it.

The helpers come in ``async_``/``sync_`` pairs; ``scripts/unasync.py`` maps one name to
the other when it generates the blocking driver.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from redis.cluster import RedisCluster
from redis.exceptions import (
    AskError,
    ClusterDownError,
    MaxConnectionsError,
    MovedError,
    TryAgainError,
)

from durq.slots import slot_of
from durq.transport.connection import POOL_WAIT
from durq.transport.redispy import IDLE, async_cluster_started, attached

__all__ = [
    "REDIRECTS",
    "REDIRECT_BUDGET",
    "async_node_pool",
    "async_refresh",
    "is_cluster",
    "needs_refresh",
    "redirect_pause",
    "slot_of",
    "sync_node_pool",
    "sync_refresh",
]

#: replies that mean "not executed here, try again": MOVED (the slot has a new owner),
#: ASK/TRYAGAIN (the slot is being migrated), CLUSTERDOWN (a failover is under way)
REDIRECTS = (AskError, TryAgainError, ClusterDownError)  # MovedError is an AskError
#: how long a request keeps following redirects before the error is raised (seconds);
#: a slot migration or a failover usually settles well within this
REDIRECT_BUDGET = 15.0


def is_cluster(client: object) -> bool:
    """True for redis-py's Cluster clients (blocking or asyncio)."""
    from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

    return isinstance(client, (RedisCluster, AsyncRedisCluster))


def redirect_pause(error: Exception, attempt: int) -> float:
    """Seconds to wait before following ``error`` again. A MOVED is followed at once
    (after a refresh of the slot map); a migration (ASK, TRYAGAIN) or a failover
    (CLUSTERDOWN) takes a moment to finish, so those back off from 5 ms to 250 ms."""
    if isinstance(error, MovedError) and attempt < 3:
        return 0.0
    return float(min(0.005 * 2**attempt, 0.25))


def needs_refresh(error: Exception) -> bool:
    """True when the slot map is out of date after ``error``."""
    return isinstance(error, (MovedError, ClusterDownError))


class _AsyncNodePool:
    """A node's connections behind the two methods the driver uses of a pool."""

    def __init__(self, node: Any) -> None:
        self.node = node

    async def get_connection(self) -> Any:
        # a node hands out at most max_connections at once, and refuses the next caller
        # at once: wait for one to come back, as the single-server pool does
        give_up = 0.0
        while True:
            try:
                return self.node.acquire_connection()  # connected by its first send
            except MaxConnectionsError:
                now = time.monotonic()
                give_up = give_up or now + POOL_WAIT
                if now > give_up:
                    raise
                await asyncio.sleep(0.001)

    async def release(self, connection: Any) -> None:
        self.node.release(connection)


def async_node_pool(client: Any, node: Any, cache: dict[str, Any]) -> Any:
    """The connection pool of ``node`` of an asyncio cluster client (kept in ``cache``,
    the driver's, as long as the node object is current)."""
    pool = cache.get(node.name)
    if pool is None or pool.node is not node:
        if pool is not None:  # the node was replaced by a refresh of the slot map
            for conn, _since in attached(pool).get(IDLE, (0, []))[1]:
                pool.node.release(conn)
        pool = cache[node.name] = _AsyncNodePool(node)
    return pool


def sync_node_pool(client: Any, node: Any, cache: dict[str, Any]) -> Any:
    """The connection pool of ``node`` of a blocking cluster client (redis-py keeps one
    pool per node; ``cache`` is the driver's, for the list of pools it used)."""
    pool = client.get_redis_connection(node).connection_pool
    cache[node.name] = pool
    return pool


async def async_refresh(client: Any) -> None:
    """Load (first use) or reload the slot map of an asyncio cluster client."""
    if not async_cluster_started(client):  # the client's own start, which aclose() undoes
        await client.initialize()
    else:
        await client.nodes_manager.initialize()


def sync_refresh(client: Any) -> None:
    """Reload the slot map of a blocking cluster client."""
    # keep the pools of the nodes: other threads may be using their connections
    client.nodes_manager.initialize(disconnect_startup_nodes_pools=False)

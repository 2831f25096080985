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

from typing import Any

from redis.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import AskError, ClusterDownError, MovedError, TryAgainError

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


def slot_of(key: str | bytes) -> int:
    """The hash slot of ``key`` (honouring ``{hash tags}``)."""
    return int(key_slot(key.encode() if isinstance(key, str) else key))


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

    __slots__ = ("node",)

    def __init__(self, node: Any) -> None:
        self.node = node

    async def get_connection(self) -> Any:
        # connected lazily by the first send_packed_command
        return self.node.acquire_connection()

    async def release(self, connection: Any) -> None:
        self.node.release(connection)


def async_node_pool(client: Any, node: Any) -> Any:
    """The connection pool of ``node`` of an asyncio cluster client."""
    return _AsyncNodePool(node)


def sync_node_pool(client: Any, node: Any) -> Any:
    """The connection pool of ``node`` of a blocking cluster client."""
    return client.get_redis_connection(node).connection_pool


async def async_refresh(client: Any) -> None:
    """Load (first use) or reload the slot map of an asyncio cluster client."""
    if client._initialize:  # first use: the client's own start, which aclose() undoes
        await client.initialize()
    else:
        await client.nodes_manager.initialize()


def sync_refresh(client: Any) -> None:
    """Reload the slot map of a blocking cluster client."""
    # keep the pools of the nodes: other threads may be using their connections
    client.nodes_manager.initialize(disconnect_startup_nodes_pools=False)

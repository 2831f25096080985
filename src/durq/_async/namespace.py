"""AsyncNamespace: a durq namespace as a whole, for admin tools, used from asyncio code.

This file is the source of truth; ``durq/_sync/namespace.py`` (``Namespace``) is generated
from it by ``scripts/unasync.py`` (CI fails when they drift).
What the ``durq`` command and the dashboard read beside each queue's own admin methods
(``AsyncQueue.stats``, ``workflow``, ``schedules``...): the queues of the namespace and
their shard counts, the live workers, the server's settings that put jobs at risk, and
durq's Functions libraries on the server. All logic lives in ``durq.protocol``
(``namespace``, ``server_settings``, ``libraries``).
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis as AsyncRedis

from durq._async.driver import AsyncDriver
from durq._async.queue import AsyncQueue
from durq._async.sharded import AsyncShardedQueue
from durq.keys import NamespaceKeys, split_shard
from durq.lua.functions import library
from durq.models import LibraryInfo, Trust
from durq.protocol import libraries, namespace
from durq.protocol.server_settings import server_warnings
from durq.transport import connection
from durq.transport.cluster import is_cluster

__all__ = ["AsyncNamespace"]


class AsyncNamespace:
    """The queues, workers and server of a durq namespace, used from asyncio code.

    Args:
        url: Redis URL; defaults to ``$DURQ_URL``, then ``redis://localhost:6379/0``.
        client: an existing ``redis.asyncio.Redis`` to use instead of ``url``; the
            namespace then does not close it.
        namespace: the first part of every key (default ``durq``).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: AsyncRedis | None = None,
        namespace: str = "durq",
    ) -> None:
        self.namespace = namespace
        self.keys = NamespaceKeys(namespace)
        if client is None:
            self.client = connection.async_client(url)
            self._owns_client = True
        else:
            connection.check_client(client)
            self.client = client
            self._owns_client = False
        self._driver = AsyncDriver(self.client)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.namespace!r}>"

    async def aclose(self) -> None:
        """Close the connections, if the namespace created its own client."""
        if self._owns_client:
            await self.client.aclose()
        else:
            await self._driver.release_idle()

    async def __aenter__(self) -> AsyncNamespace:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- queues and workers -------------------------------------------------------

    async def queue_names(self) -> list[str]:
        """The namespace's queue names, sorted (a queue is listed once it was used)."""
        return await self._driver.run(namespace.queue_names(self.keys))

    async def shard_counts(self) -> dict[str, int]:
        """Every sharded queue of the namespace, with its shard count."""
        return await self._driver.run(namespace.shard_counts(self.keys))

    async def is_queue(self, name: str) -> bool:
        """True when ``name`` is one of the namespace's queues."""
        return await self._driver.run(namespace.is_queue(self.keys, name))

    async def queue(self, name: str, **options: Any) -> AsyncQueue | AsyncShardedQueue:
        """Queue ``name`` on this namespace's client: an AsyncShardedQueue when the
        namespace knows it as sharded, the shard itself for a shard's name
        (``name~i``), else an AsyncQueue (``options`` as for either)."""
        counts = await self.shard_counts()
        base, index = split_shard(name)
        if index is not None:
            count = counts.get(base, 0)
            return AsyncQueue(
                name, client=self.client, namespace=self.namespace, shard_count=count, **options
            )
        if counts.get(name):
            return AsyncShardedQueue(
                name, client=self.client, shards=counts[name], namespace=self.namespace,
                **options,
            )  # fmt: skip
        return AsyncQueue(name, client=self.client, namespace=self.namespace, **options)

    async def live_workers(self) -> dict[str, dict[str, Any]]:
        """The live workers' heartbeats by worker id, in id order (read only: the ids
        of dead workers are left for the workers to prune)."""
        op = namespace.live_workers(self.keys, batch=not is_cluster(self.client))
        return await self._driver.run(op)

    # -- the server ---------------------------------------------------------------

    async def server_warnings(self) -> list[tuple[str, str]]:
        """The server's settings that put jobs at risk: ``(level, message)`` pairs,
        level ``warning`` (jobs can be lost) or ``info``."""
        return await self._driver.run(server_warnings())

    @staticmethod
    def library_name() -> str:
        """The name of this durq version's Functions library (``durq_<hash>``)."""
        return library().name

    async def libraries(self) -> list[tuple[str, list[LibraryInfo] | None]]:
        """durq's Functions libraries on each server that holds its own (the server, or
        each Cluster primary): (where, libraries; None without Functions)."""
        current = library().name
        return await self._driver.run_on_primaries(lambda: libraries.loaded_libraries(current))

    async def load_library(self, *, replace: bool = False) -> list[tuple[str, Trust]]:
        """Load this durq version's library on each server that holds its own, unless
        there; ForeignLibrary when other code holds its names (``replace``: load durq's
        over a library of its name, once you know who wrote it)."""
        lib = library()
        return await self._driver.run_on_primaries(
            lambda: libraries.trust_library(lib, replace=replace)
        )

    async def prune_libraries(self) -> list[tuple[str, list[str] | None]]:
        """Delete the libraries of other durq versions on each server that holds its
        own: (where, the names deleted; None without Functions)."""
        current = library().name
        return await self._driver.run_on_primaries(lambda: libraries.prune_libraries(current))

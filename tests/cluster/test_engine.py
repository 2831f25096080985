"""The engine suite, run against the local cluster (see conftest.py)."""

import pytest
from redis.cluster import RedisCluster

from durq import AsyncQueue, InvalidArgument, Queue
from durq.dev.topology import LocalCluster
from durq.transport import connection
from engine.test_async_facade import *  # noqa: F403
from engine.test_concurrency import *  # noqa: F403
from engine.test_corruption import *  # noqa: F403
from engine.test_dedup_supersede import *  # noqa: F403
from engine.test_delay_defer import *  # noqa: F403
from engine.test_dequeue import *  # noqa: F403
from engine.test_enqueue import *  # noqa: F403
from engine.test_fencing import *  # noqa: F403
from engine.test_groups import *  # noqa: F403
from engine.test_model import *  # noqa: F403
from engine.test_priorities import *  # noqa: F403
from engine.test_release import *  # noqa: F403
from engine.test_requeue_dead_letters import *  # noqa: F403
from engine.test_stats_inspect import *  # noqa: F403

# these two build a plain client from the URL; their Cluster versions follow
del test_a_client_given_to_an_async_queue_is_left_open  # noqa: F821
del test_a_client_given_to_a_queue_is_left_open  # noqa: F821


async def test_an_asyncio_cluster_client_given_to_a_queue_is_used_and_left_open(
    cluster: LocalCluster, queue_name: str
) -> None:
    client = connection.async_client(cluster.url)
    try:
        async with AsyncQueue(queue_name, client=client) as queue:
            await queue.enqueue("x")
        async with AsyncQueue(queue_name, client=client) as again:
            job = await again.dequeue()
            assert job is not None and job.payload == "x"
        assert await client.ping()
    finally:
        await client.aclose()


def test_a_cluster_client_given_to_a_queue_is_used_and_left_open(
    cluster: LocalCluster, queue_name: str
) -> None:
    client = RedisCluster.from_url(cluster.servers[0].url)
    try:
        # Queue's annotation names redis.Redis only; a RedisCluster works too (this test)
        with Queue(queue_name, client=client) as queue:  # type: ignore[arg-type]
            queue.enqueue("x")
            job = queue.dequeue()
            assert job is not None and job.payload == "x"
        assert client.ping()
    finally:
        client.close()


def test_a_cluster_client_that_decodes_responses_is_refused(cluster: LocalCluster) -> None:
    client = RedisCluster.from_url(cluster.servers[0].url, decode_responses=True)
    try:
        with pytest.raises(InvalidArgument, match="decode_responses"):
            Queue("q", client=client)  # type: ignore[arg-type]  # as above
    finally:
        client.close()

"""What only a cluster exercises: requests routed to their slot's node, WAIT on the
connection of the enqueue, scripts reloaded after the nodes lose them, topics."""

from __future__ import annotations

import redis
from redis.cluster import RedisCluster

import durq
from durq import AsyncQueue, AsyncTopic, Durability, Queue
from durq.dev.topology import LocalCluster
from durq.transport import connection


def test_a_cluster_url_gives_a_cluster_client(cluster: LocalCluster) -> None:
    client = connection.sync_client(cluster.url)
    assert isinstance(client, RedisCluster)
    client.close()


async def test_queues_on_every_node_work_side_by_side(cluster: LocalCluster) -> None:
    names = [f"spread-{i}" for i in range(12)]
    owners = {cluster.owner(f"{{{n}}}")["id"] for n in names}
    assert len(owners) == 3  # the names do land on all three primaries
    async with AsyncQueue(names[0], cluster.url) as first:
        queues = [AsyncQueue(n, client=first.client) for n in names]
        for q in queues:
            await q.enqueue(q.name)
        for q in queues:
            job = await q.dequeue(wait=1)
            assert job is not None and job.payload == q.name
            await q.release(job)


async def test_durability_waits_for_the_replica_of_the_queue_s_primary(
    cluster: LocalCluster, queue_name: str
) -> None:
    async with AsyncQueue(queue_name, cluster.url, durability=Durability(replicas=1)) as q:
        results = await q.enqueue_many(range(50))
        assert all(r.created for r in results)
    with Queue(queue_name, cluster.url, durability=Durability(replicas=2, timeout=0.2)) as q:
        try:
            q.enqueue("more copies than there are replicas")
        except durq.NotDurable as exc:
            assert "only 1 of 2" in str(exc)
        else:
            raise AssertionError("WAIT 2 cannot be met with one replica per primary")


def test_scripts_are_loaded_again_after_the_nodes_flush_them(
    cluster: LocalCluster, queue_name: str
) -> None:
    with Queue(queue_name, cluster.url, durability=Durability(replicas=1)) as q:
        q.enqueue("before")
        for server in cluster.servers:
            with redis.Redis(port=server.port) as node:
                node.script_flush()
                is_primary = node.info("replication")["role"] == "master"
                if is_primary and int(str(node.info("server")["redis_version"]).split(".")[0]) >= 7:
                    node.function_flush()  # its replicas follow
        # NOSCRIPT or Function not found: loaded, then the call and WAIT again
        assert q.enqueue("after").created
        assert len(q.dequeue_many(5)) == 2


async def test_topics_fan_out_on_a_cluster(cluster: LocalCluster, queue_name: str) -> None:
    async with AsyncTopic(queue_name, cluster.url) as topic:
        await topic.subscribe("a")
        await topic.subscribe("b")
        results = await topic.publish({"event": 1})
        assert sorted(results) == ["a", "b"]
        for name in ("a", "b"):
            job = await topic.queue(name).dequeue(wait=1)
            assert job is not None and job.payload == {"event": 1}

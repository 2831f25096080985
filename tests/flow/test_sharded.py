"""Flow control of a sharded queue: the queue's rate and max_active are shared out among
the shards, so together they hold for the whole queue."""

from __future__ import annotations

import pytest

import durq
from durq import InvalidArgument, Rate


def test_a_sharded_queue_shares_its_limits_among_its_shards(
    redis_url: str, queue_name: str
) -> None:
    with durq.ShardedQueue(queue_name, redis_url, shards=2) as q:
        q.configure(rate=Rate(40, burst=4), max_active=5, group_rates={"g": Rate(3)})
        shards = [shard.limits() for shard in q.shards]
        assert [s.rate for s in shards] == [Rate(40, per=2.0, burst=2)] * 2
        assert [s.max_active for s in shards] == [3, 2]
        assert [s.group_rates for s in shards] == [{"g": Rate(3)}] * 2
        whole = q.limits()
        assert (whole.rate, whole.max_active) == (Rate(40, burst=4), 5)
        q.enqueue_many(range(40))
        # at once: each shard's burst (2) and no more than its share of max_active
        taken = [len(shard.dequeue_many(40)) for shard in q.shards]
        assert taken == [2, 2]
        with pytest.raises(InvalidArgument, match="shared by 2 shards"):
            q.configure(max_active=1)


def test_a_refused_enqueue_does_not_register_a_fresh_sharded_queue(
    redis_url: str, queue_name: str
) -> None:
    with durq.ShardedQueue(queue_name, redis_url, shards=2) as q:
        with pytest.raises(InvalidArgument, match="delay"):
            q.enqueue("x", delay=-1)
        with pytest.raises(InvalidArgument):
            q.enqueue_many(["x"], group="")
        space = durq.keys.NamespaceKeys(q.namespace)
        client = q.shards[0].client
        assert not client.sismember(space.queues, queue_name)
        assert not client.hexists(space.shards, queue_name)
        q.enqueue("x")  # good input registers it
        assert client.sismember(space.queues, queue_name)
        assert client.hget(space.shards, queue_name) == b"2"

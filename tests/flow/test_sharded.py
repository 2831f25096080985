"""Flow control of a sharded queue: the queue's rate and max_active are shared out among
the shards, so together they hold for the whole queue; a pause of the queue
(RateLimited, scope "queue") reaches every shard through the outbox."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis

import durq
from durq import InvalidArgument, Rate
from durq.codec import PayloadCodec
from durq.keys import OutboxKeys
from durq.protocol import lifecycle
from durq.protocol import limits as limit_ops
from durq.protocol.calls import Op, ScriptCall
from durq.protocol.status import Status
from durq.worker.outbox import OutboxCourier


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


def _run(call: ScriptCall) -> Op[Any]:
    reply = yield call
    return reply


def _leased(shard: durq.Queue) -> durq.Job:
    job = shard.dequeue()
    assert job is not None
    return job


def _outbox(shard: durq.Queue) -> list[durq.Job]:
    """Take the entries waiting in ``shard``'s outbox (as its courier would)."""
    keys = OutboxKeys(shard.keys.name, shard.keys.namespace, shard.keys.shard_count)
    jobs, _, _ = shard._run(lifecycle.fetch(keys, PayloadCodec(), 100, 5.0))
    return jobs


@pytest.mark.parametrize("front", ["sync", "async"])
def test_rate_limited_with_queue_scope_pauses_every_shard(
    redis_url: str, queue_name: str, front: str
) -> None:
    # issue 30, bug 7: the pause held one shard only (docs: the whole queue)
    with durq.ShardedQueue(queue_name, redis_url, shards=3) as q:
        for shard in q.shards:
            shard.enqueue_many(["a", "b"])
        first, second = q.shards[0], q.shards[1]
        job, running = _leased(first), _leased(second)
        assert first._run(limit_ops.rate_limited(first.keys, [(job, 30.0, "queue")])) == [Status.OK]
        assert first.dequeue_many(10) == []  # paused at once
        entries = _outbox(first)  # one order per other shard, in the shard's own slot
        assert len(entries) == 2 and _outbox(second) == []
        if front == "sync":
            for entry in entries * 2:  # delivered at least once: applying twice is once
                assert first._run(_run(limit_ops.pause_call(entry.data))) == b"OK"
        else:

            async def deliver() -> None:
                async with durq.AsyncQueue(first.name, redis_url, shard_count=3) as home:
                    await OutboxCourier(home).deliver(entries)
                    await OutboxCourier(home).deliver(entries)

            asyncio.run(deliver())
        assert [shard.dequeue_many(10) for shard in q.shards] == [[], [], []]
        ends = [shard.limits().paused_until or 0.0 for shard in q.shards]
        assert min(ends) > 0 and max(ends) - min(ends) < 1.0
        # a job of another shard that was running hits the same limit: its pause ends
        # about when the one its shard knows of ends, so it is not sent again
        assert second._run(limit_ops.rate_limited(second.keys, [(running, 30.0, "queue")])) == [
            Status.OK
        ]
        assert _outbox(second) == []
        # a much longer pause is sent again
        third = q.shards[2]
        with redis.Redis.from_url(redis_url) as raw:
            raw.hdel(third.keys.prefix + "flow", "tat")  # its pause is over, say
        third._run(limit_ops.rate_limited(third.keys, [(_leased(third), 300.0, "queue")]))
        assert len(_outbox(third)) == 2


def test_a_pause_entry_for_another_slot_or_of_another_kind_is_refused(
    redis_url: str, queue_name: str
) -> None:
    with durq.ShardedQueue(queue_name, redis_url, shards=2) as q:
        first, second = q.shards
        wrong = b"P\0" + second.keys.prefix.encode() + b"\0" + b"99999999999999"
        call = limit_ops.pause_call(wrong)
        misrouted = ScriptCall(call.script, first.keys.vector, call.args)
        with pytest.raises(InvalidArgument, match="the entry is for"):
            first._run(_run(misrouted))
        with pytest.raises(ValueError, match="not a pause entry"):
            limit_ops.pause_call(b"C\0x\0y\0z")
        assert first.limits().paused_until is None


def test_removing_the_limits_ends_a_shards_pause_and_a_new_one_is_sent_again(
    redis_url: str, queue_name: str
) -> None:
    with (
        durq.ShardedQueue(queue_name, redis_url, shards=2) as q,
        redis.Redis.from_url(redis_url) as raw,
    ):
        first = q.shards[0]
        first.enqueue_many(["a", "b"])
        first._run(limit_ops.rate_limited(first.keys, [(_leased(first), 3600.0, "queue")]))
        for entry in _outbox(first):
            first._run(_run(limit_ops.pause_call(entry.data)))
        q.configure(rate=None)  # ends the pauses of RateLimited, in every shard
        assert [shard.limits().paused_until for shard in q.shards] == [None, None]
        assert [raw.exists(s.keys.prefix + "flow") for s in q.shards] == [0, 0]
        first._run(limit_ops.rate_limited(first.keys, [(_leased(first), 30.0, "queue")]))
        assert len(_outbox(first)) == 1  # not taken for the hour-long pause that ended

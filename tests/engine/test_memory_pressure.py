"""The server at ``maxmemory`` (``noeviction``): acknowledgements and lease extensions
are applied, handing out and enqueueing are refused with OutOfMemoryError, changing
nothing. Through both fronts, so by FCALL (allow-oom functions) and by EVALSHA (a
script's first write decides) alike."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis

from durq import Outcome
from durq.protocol import limits as limit_ops
from durq.protocol.status import Status
from engine.support import keys_of


@contextmanager
def at_maxmemory(raw: redis.Redis) -> Iterator[None]:
    """The server over its memory limit (below what it uses), until the block ends."""
    used = int(raw.info("memory")["used_memory"])
    policy = str(raw.config_get("maxmemory-policy")["maxmemory-policy"])
    raw.config_set("maxmemory-policy", "noeviction")
    # well below: what the server uses moves by more than 100 KB (buffers)
    raw.config_set("maxmemory", used // 2)
    try:
        yield
    finally:
        raw.config_set("maxmemory", 0)
        raw.config_set("maxmemory-policy", policy)


async def test_at_maxmemory_every_acknowledgement_and_extension_is_applied(
    q: Any, raw: redis.Redis
) -> None:
    for i in range(6):
        await q.enqueue(f"job-{i}")
    done, retried, dead, deferred, limited, kept = await q.dequeue_many(6)
    with at_maxmemory(raw):
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            raw.set("durq-test-oom", "x")  # the server refuses writes that grow memory
        assert await q.extend_many([done, kept], lease=30) == [Outcome.OK, Outcome.OK]
        # the first write of a release without a result, a tombstone, grows memory
        assert await q.release_many([done]) == [Outcome.OK]
        assert await q.release_many([kept], results=[b'"a result"']) == [Outcome.OK]
        assert await q.requeue(retried, reason="boom", delay=0) is Outcome.RETRYING
        assert await q.requeue(dead, reason="fatal", dead=True) is Outcome.DEAD
        assert await q.defer_many([deferred], 0) == [Outcome.OK]
        assert await q._run(limit_ops.rate_limited(q.keys, [(limited, 0.0, "group")])) == [
            Status.OK
        ]
    stats = await q.stats()
    assert (stats.completed, stats.dead, stats.active, stats.pending) == (2, 1, 0, 3)
    assert await q.wait_result(kept.id, 0) == b'"a result"'


async def test_at_maxmemory_dequeue_and_enqueue_are_refused_and_change_nothing(
    q: Any, raw: redis.Redis
) -> None:
    # a dequeue would reclaim an expired lease and promote a due delayed job before it
    # hands out a ready one: the first writes of those paths free memory (ZREM), after
    # which a script may grow it, so the refusal must come first
    await q.enqueue("expired")
    await q.dequeue(lease=0.05)
    await q.enqueue("due", delay=0.05)
    await asyncio.sleep(0.1)
    await q.enqueue("ready")
    before = keys_of(raw, q)
    with at_maxmemory(raw):
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            await q.dequeue()
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            await q.enqueue("refused")
        assert keys_of(raw, q) == before
    assert sorted([j.payload for j in await q.dequeue_many(5)]) == ["due", "expired", "ready"]

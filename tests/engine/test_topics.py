"""Topics in the engine: a publish reaches every subscription, each job in one step, and
a large fan-out is spread over script calls (publish.lua), through each front end."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from durq import AsyncTopic, InvalidArgument, Message, Queue, Topic
from durq.dev.server import RedisServer
from durq.models import EnqueueStatus
from durq.protocol.lifecycle import MAX_SUBSCRIBERS
from engine.support import Blocking


@pytest.fixture
async def topic(front: str, server: RedisServer, queue_name: str) -> AsyncIterator[Any]:
    """The test's topic in the test's front end (the blocking one behind Blocking)."""
    made: Any = (
        AsyncTopic(queue_name, server.url)
        if front == "async"
        else Blocking(Topic(queue_name, server.url))
    )
    yield made
    await made.aclose()


async def test_a_large_publish_reaches_every_subscription_each_job_once(
    topic: Any, server: RedisServer
) -> None:
    """40 subscriptions x 500 jobs: 20,000 copies, more than one script call may make
    (publish.lua makes about 128 per call), published in two round trips."""
    subscribers = [f"s{i:02}" for i in range(40)]
    for s in subscribers:
        await topic.subscribe(s)
    results = await topic.publish_many([{"n": i} for i in range(500)])
    assert sorted(results) == subscribers
    ids = [r.id for r in results["s00"]]
    assert len(set(ids)) == 500
    for s in subscribers:
        assert [r.id for r in results[s]] == ids
        assert {r.status for r in results[s]} == {EnqueueStatus.CREATED}
    with Queue(topic.keys.subscription("s39"), server.url) as q:
        jobs = q.dequeue_many(1000)
        assert [j.payload["n"] for j in jobs] == list(range(500))
        assert [j.id for j in jobs] == ids
    again = await topic.publish_many([Message({"n": 0}, id=ids[0])])  # idempotent
    assert {r.status for rs in again.values() for r in rs} == {EnqueueStatus.EXISTS}


async def test_a_topic_takes_at_most_max_subscribers(topic: Any) -> None:
    for i in range(MAX_SUBSCRIBERS):
        await topic.subscribe(f"s{i}")
    await topic.subscribe("s0")  # idempotent: already there
    with pytest.raises(InvalidArgument, match="subscriptions"):
        await topic.subscribe("one-more")
    assert len(await topic.subscribers()) == MAX_SUBSCRIBERS
    await topic.unsubscribe("s0")
    await topic.subscribe("one-more")

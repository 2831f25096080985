"""A queue whose keys something else overwrote does not take the dashboard down: the
other queues stay visible, and that queue's own pages say what is wrong."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import redis

import durq
from dashboard.support import LiveServer
from durq.dev.server import RedisServer


def test_a_corrupt_queue_is_left_out_and_the_others_stay_visible(
    make_server: Callable[..., RedisServer], serve: Callable[..., LiveServer]
) -> None:
    server = make_server()
    for name in ("good", "bad"):
        with durq.Queue(name, server.url) as queue:
            queue.enqueue("x")
    with redis.Redis.from_url(server.url) as client:
        client.set("durq:{bad}:delayed", "not a zset")
    dashboard = serve(server.url)

    overview = httpx.get(dashboard.url + "/api/overview").json()
    assert [q["name"] for q in overview["queues"]] == ["good"]
    metrics = httpx.get(dashboard.url + "/metrics").text
    assert 'durq_queue_jobs{queue="good",state="pending"} 1.0' in metrics
    assert 'queue="bad"' not in metrics

    page = httpx.get(dashboard.url + "/queue", params={"q": "bad"})
    assert page.status_code == 500
    assert "durq doctor" in page.text

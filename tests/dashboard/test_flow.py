"""The flow-control page and the flow gauges of /metrics."""

from __future__ import annotations

from collections.abc import Callable

import httpx

import durq
from dashboard.support import LiveServer
from durq.dev.server import RedisServer


def test_the_flow_page_shows_limits_parked_groups_and_waiting_jobs(
    make_server: Callable[..., RedisServer], queue_name: str, serve: Callable[..., LiveServer]
) -> None:
    redis_url = make_server().url  # its own server: /metrics covers a bounded number of queues
    with durq.Queue(queue_name, redis_url) as q:
        q.configure(rate=durq.Rate(100, burst=5), group_rates={"tenant-7": durq.Rate(1, per=60)})
        q.enqueue_many(range(4), group="tenant-7")
        assert len(q.dequeue_many(10)) == 1
        server = serve(redis_url)
        queue_page = httpx.get(f"{server.url}/queue", params={"q": queue_name})
        assert "/queue/flow?q=" in queue_page.text
        page = httpx.get(f"{server.url}/queue/flow", params={"q": queue_name})
        assert page.status_code == 200
        for text in ("100/s,burst=5", "tenant-7", "1/60s", "waiting for a limit"):
            assert text in page.text, text
        assert httpx.get(f"{server.url}/queue/flow", params={"q": "nope"}).status_code == 404
        metrics = httpx.get(f"{server.url}/metrics").text
        assert f'durq_queue_rate_limit{{queue="{queue_name}",scope="queue"}} 100.0' in metrics
        assert f'durq_queue_parked_groups{{queue="{queue_name}"}} 1.0' in metrics
        assert f'durq_queue_waiting_for_limit{{queue="{queue_name}"}} 3.0' in metrics
        assert f'durq_queue_rate_limited_total{{queue="{queue_name}"}} 0.0' in metrics

"""The batches page: a batch task's queue shows its recent batch sizes and why each
started (durq.Batch)."""

from __future__ import annotations

from collections.abc import Callable

import httpx

import durq
from dashboard.support import LiveServer


def test_the_batches_page_shows_a_queues_recent_batch_sizes_and_causes(
    redis_url: str, queue_name: str, serve: Callable[..., LiveServer]
) -> None:
    with durq.Queue(queue_name, redis_url) as q:
        q.enqueue_many(range(130))
        q.settle(q.dequeue_batch(100), cause="size")
        q.settle(q.dequeue_batch(100), cause="wait")
        server = serve(redis_url)
        queue_page = httpx.get(f"{server.url}/queue", params={"q": queue_name})
        assert "/queue/batches?q=" in queue_page.text
        page = httpx.get(f"{server.url}/queue/batches", params={"q": queue_name})
        assert page.status_code == 200
        for text in ("mean size", "65.0", 'value="100"', 'value="30"', "it was full",
                     "max_wait ran out"):  # fmt: skip
            assert text in page.text, text
        assert httpx.get(f"{server.url}/queue/batches", params={"q": "nope"}).status_code == 404

"""The batches page: a batch task's queue shows its recent batch sizes and why each
started (durq.Batch); a running batch's items are jobs in hand on the workers page, in
`durq workers` and in durq_jobs_in_hand, and `durq stats` counts items as jobs."""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx

import durq
from cli.support import durq as run
from cli.support import table_row as _row
from dashboard.support import LiveServer
from helpers import eventually
from worker.support import running_worker


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


def test_a_worker_running_a_batch_of_100_shows_100_jobs_in_hand_and_stats_count_its_items(
    redis_url: str, queue_name: str, serve: Callable[..., LiveServer]
) -> None:
    """`durq workers`, the workers page and durq_jobs_in_hand count a running batch's
    items, each listed as a job in hand; once settled, `durq stats` counts them as jobs."""
    app = durq.App(redis_url, default_queue=queue_name)
    running, go_on = threading.Event(), threading.Event()

    @app.task(queue=queue_name, batch=durq.Batch(max_size=100, max_wait=5))
    def store(items: list[durq.Item]) -> None:
        running.set()
        go_on.wait(30)

    handles = store.enqueue_many([(n,) for n in range(100)])
    ids = {h.id for h in handles}
    try:
        with running_worker(app) as worker:
            assert running.wait(10)
            metrics = worker.metrics.registry
            assert metrics.get_sample_value("durq_jobs_in_hand") == 100

            def listed() -> str | None:
                shown = run("workers", "--url", redis_url)
                cells = shown.output.split()
                return shown.output if worker.id in cells and ids <= set(cells) else None

            shown = eventually(listed, 10, "the batch's items listed by durq workers", 0.2)
            assert shown is not None
            row = _row(shown, worker.id)
            assert row[4] == "100", row  # in hand (after id, queues, durq, concurrency)
            server = serve(redis_url)
            page = httpx.get(f"{server.url}/workers").text
            assert '<td class="n">100</td>' in page
            assert sum(1 for i in ids if i in page) == 100
            go_on.set()
            eventually(lambda: app.queue(queue_name).stats().completed == 100, 10)
        result = run("stats", queue_name, "--no-rate", "--url", redis_url)
        header = _row(result.output, "queue")
        counts = dict(zip(header, _row(result.output, queue_name), strict=True))
        assert (counts["enqueued"], counts["completed"], counts["active"], counts["pending"]) == (
            "100", "100", "0", "0",
        )  # fmt: skip
    finally:
        go_on.set()
        app.close()

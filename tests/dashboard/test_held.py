"""Jobs waiting for a worker that runs their task (the holding area, docs/deployment.md)
are shown by ``durq stats``, the dashboard's pages and its ``/metrics``."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from cli.support import durq as run
from dashboard.support import LiveServer
from deploy.apps import Ran, v1, v2
from helpers import eventually
from worker.support import running_worker


def test_held_jobs_are_shown_by_durq_stats_the_dashboard_and_its_metrics(
    redis_url: str, queue_name: str, serve: Callable[..., LiveServer]
) -> None:
    ran = Ran()
    old, new = v1(redis_url, queue_name, ran), v2(redis_url, queue_name, ran)
    try:
        with running_worker(old):  # v1 has no task t: its jobs wait for a v2 worker
            new.tasks["t"].enqueue_many([(i,) for i in range(3)])
            eventually(lambda: old.queue(queue_name).stats().held == 3, 10)

        result = run("stats", queue_name, "--no-rate", "--url", redis_url)
        assert result.exit_code == 0, result.output
        rows = [line.split() for line in result.output.splitlines() if line.split()]
        header = next(r for r in rows if r[0] == "queue")
        row = dict(zip(header, next(r for r in rows if r[0] == queue_name), strict=False))
        assert (row["held"], row["pending"], row["dead"]) == ("3", "0", "0")

        dashboard = serve(redis_url)
        metrics = httpx.get(dashboard.url + "/metrics").text
        assert f'durq_queue_jobs{{queue="{queue_name}",state="held"}} 3.0' in metrics
        page = httpx.get(dashboard.url + "/queue", params={"q": queue_name}).text
        assert "held (no capable worker)" in page
        overview = httpx.get(dashboard.url + "/").text
        assert "held (no capable worker)" in overview
    finally:
        old.close()
        new.close()

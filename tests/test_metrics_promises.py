"""docs/flow-control.md: workers count the jobs given back by ``durq.RateLimited`` in
``durq_jobs_deferred_total`` (the promise -> test table is in docs/guarantees.md)."""

from __future__ import annotations

from prometheus_client import generate_latest

from durq.metrics import WorkerMetrics


def test_rate_limited_jobs_count_in_durq_jobs_deferred_total() -> None:
    metrics = WorkerMetrics()
    metrics.finished("emails", "send", "limited", 0.01)  # the worker's outcome of RateLimited
    text = generate_latest(metrics.registry).decode()
    line = 'durq_jobs_deferred_total{queue="emails",task="send"} 1.0'
    assert line in text.splitlines()

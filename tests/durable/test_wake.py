"""Sleeping jobs wake on time with idle workers (issue 37): 1,000 jobs parked in a
durable sleep, due over one second, resume close to their time: the delayed set's
promotion wakes the blocked workers at the earliest due time, no polling."""

from __future__ import annotations

import statistics
import time

import durq
from durable.apps import events
from helpers import eventually
from worker.support import running_worker

JOBS = 1000
#: p99 lateness allowed: the issue's 50 ms, with the margin a loaded 2-core CI needs
P99_BOUND = 0.25


def test_a_thousand_sleeping_jobs_wake_close_to_their_time(
    app: durq.App, log: str, queue_name: str
) -> None:
    queue = app.queue(queue_name)
    with running_worker(app, concurrency=100):
        base = time.time() + 4.0  # time for all of them to park first
        app.tasks["wake_at"].enqueue_many([(log, base + i / JOBS) for i in range(JOBS)])
        eventually(lambda: queue.parked().asleep == JOBS, 10, lambda: str(queue.parked()))
        eventually(lambda: len(events(log, "woke")) == JOBS, 20, lambda: str(queue.stats()))
    late = sorted(float(e["key"]) for e in events(log, "woke"))
    p50, p99 = statistics.median(late), late[int(0.99 * JOBS) - 1]
    ms = [round(x * 1000, 1) for x in (p50, p99, late[-1])]
    print(f"wake lateness (ms): p50 {ms[0]}, p99 {ms[1]}, max {ms[2]}")
    assert late[0] >= -0.002  # never early (the server's clock is this machine's)
    assert p99 < P99_BOUND

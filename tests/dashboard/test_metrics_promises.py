"""The /metrics series that docs/flow-control.md and docs/workflows.md name and no other
test read (the promise -> test table is in docs/guarantees.md)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import httpx

import durq
from dashboard.support import LiveServer
from durq.dev.server import RedisServer
from durq.protocol import limits as limit_ops
from workflows.apps import build
from workflows.test_workflow_promises import _deliver


def _value(text: str, name: str, queue: str) -> float:
    found = re.search(rf'^{name}{{queue="{re.escape(queue)}"}} (\S+)$', text, re.M)
    assert found is not None, name
    return float(found.group(1))


def test_flow_gauges_and_workflow_counters_in_metrics(
    make_server: Callable[..., RedisServer],
    queue_name: str,
    serve: Callable[..., LiveServer],
    tmp_path: Path,
) -> None:
    url = make_server().url  # its own server: /metrics covers a bounded number of queues
    app = build(url, default_queue=f"{queue_name}-wf")
    log = str(tmp_path / "runs.jsonl")
    sq = app.tasks["square"]
    cancelled = durq.group([sq.s(log, 1)]).enqueue()
    cancelled.cancel()
    failed = durq.group([sq.s(log, 2), sq.s(log, 3)]).enqueue()
    home = app.queue(failed.queue)
    step = home.dequeue()
    assert step is not None
    home.requeue(step, reason="broken", dead=True)
    _deliver(home)  # the workflow fails; its other step ends cancelled
    assert failed.status().state == "failed"  # type: ignore[union-attr]
    server = serve(url)
    with durq.Queue(queue_name, url, lease=10.0) as q:
        q.configure(rate=durq.Rate(100, burst=10), max_active=3)
        q.enqueue_many(range(5))
        first, _second = q.dequeue_many(2)
        assert q._run(limit_ops.rate_limited(q.keys, [(first, 30.0, "queue")])) == [0]
        started = first.lease_deadline - 10.0  # server time
        now = q.limits().server_time
    # into the next second: the starts are the last full one's
    time.sleep(max(0.0, int(started) + 1.1 - now))
    text = httpx.get(f"{server.url}/metrics").text
    assert _value(text, "durq_queue_max_active", queue_name) == 3
    assert _value(text, "durq_queue_started_per_second", queue_name) >= 2
    assert 25 < _value(text, "durq_queue_paused_seconds", queue_name) <= 30
    assert _value(text, "durq_queue_rate_limited_total", queue_name) == 1
    home_name = failed.queue
    assert _value(text, "durq_workflows_cancelled_total", home_name) == 1
    assert _value(text, "durq_workflows_failed_total", home_name) == 1
    assert _value(text, "durq_workflows_steps_cancelled_total", home_name) == 1
    app.close()

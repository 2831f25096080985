"""The process pool on a Redis Cluster queue (docs/process-pool.md): a child holds no
connection to Redis, so the worker's cluster client does every fetch, lease and fenced
acknowledgement of the jobs its children run, a hard time limit's kill included."""

from __future__ import annotations

import os

import pytest

from durq.worker.pool import ProcessPoolConfig
from helpers import eventually
from worker import pool_app
from worker.support import ExecLog, running_worker

pytestmark = pytest.mark.slow


def test_pool_jobs_of_a_cluster_queue_complete_and_a_hard_limit_kill_retries_then_dead_letters(
    redis_url: str, queue_name: str, exec_log: ExecLog
) -> None:
    app = pool_app.build(redis_url, default_queue=queue_name)
    log = str(exec_log)
    limits = ProcessPoolConfig(kill_grace=0.5)
    try:
        with running_worker(app, concurrency=2, pool="process", process_pool=limits):
            # blocks_in_c: timeout 1 s, 2 attempts, never back in Python: only SIGKILL
            stuck = app.tasks["blocks_in_c"].enqueue(log, "c")
            done = app.tasks["whoami"].enqueue_many([(log, f"w{i}") for i in range(4)])
            seen = [h.result(timeout=20) for h in done]
            queue = app.queue(queue_name)
            eventually(lambda: queue.stats().dead == 1, 20, "the stuck job dead-lettered")
            after = app.tasks["whoami"].enqueue(log, "after").result(timeout=20)
            stats = queue.stats()
        assert {s["id"] for s in seen} == {h.id for h in done}
        assert all(s["pid"] != os.getpid() and s["attempt"] == 1 for s in seen)
        assert after["pid"] != os.getpid()  # the pool refilled after the kills
        starts = exec_log.events("start", "c")
        assert [e["attempt"] for e in starts] == [1, 2]  # the kill cost its attempt
        assert starts[0]["pid"] != starts[1]["pid"]  # each in a child of its own
        info = queue.job(stuck.id)
        assert info is not None and info.reason is not None
        assert info.reason["reason"] == "timeout" and info.reason["attempt"] == 2
        assert "killed with SIGKILL" in info.reason["message"]
        assert (stats.completed, stats.dead, stats.size) == (5, 1, 0)
    finally:
        app.close()

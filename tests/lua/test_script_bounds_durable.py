"""Durable steps stay under 10 ms of server CPU time per script call at their documented
limits (issue 37; the method and fixtures are test_script_bounds.py's): a job storing
the most records (MAX_STEPS) records, lists and releases them; a signal with the largest
payload wakes a thousand waiters (WAKE_MAX per call, the rest through the outbox); a
signal crosses the shards of a sharded queue."""

from __future__ import annotations

from typing import Any

import durq
from durq import Queue
from durq.dev.server import RedisServer
from durq.protocol import durable
from helpers import eventually
from lua.test_script_bounds import bounded, offenders, raw, server
from worker.support import running_worker

# the module's private server, its client, and the calls over the bound
__all__ = ["offenders", "raw", "server"]

WAITERS = 1000


def test_a_job_storing_the_most_steps_records_lists_and_ends(
    server: RedisServer, raw: Any, offenders: list[str]
) -> None:
    def scenario(name: str) -> None:
        with Queue(name, server.url) as q:
            q.enqueue("x")
            job = q.dequeue()
            assert job is not None
            body = durable.step_body({"row": 1, "pad": "x" * 64}, 1, 1, 1 << 20)
            first = q._run(durable.record_step(q.keys, job.id, job.token, "s0", body))
            assert first.tag == "ok"
            record = raw.hget(f"{q.keys.prefix}steps:{job.id}", "s0")
            fields = {f"s{i}": record for i in range(1, durable.MAX_STEPS - 1)}
            for i in range(0, len(fields), 2000):  # written directly: 10,000 calls take long
                chunk = dict(list(fields.items())[i : i + 2000])
                raw.hset(f"{q.keys.prefix}steps:{job.id}", mapping=chunk)
            last = q._run(durable.record_step(q.keys, job.id, job.token, "last", body))
            assert last.tag == "ok"
            assert len(q.steps(job.id)) == durable.MAX_STEPS
            op = durable.sleep(q.keys, job.id, job.token, "nap", after=0)
            assert q._run(op).tag == "done"
            q.release(job)  # its record goes, and its 10,000 steps with it
            assert q.steps(job.id) == []

    bounded(offenders, scenario)


def test_a_signal_with_the_largest_payload_wakes_a_thousand_waiters(
    server: RedisServer, offenders: list[str]
) -> None:
    payload = {"blob": "x" * (durable.MAX_SIGNAL_BYTES - 100)}

    def scenario(name: str) -> None:
        with Queue(name, server.url) as q:
            q.enqueue_many(list(range(WAITERS)))
            jobs = q.dequeue_many(WAITERS)
            ops = [durable.wait(q.keys, j.id, j.token, "w", "go", None) for j in jobs]
            for i in range(0, len(ops), 100):
                assert all(r.tag == "parked" for r in q._run_all(ops[i : i + 100]))
            q.signal("go", payload)  # WAKE_MAX now, the rest through the outbox
            app = durq.App(server.url, default_queue=name)
            app.task(queue=name)(_noop)
            try:
                # the outbox's courier runs in the workers of the queue (the woken
                # jobs, not task calls, go to the dead letters: no matter here)
                with running_worker(app, concurrency=1):
                    eventually(lambda: q.parked().waiting == 0, 30)
            finally:
                app.close()

    bounded(offenders, scenario)


def test_a_signal_crosses_the_shards_of_a_sharded_queue(
    server: RedisServer, offenders: list[str]
) -> None:
    def scenario(name: str) -> None:
        app = durq.App(server.url, default_queue=name, shards={name: 16})
        app.task(queue=name)(_noop)
        try:
            q = app.sharded_queue(name)
            q.enqueue_many(list(range(160)))
            for shard in q.shards:
                for job in shard.dequeue_many(100):
                    op = durable.wait(shard.keys, job.id, job.token, "w", "all", None)
                    assert shard._run(op).tag == "parked"
            app.signal("all", {"n": 1})
            with running_worker(app, concurrency=1):
                eventually(lambda: q.parked().waiting == 0, 30)
        finally:
            app.close()

    bounded(offenders, scenario)


async def _noop(*args: Any) -> None:
    """A task of the queue (a worker consumes the queues of its App's tasks)."""

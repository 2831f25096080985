"""The checker of the fault-injection tests catches what it is there to catch: a lost job,
a duplicate run, a completion accepted from a superseded delivery, a seq enqueued as two
jobs, and jobs left in the queue. (A checker that passes everything proves nothing.)"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import redis

import durq
from durq.models import Job
from faults.checker import check
from faults.producer import LedgerFile

pytestmark = pytest.mark.fault


def _run(ledger: LedgerFile, kind: str, seq: int, job: Job) -> None:
    ledger.write(kind, seq, job.id, job.attempt, job.deliveries, os.getpid(), job.token,
                 f"{time.time():.6f}", f"{job.enqueued_at:.3f}")  # fmt: skip


def _signature(job: Job) -> bytes:
    return json.dumps({"ok": True, "value": f"{os.getpid()} {job.token}"}).encode()


def test_the_checker_classifies_each_kind_of_outcome(
    redis_url: str, queue_name: str, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_url)
    queue = durq.Queue(queue_name, client=client)
    path = tmp_path / "ledger.txt"
    ledger = LedgerFile(str(path))
    seqs = (1, 2, 3, 5, 6, 7)
    ids = {s: r.id for s, r in zip(seqs, queue.enqueue_many([{"s": s} for s in seqs]), strict=True)}
    by_id = {v: k for k, v in ids.items()}
    jobs = {by_id[j.id]: j for j in queue.dequeue_many(6, lease=30)}
    # 4: its first holder's lease expires and the job is handed out again
    ids[4] = queue.enqueue({"s": 4}).id
    first = queue.dequeue(lease=0.05)
    time.sleep(0.1)
    second = queue.dequeue(lease=30)
    assert first is not None and second is not None and first.id == second.id == ids[4]
    for seq, job_id in sorted(ids.items()):
        ledger.write("ENQ_OK", seq, job_id, "created", f"{time.time():.6f}", "p", 0)
    ledger.write("ENQ_OK", 6, "not-that-one", "created", f"{time.time():.6f}", "p", 0)
    ledger.write("ENQ_OK", 8, "never-stored", "created", f"{time.time():.6f}", "p", 0)

    for seq in (1, 3, 6, 7):  # ran once, completed
        _run(ledger, "START", seq, jobs[seq])
        _run(ledger, "DONE", seq, jobs[seq])
    for _ in range(2):  # 2: ran to its end twice (a first holder died after DONE)
        _run(ledger, "START", 2, jobs[2])
        _run(ledger, "DONE", 2, jobs[2])
    for job in (first, second):
        _run(ledger, "START", 4, job)
        _run(ledger, "DONE", 4, job)
    done = [jobs[s] for s in (1, 2, 3, 6, 7)] + [second]
    statuses = queue.release_many(done, results=[_signature(j) for j in done])
    assert set(statuses) == {durq.Outcome.OK}
    # 4: the completion "accepted" is the first holder's (forged: the queue refuses it)
    client.delete(queue.keys.result(second.id))
    client.rpush(queue.keys.result(second.id), _signature(first))
    ledger.close()

    report = check("checker", path, queue, client)

    assert report.jobs == 8
    assert report.completed == 4  # 1, 3, 6 (one of its two ids), 7
    assert report.duplicated == 2  # 2, and 4 (two DONE lines)
    assert report.zombie_accepted == 1  # 4
    assert report.lost == 3  # 8 (never stored), 6's second id, 5 (held, never finished)
    assert report.double_enqueued == 1  # 6
    assert report.leftover == {"active": 1, "stats_active": 1, "stuck_records": 1}  # 5, held
    problems = " ".join(report.problems())
    for word in ("lost=3", "double_enqueued=1", "zombie_accepted=1", "left in the queue"):
        assert word in problems
    client.close()

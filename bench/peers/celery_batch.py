"""celery-batches: Celery's batch task, the anchor of the batch row (issue 36).

Its own venv (celery, celery-batches). Two tasks on Celery's default queue: ``bulk_job``
(one item per job, Celery's plain task) and ``bulk_batch`` (``base=Batches``: the worker's
main process buffers up to ``flush_every`` requests, or what came within
``flush_interval``, and hands them to the pool as one call). Both run the same body
(``work.bulk_write_sync``: one pipelined write holding every item's row). An item may carry
its enqueue time: the batch records when its call started, for the pickup latency of
one item on an idle queue (one batch task, not two: celery-batches #73).
"""

from __future__ import annotations

import os
import time

import probe
import work
from celery import Celery
from celery_batches import Batches
from common import BATCH_MAX_WAIT

from peers.celery_specs import celery_specs

DISTS = ("celery-batches", "celery", "kombu", "redis", "hiredis")
NOTES = [
    f"`@app.task(base=Batches, flush_every=100, flush_interval={BATCH_MAX_WAIT:g})`; the "
    "worker's prefetch (multiplier × concurrency) must reach flush_every, or a batch waits "
    "for the timer (the sweep's configurations all prefetch 64 per slot: 128 and more)",
    "no result backend, JSON serializer, acks_late=False (Celery's defaults)",
]
QUEUE = "celery"

app = Celery("bench_batch", broker=os.environ["BENCH_REDIS_URL"])
app.conf.update(worker_hijack_root_logger=False, broker_connection_retry_on_startup=True)


@app.task(name="bench.bulk_job")
def bulk_job(row, t=None):
    if t is not None:
        probe.started(t)
    work.bulk_write_sync([row])


@app.task(name="bench.bulk_batch", base=Batches, flush_every=100, flush_interval=BATCH_MAX_WAIT)
def bulk_batch(requests):
    for r in requests:
        if len(r.args) > 1:
            probe.started(r.args[1])
    work.bulk_write_sync([r.args[0] for r in requests])


TASKS = {"bulk_job": bulk_job, "bulk_batch": bulk_batch}


class Peer:
    bulk_api = None
    bulk_note = ""

    def setup(self):
        import redis

        self.r = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])

    def after_flush(self):
        pass

    def fill(self, n, kind="bulk_job"):
        delay = TASKS["bulk_job" if kind == "noop" else kind].delay
        for i in range(n):
            delay(work.row(i))

    def send_latency_batch(self):
        bulk_batch.delay(work.row(0), time.time())

    def queued(self):
        return self.r.llen(QUEUE)

    def worker(self, mode):
        return worker_specs()[BATCH["per batch"] if mode == "best" else mode]

    def close(self):
        pass


# The best of `--tune --scenario batch --peers celery-batches` for each part. Per batch:
# 2 processes of threads -c 4, whose prefetch (256) lets a batch reach 100 items; 2 solo
# ones drained as fast (within the noise) in batches of at most 64, their prefetch,
# flushed by the timer.
BATCH = {"per job": "threads-8-x2-tuned", "per batch": "threads-4-x2-tuned"}
BEST = BATCH["per batch"]
TUNE = {
    "batch.per job": (("bulk_job",), ("threads-8-x2-tuned", "threads-16-x2-tuned")),
    "batch.per batch": (
        ("bulk_batch",),
        ("prefork-2-tuned", "threads-4-x2-tuned", "solo-x2-tuned", "prefork-4-tuned"),
    ),
}
ROWS = {
    "batch": [
        {"part": "per job", "label": "Celery task", "kind": "bulk_job", "mode": BATCH["per job"]},
        {"part": "per batch", "label": "Batches, flush_every=100", "kind": "bulk_batch",
         "mode": BATCH["per batch"]},
        {"part": "latency", "label": f"Batches, flush_interval={BATCH_MAX_WAIT:g}",
         "kind": "bulk_batch", "mode": BATCH["per batch"], "send": "send_latency_batch"},
    ]
}  # fmt: skip


def worker_specs():
    return celery_specs("peers.celery_batch")

"""The batch-task App the batch fault tests run in ``durq worker`` processes
(``worker.batch_apps:app``): its batch task owns the queue named by
``DURQ_TEST_BATCH_QUEUE``, runs ``DURQ_TEST_BATCH_CONCURRENCY`` batches at once (default
1), and each of its items appends ``start`` and ``finish`` lines
to the execution log named by ``DURQ_TEST_BATCH_LOG`` (see ``worker.apps.record``)."""

from __future__ import annotations

import json
import os
import time

import durq

QUEUE = os.environ.get("DURQ_TEST_BATCH_QUEUE", "batch")
CONCURRENCY = int(os.environ.get("DURQ_TEST_BATCH_CONCURRENCY", "1"))
app = durq.App(default_queue=QUEUE)


def _log(event: str, items: list[durq.Item]) -> None:
    lines = "".join(
        json.dumps(
            {"event": event, "key": str(item.args[0]), "time": time.time(),
             "pid": os.getpid(), "job": item.id, "attempt": item.attempt}
        ) + "\n"
        for item in items
    )  # fmt: skip
    fd = os.open(os.environ["DURQ_TEST_BATCH_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, lines.encode())
    finally:
        os.close(fd)


@app.task(queue=QUEUE, batch=durq.Batch(max_size=50, max_wait=0.2, concurrency=CONCURRENCY))
def store(items: list[durq.Item]) -> None:
    """Log every item's start, take 1.5 s (the bulk write), log every item's finish."""
    _log("start", items)
    time.sleep(1.5)
    _log("finish", items)

"""Job control through a worker's death: the cancel flag lives in Redis, so a job whose
worker was SIGKILLed after the cancel ends cancelled when its lease runs out, and never
runs again."""

from __future__ import annotations

import signal

import pytest

import durq
from helpers import eventually
from worker.support import Durq, ExecLog

pytestmark = [pytest.mark.fault, pytest.mark.slow]


def test_a_cancelled_job_of_a_killed_worker_ends_cancelled_and_never_runs_again(
    app: durq.App, exec_log: ExecLog, queue_name: str, redis_url: str, durq_cli: Durq
) -> None:
    doomed = durq_cli.worker(redis_url, queue_name, args=("--lease", "1"))
    handle = app.tasks["work"].enqueue(str(exec_log), "report", 30.0)
    eventually(lambda: exec_log.count("start") == 1, 15, durq_cli.outputs)
    doomed.send(signal.SIGSTOP)  # it can neither stop the job nor acknowledge it
    assert handle.cancel().status is durq.CancelStatus.CANCELLING
    doomed.send(signal.SIGKILL)
    assert doomed.wait(5) == -signal.SIGKILL
    durq_cli.worker(redis_url, queue_name, args=("--lease", "1"))
    queue = app.queue(queue_name)
    eventually(lambda: queue.stats().cancelled == 1, 15, durq_cli.outputs)
    info = handle.info()
    assert info is not None and info.state is durq.JobState.CANCELLED
    app.tasks["work"].enqueue(str(exec_log), "after", 0.0)  # the new worker is serving
    eventually(lambda: exec_log.count("finish", "after") == 1, 15, durq_cli.outputs)
    assert exec_log.count("start", "report") == 1
    stats = queue.stats()
    assert (stats.retried, stats.reclaimed, stats.dead) == (0, 0, 0)

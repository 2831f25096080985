"""WorkflowHandle.cancel with real ``durq worker`` processes: a group of long async steps
cancelled mid-run (its running steps stop within a third of the lease, its pending steps
and its callback never start), in one slot and across slots (through the outbox); a
cancel of a finished or unknown workflow; ``durq workflow cancel``. Afterwards nothing of
the workflow is left in Redis but its result and summary (SCAN)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import redis

import durq
from cli.support import durq as run
from durq.protocol import workflows as wf
from helpers import eventually
from worker.support import Durq, DurqProcess, running_worker
from workflows.support import leftovers, live_jobs, runs

LEASE = 1.5
THIRD = LEASE / 3


def _events(log: str, event: str) -> list[dict[str, Any]]:
    path = Path(log)
    if not path.exists():
        return []
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return [e for e in lines if e["event"] == event]


def _worker(durq_cli: Durq, url: str, queues: list[str], concurrency: int) -> DurqProcess:
    args = ["worker", "workflows.apps:app", "--url", url, "--heartbeat", "0.2"]
    for queue in queues:
        args += ["-q", queue]
    args += ["--lease", str(LEASE), "-c", str(concurrency), "--grace", "1"]
    return durq_cli.start(*args, url=url)


def _stats(raw: redis.Redis, queue: str) -> dict[str, int]:
    tag, _, rest = queue.partition("/")
    prefix = f"durq:{{{tag}}}{'/' + rest if rest else ''}:"
    stats: dict[bytes, bytes] = raw.hgetall(prefix + "stats")  # type: ignore[assignment]
    return {k.decode(): int(v) for k, v in stats.items()}


@pytest.mark.parametrize(
    ("cross", "policy"),
    [(False, "fail"), (False, "wait"), (True, "fail")],
    ids=["one-slot", "one-slot-wait", "cross-slot"],
)
def test_cancel_stops_running_steps_and_nothing_else_starts(
    wapp: durq.App, log: str, raw: redis.Redis, durq_cli: Durq, cross: bool, policy: str
) -> None:
    t = wapp.tasks
    home = wapp.default_queue
    nap = t["nap"]
    if cross:
        # the workflow lives with its delayed (so idle) steps; the two that run live in
        # a queue of another hash tag, so their cancel leaves through the outbox
        steps_queue = f"{home}-b"
        members = [nap.options(delay=60).s(log, f"d{i}", 30.0) for i in range(5)]
        members += [nap.options(queue=steps_queue).s(log, f"m{i}", 30.0) for i in range(2)]
    else:
        steps_queue = home
        members = [nap.s(log, f"m{i}", 30.0) for i in range(6)]
    handle = durq.group(members).then(t["collect"].s(log)).enqueue(on_failure=policy)
    assert handle.queue == home
    queues = sorted({home, steps_queue})
    proc = _worker(durq_cli, wapp.url, queues, concurrency=2)  # 2 run, 4 stay pending
    try:
        eventually(lambda: len(_events(log, "start")) == 2, 15, "two steps to start")
        asked = time.time()
        assert handle.cancel() is durq.CancelStatus.CANCELLED
        with pytest.raises(durq.Cancelled, match="cancelled"):
            handle.result(5)
        eventually(lambda: len(_events(log, "stopped")) == 2, 10, "the running steps stop")
        took = max(e["time"] for e in _events(log, "stopped")) - asked
        assert took < THIRD + 0.5, f"stopped {took:.2f} s after the cancel"

        def settled() -> bool:
            info = handle.status()
            return info is not None and info.counts == {"cancelled": len(members) + 1}

        eventually(settled, 10, lambda: f"every step cancelled: {handle.status()}")
        time.sleep(LEASE)  # a pending step would have started by now
        assert len(_events(log, "start")) == 2, "a pending step started"
        assert runs(log) == [], "a step or the callback completed"
        info = handle.status()
        assert info is not None and info.state == "cancelled"
        assert info.error is not None and info.error["reason"] == "cancelled"
        # every step ended cancelled (the running ones too), none completed or retried
        stats = [_stats(raw, q) for q in queues]
        assert sum(s.get("cancelled", 0) for s in stats) == len(members)
        assert sum(s.get("completed", 0) + s.get("retried", 0) for s in stats) == 0
        kept = [live_jobs(raw, q) for q in queues]
        assert sum(k.get("cancelled", 0) for k in kept) == len(members)
        home_queue = wapp.queue(home)
        assert home_queue._run(wf.counters(home_queue.keys))["cancelled"] == 1
        # the workers' dequeues pass the cancelled ids still listed; outboxes drain
        eventually(
            lambda: leftovers(raw, queues, [handle.id]) == [],
            10,
            lambda: f"leftovers {leftovers(raw, queues, [handle.id])}",
        )
    finally:
        proc.kill()
    # a second cancel changes nothing
    assert handle.cancel() is durq.CancelStatus.FINISHED


def test_cancel_before_any_worker_runs_nothing(wapp: durq.App, log: str, raw: redis.Redis) -> None:
    t = wapp.tasks
    queue = wapp.default_queue
    chained = durq.chain(t["link"].si([], log, "a"), t["link"].s(log, "b")).enqueue()
    grouped = durq.group([t["square"].s(log, i) for i in range(5)]).then(t["collect"].s(log))
    handle = grouped.enqueue()

    assert handle.cancel() is durq.CancelStatus.CANCELLED
    assert chained.cancel() is durq.CancelStatus.CANCELLED
    with pytest.raises(durq.Cancelled, match=f"workflow {handle.id} was cancelled"):
        handle.result(1)
    with running_worker(wapp, queues=[queue]):
        time.sleep(0.5)
        assert wapp.queue(queue).dequeue() is None  # passes the cancelled ids
    assert runs(log) == []
    info = handle.status()
    assert info is not None and info.state == "cancelled"
    assert info.counts == {"cancelled": 6}
    assert leftovers(raw, [queue], [handle.id, chained.id]) == []


async def test_acancel(wapp: durq.App, log: str) -> None:
    sq = wapp.tasks["square"]
    handle = await durq.group([sq.s(log, i) for i in range(3)]).aenqueue()
    assert await handle.acancel() is durq.CancelStatus.CANCELLED
    assert await handle.acancel() is durq.CancelStatus.FINISHED
    with pytest.raises(durq.Cancelled):
        await handle.aresult(1)
    info = await handle.astatus()
    assert info is not None and info.state == "cancelled"
    await wapp.aclose()


def test_cancel_of_a_finished_or_unknown_workflow(wapp: durq.App, log: str) -> None:
    t = wapp.tasks
    done = durq.group([t["square"].s(log, i) for i in range(3)]).then(t["collect"].s(log))
    handle = done.enqueue()
    failed = durq.chain(t["dies"].si(log, "bad"), t["echo"].s()).enqueue()
    with running_worker(wapp):
        assert handle.result(10) == 3
        with pytest.raises(durq.WorkflowFailed):
            failed.result(10)
    assert handle.cancel() is durq.CancelStatus.FINISHED
    assert failed.cancel() is durq.CancelStatus.FINISHED
    assert handle.result(1) == 3  # unchanged
    info = handle.status()
    assert info is not None and info.state == "completed"
    unknown = durq.WorkflowHandle(wapp, wapp.default_queue, "no-such-workflow")
    with pytest.raises(durq.JobNotFound, match="no workflow 'no-such-workflow' in queue"):
        unknown.cancel()


def test_cli_cancel(wapp: durq.App, log: str) -> None:
    # in this process: a `durq` process took seconds a command on a loaded machine
    t = wapp.tasks
    handle = durq.group([t["square"].s(log, i) for i in range(3)]).then(t["collect"].s(log))
    running = handle.enqueue()
    out = run("workflow", "cancel", running.id, "--url", wapp.url)
    assert out.exit_code == 0 and "cancelled" in out.stdout, out.output
    again = run("workflow", "cancel", running.id, "-q", wapp.default_queue, "--url", wapp.url)
    assert again.exit_code == 0 and "had ended (cancelled)" in again.stdout, again.output
    missing = run("workflow", "cancel", "nope", "--url", wapp.url)
    assert missing.exit_code == 1 and "no workflow nope" in missing.stderr, missing.output
    with pytest.raises(durq.Cancelled):
        running.result(1)

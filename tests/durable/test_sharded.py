"""Durable steps on a sharded queue (issue 37): a signal enters by one shard and reaches
the waiters of every other through its outbox (delivered at least once, applied once);
steps, sleeps and parked counts read across the shards."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import durq
from cli.support import durq as run
from durable.apps import events, register
from helpers import eventually
from worker.support import running_worker


@pytest.fixture
def sharded_app(redis_url: str, queue_name: str) -> Iterator[durq.App]:
    test_app = durq.App(redis_url, default_queue=queue_name, lease=2.0, shards={queue_name: 3})
    register(test_app, max_attempts=5, backoff=durq.fixed(0.05))
    yield test_app
    test_app.close()


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_one_signal_wakes_the_waiters_of_every_shard_through_the_outbox(
    sharded_app: durq.App, log: str, kind: str, queue_name: str
) -> None:
    app = sharded_app
    queue = app.sharded_queue(queue_name)
    with running_worker(app, concurrency=2):
        handles = [app.tasks[f"waiter_{kind}"].enqueue(log, "all") for _ in range(9)]
        eventually(lambda: queue.parked().waiting == 9, 15, lambda: str(queue.parked()))
        shards = {s.name for s in queue.shards if s.parked().waiting}
        assert len(shards) >= 2  # the waiters are spread: most need the outbox
        app.signal("all", {"n": 1})
        assert [h.result(timeout=15) for h in handles] == [{"got": {"n": 1}}] * 9
    assert len(events(log, "run")) == 18
    assert queue.parked() == durq.Parked(0, 0)


def test_a_sharded_queue_lists_the_steps_of_a_job_in_whichever_shard_holds_it(
    sharded_app: durq.App, log: str, queue_name: str
) -> None:
    app = sharded_app
    queue = app.sharded_queue(queue_name)
    with running_worker(app, concurrency=2):
        handles = [app.tasks["sleeper_async"].enqueue(log, f"k{i}", 60) for i in range(4)]
        eventually(lambda: queue.parked().asleep == 4, 15, lambda: str(queue.parked()))
    for handle in handles:
        assert [s.kind for s in queue.steps(handle.id)] == ["step", "sleep"]
    queue.cancel([h.id for h in handles])
    assert queue.parked() == durq.Parked(0, 0)


@pytest.mark.parametrize("named", [True, False], ids=["-q", "every-queue"])
def test_durq_signal_from_the_cli_reaches_the_waiters_of_every_shard(
    sharded_app: durq.App, log: str, queue_name: str, named: bool, redis_url: str
) -> None:
    # `durq signal NAME JSON` enters by the signal's shard (the namespace knows the
    # queue as sharded), whose outbox carries it to the waiters of the others
    app = sharded_app
    queue = app.sharded_queue(queue_name)
    with running_worker(app, concurrency=2):
        handles = [app.tasks["waiter_async"].enqueue(log, "go") for _ in range(6)]
        eventually(lambda: queue.parked().waiting == 6, 15, lambda: str(queue.parked()))
        assert len({s.name for s in queue.shards if s.parked().waiting}) >= 2
        where = ("-q", queue_name) if named else ()
        result = run("signal", "go", '{"by": "cli"}', *where, "--url", redis_url)
        assert result.exit_code == 0, result.output
        # (the line may wrap: every queue of the namespace is named when no -q is given)
        assert "waiting jobs made ready" in " ".join(result.output.split())
        assert [h.result(timeout=15) for h in handles] == [{"got": {"by": "cli"}}] * 6
    assert queue.parked() == durq.Parked(0, 0)

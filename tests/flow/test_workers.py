"""Flow control with real worker processes: the rate holds across processes on the
server's clock, a limited group does not delay others, max_active holds through a
SIGKILL, RateLimited never burns attempts, and idle workers of a parked queue stay
quiet. Start times are the server's (``deq``: the dequeue time from the lease)."""

from __future__ import annotations

import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import durq
from durq import Rate
from durq.dev.server import RedisServer
from flow.app import LEASE, build
from flow.support import busiest_window, events, start_workers
from helpers import SLACK, eventually
from worker.support import Durq, DurqProcess

pytestmark = pytest.mark.slow  # worker processes


@pytest.fixture
def flow_app(redis_url: str) -> Iterator[durq.App]:
    app = build(redis_url)
    yield app
    app.close()


def ready(procs: list[DurqProcess]) -> None:
    for proc in procs:
        proc.expect_output("consuming", timeout=30)


def rate_of(starts: list[float]) -> float:
    """Starts per second between the first and the last start."""
    return (len(starts) - 1) / (starts[-1] - starts[0])


def check_rate(starts: list[float], rate: Rate) -> tuple[int, float]:
    """The busiest window of ``rate.per`` seconds and the achieved rate in the steady
    part (from 1 s after the first start: the burst is spent by then)."""
    busiest = busiest_window(starts, rate.per)
    steady = [t for t in starts if t >= starts[0] + 1.0]
    return busiest, rate_of(steady)


def run_at_rate(
    durq_cli: Durq,
    redis_url: str,
    app: durq.App,
    queue: str,
    log: Path,
    rate: Rate,
    seconds: float,
    workers: int = 3,
) -> list[float]:
    """``workers`` processes (concurrency 10) run a backlog limited to ``rate`` for about
    ``seconds``; returns the server start times."""
    with durq.Queue(queue, redis_url) as q:
        q.configure(rate=rate)
    procs = start_workers(durq_cli, redis_url, queue, workers)
    ready(procs)
    n = int(rate.per_second * seconds) + 1
    app.tasks["tick"].options(queue=queue).enqueue_many([(str(log),) for _ in range(n)])
    eventually(lambda: len(events(log)) >= n, seconds * 1.5 + 10, durq_cli.outputs)
    return sorted(e["deq"] for e in events(log))


@pytest.mark.parametrize("burst", [1, 2])
def test_a_rate_holds_across_worker_processes(
    durq_cli: Durq, redis_url: str, flow_app: durq.App, queue_name: str, tmp_path: Path, burst: int
) -> None:
    """The issue asks for 30 s; 8 s here keeps the suite short. The 30 s run is
    test_a_rate_holds_for_30_seconds (``-k 30_seconds``)."""
    rate = Rate(20, per=1.0, burst=burst)
    starts = run_at_rate(durq_cli, redis_url, flow_app, queue_name, tmp_path / "log", rate, 8)
    busiest, achieved = check_rate(starts, rate)
    print(f"burst={burst} busiest 1 s window={busiest} achieved={achieved:.2f}/s")
    assert busiest <= rate.limit + rate.burst - 1
    # burst 1 spaces starts exactly: a wake-up that comes a ms or two late loses that
    # time for good (docs/flow-control.md); from burst 2 the tolerance absorbs it
    assert achieved == pytest.approx(20, rel=0.05 if burst > 1 else 0.1)


def test_a_rate_holds_for_30_seconds(
    durq_cli: Durq, redis_url: str, flow_app: durq.App, queue_name: str, tmp_path: Path
) -> None:
    rate = Rate(20, per=1.0, burst=2)
    starts = run_at_rate(durq_cli, redis_url, flow_app, queue_name, tmp_path / "log", rate, 30)
    busiest, achieved = check_rate(starts, rate)
    print(f"30 s: busiest 1 s window={busiest} achieved={achieved:.2f}/s")
    assert busiest <= rate.limit + rate.burst - 1
    assert achieved == pytest.approx(20, rel=0.05)


def test_a_limited_group_does_not_delay_an_unlimited_one(
    durq_cli: Durq, redis_url: str, flow_app: durq.App, queue_name: str, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    with durq.Queue(queue_name, redis_url) as q:
        q.configure(group_rates={"a": Rate(2, per=1.0)})
    ready(start_workers(durq_cli, redis_url, queue_name, 2))
    tick = flow_app.tasks["tick"]
    tick.options(queue=queue_name, group="a").enqueue_many([(str(log),) for _ in range(20)])
    sent = []
    for _ in range(30):
        sent.append(tick.options(queue=queue_name, group="b").enqueue(str(log)).id)
        time.sleep(0.1)
    eventually(lambda: len([e for e in events(log) if e["group"] == "b"]) == 30, 10)
    b = [e for e in events(log) if e["group"] == "b"]
    pickup = sorted(e["deq"] - e["enq"] for e in b)
    a = sorted(e["deq"] for e in events(log) if e["group"] == "a")
    print(f"b pickup median={statistics.median(pickup):.4f} max={pickup[-1]:.4f}; a={len(a)}")
    # behind group a's 2 jobs a second, b's jobs would wait seconds
    assert statistics.median(pickup) < 0.1
    assert pickup[-1] < 0.25 + SLACK
    assert busiest_window(a, 1.0) <= 2
    assert 5 <= len(a) <= 9  # 2/s over the ~3.5 s of the run


@pytest.mark.fault
def test_max_active_holds_across_8_workers_and_a_sigkill(
    durq_cli: Durq, redis_url: str, flow_app: durq.App, queue_name: str, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    with durq.Queue(queue_name, redis_url) as q:
        q.configure(max_active=3)
    procs = start_workers(durq_cli, redis_url, queue_name, 8)
    ready(procs)
    client = redis.Redis.from_url(redis_url)
    active_key = f"durq:{{{queue_name}}}:active"
    seen: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            seen.append(client.zcard(active_key))
            time.sleep(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    n = 40
    flow_app.tasks["hold"].options(queue=queue_name).enqueue_many(
        [(str(log), 0.25) for _ in range(n)]
    )
    # SIGKILL the worker of a running job
    first = eventually(lambda: events(log), 10)[0]
    victim = next(p for p in procs if p.pid == first["pid"] or first["pid"] in
                  [c.pid for c in p.children()])  # fmt: skip
    killed_at = time.time()
    victim.send(signal.SIGKILL)
    try:
        eventually(lambda: len({e["job"] for e in events(log, "finish")}) == n, 60,
                   durq_cli.outputs)  # fmt: skip
    finally:
        stop.set()
        sampler.join()
        client.close()
    starts = events(log)
    finishes = {(e["job"], e["deliveries"]): e["time"] for e in events(log, "finish")}
    # runs from the task's own start and finish (those of the killed worker: to the kill)
    spans = [(e["time"], finishes.get((e["job"], e["deliveries"]), killed_at)) for e in starts]
    most = max(sum(1 for s, f in spans if s <= t < f) for t, _ in spans)
    print(f"leased at once: max {max(seen)} over {len(seen)} samples; running at once {most}")
    assert max(seen) <= 3
    assert most <= 3
    # the killed job ran again once its lease ran out, and its place came back then
    again = [e for e in starts if e["job"] == first["job"] and e["deliveries"] == 2]
    assert again, durq_cli.outputs()
    assert again[0]["deq"] <= first["deq"] + LEASE + SLACK


def test_a_task_rate_limited_50_times_completes_and_is_never_dead_lettered(
    durq_cli: Durq, redis_url: str, flow_app: durq.App, queue_name: str, tmp_path: Path
) -> None:
    log = tmp_path / "log"
    ready(start_workers(durq_cli, redis_url, queue_name, 2))
    handle = flow_app.tasks["slows_down"].options(queue=queue_name).enqueue(str(log), 50, 0.01)
    assert handle.result(timeout=30) == "done"
    runs = events(log)
    assert len(runs) == 51
    assert {e["attempt"] for e in runs} == {1}
    with durq.Queue(queue_name, redis_url) as q:
        stats = q.stats()
        assert (stats.dead, stats.completed) == (0, 1)
        assert q.limits().rate_limited == 50


def test_rate_limited_with_queue_scope_pauses_every_shard_of_a_sharded_queue(
    durq_cli: Durq, redis_url: str, flow_app: durq.App, queue_name: str, tmp_path: Path
) -> None:
    # issue 30, bug 7: the other shards went on starting jobs during the pause
    log, pause = tmp_path / "log", 4.0
    flow_app.shard(queue_name, 2)
    slow = flow_app.tasks["slows_down"].options(queue=queue_name)
    handle = slow.enqueue(str(log), 1, pause, "queue")  # registers the sharded queue
    ready(start_workers(durq_cli, redis_url, queue_name, 1))
    eventually(lambda: len(events(log)) >= 1, 15, durq_cli.outputs)
    paused_at = events(log)[0]["deq"]
    time.sleep(1.0)  # the pause reaches the other shard through the outbox meanwhile
    ticks = flow_app.tasks["tick"].options(queue=queue_name)
    ticks.enqueue_many([(str(log),) for _ in range(20)])  # over both shards
    assert handle.result(timeout=pause + 20) == "done"
    eventually(lambda: len(events(log)) >= 22, pause + 20, durq_cli.outputs)
    starts = [e["deq"] for e in events(log)[1:]]
    assert min(starts) >= paused_at + pause - SLACK, (min(starts) - paused_at, durq_cli.outputs())


def test_idle_workers_of_a_parked_queue_send_few_commands(
    durq_cli: Durq,
    make_server: Callable[..., RedisServer],
    queue_name: str,
    tmp_path: Path,
) -> None:
    # a server of its own: INFO commandstats counts every client of a server, and the
    # shared one serves other tests' leftovers too
    redis_url = make_server().url
    flow_app = build(redis_url)
    log = tmp_path / "log"
    with durq.Queue(queue_name, redis_url) as q:
        q.configure(group_rates={"a": Rate(1, per=60.0)})
    workers = 4
    argv = ("--heartbeat", "30")  # keep the registry's own commands out of the count
    procs = [
        durq_cli.start("worker", "flow.app:app", "-q", queue_name, "--url", redis_url,
                       "-c", "10", "--lease", str(LEASE), *argv, url=redis_url)
        for _ in range(workers)
    ]  # fmt: skip
    ready(procs)
    flow_app.tasks["tick"].options(queue=queue_name, group="a").enqueue_many(
        [(str(log),) for _ in range(10)]
    )
    eventually(lambda: events(log, "finish"), 10)
    time.sleep(1.0)  # one job started; the group is parked for a minute
    client = redis.Redis.from_url(redis_url)
    try:
        before = _calls(client)
        seconds = 6.0
        time.sleep(seconds)
        after = _calls(client)
    finally:
        client.close()
    sent = {name: after.get(name, 0) - before.get(name, 0) for name in after}
    per_worker_second = sum(sent.values()) / workers / seconds
    print(f"commands sent by {workers} idle workers in {seconds} s: {sent}")
    # each idle worker blocks for up to a lease (2 s here; 5 s at most), then looks again
    # with one dequeue: about 2 commands per wait, nothing in between; its courier of
    # the app's default queue (the home of workflows with an id) waits the same way
    assert per_worker_second <= 2.0
    assert len(events(log)) == 1
    flow_app.close()


_WORKER_COMMANDS = ("fcall", "evalsha", "bzpopmin", "zadd", "pexpire", "eval")


def _calls(client: redis.Redis) -> dict[str, int]:
    stats: dict[str, Any] = client.info("commandstats")
    return {name: stats.get(f"cmdstat_{name}", {}).get("calls", 0) for name in _WORKER_COMMANDS}

"""F3: connections cut mid-command by a TCP proxy between each client and Redis.

Each producer and each worker reaches Redis through its own ``ChaosProxy``. For ~12 s
the proxies, in random order, reset every connection (RST), drop a reply after the
server executed the command and cut the connection, or stop forwarding for up to 2 s
(longer than the 1 s lease). Producers' retries must create no duplicate jobs (durq
retries an enqueue with the ids fixed before the first try), workers must recover by
themselves, and nothing may be lost.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator

import pytest

from faults.harness import Producer
from faults.ledger import read_ledger
from faults.proxy import ChaosProxy
from faults.scene import Scene
from helpers import eventually

pytestmark = [pytest.mark.fault, pytest.mark.slow]

# per proxy, shuffled together: (action, how many times)
ACTIONS = (("reset", 3), ("drop_reply", 4), ("blackhole", 1))
GAP = (0.2, 0.5)  # seconds between two faults


@pytest.fixture
def proxies() -> Iterator[list[ChaosProxy]]:
    made: list[ChaosProxy] = []
    yield made
    for proxy in made:
        proxy.close()


def test_f3_connections_cut_mid_command_create_no_duplicates_and_lose_nothing(
    proxies: list[ChaosProxy],
    scene: Callable[..., Scene],
) -> None:
    rng = random.Random()
    s = scene(concurrency=8, lease=1.0)
    server, fleet = s.server, s.fleet

    def proxy(name: str) -> ChaosProxy:
        p = ChaosProxy(server.host, server.port, name).start()
        proxies.append(p)
        return p

    worker_proxies = [proxy(f"w{i}") for i in range(2)]
    workers = [fleet.spawn(url=p.url) for p in worker_proxies]
    fleet.wait_ready(workers)
    producer_proxies = [proxy(f"p{i}") for i in range(2)]
    producers = [
        Producer(
            p.url,
            s.name,
            s.ledger,
            range(i * 1_000_000, (i + 1) * 1_000_000),
            name=p.name,
            batch=4,
            pause=0.01,
            seconds=lambda seq: (seq % 4) / 100,
        )
        for i, p in enumerate(producer_proxies)
    ]
    for producer in producers:
        producer.start()

    plan = [(p, action) for p in proxies for action, times in ACTIONS for _ in range(times)]
    rng.shuffle(plan)
    time.sleep(1.0)
    for target, action in plan:
        if action == "reset":
            target.reset()
        elif action == "drop_reply":
            target.drop_replies(1)
        else:
            target.blackhole(rng.uniform(1.2, 2.0))
        time.sleep(rng.uniform(*GAP))
    for p in proxies:
        p.heal()
    healed = time.time()
    pids = [w.pid for w in workers]

    def resumed() -> bool:
        view = read_ledger(s.ledger)
        started = {r.pid for r in view.runs if r.kind == "START" and r.time > healed}
        enqueued = {e.producer for e in view.enqs if e.kind == "ENQ_OK" and e.time > healed}
        return started >= set(pids) and enqueued >= {p.name for p in producer_proxies}

    eventually(resumed, 10, fleet.outputs)
    resume_s = time.time() - healed
    for producer in producers:
        producer.stop()
    for producer in producers:
        producer.finish()
    s.drain()
    assert all(w.alive() for w in workers), fleet.outputs()
    fleet.stop()

    report = s.check("F3")
    report.refused_acks, false_alarms = fleet.fencing_alarms(read_ledger(s.ledger))
    report.figures.update(
        cuts=sum(p.resets for p in proxies),
        dropped_replies=sum(p.dropped for p in proxies),
        blackholes=sum(p.blackholes for p in proxies),
        enq_retried_exists=report.enq_exists,
        double_enqueued=report.double_enqueued,
        reclaimed=report.stats_reclaimed,
        refused_acks=report.refused_acks,
        resent_acks=fleet.grep("sent again after a lost reply"),
        resume_s=round(resume_s, 2),
    )
    s.verdict(
        report,
        # a refusal logged as a lost lease must be one: the job was handed out again
        f"false lease-lost warnings: {false_alarms[:3]}" if false_alarms else "",
        f"dead-lettered: {report.dead}" if report.dead else "",
        # the producers' replies were dropped 8 times: some retry must have found its
        # job already enqueued, or the idempotency was not exercised
        "no enqueue retry found its job already there" if report.enq_exists == 0 else "",
        logs=lambda: f"{proxies}\n{fleet.outputs()}",
    )

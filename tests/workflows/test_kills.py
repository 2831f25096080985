"""Workflows run by ``durq worker`` processes that are SIGKILLed every second (lease 1 s):
the callback of a 1,000-step group runs as one job with the 1,000 results in order, a
5-step chain runs in order, and a step whose lease expired under a stopped worker counts
once although both of its runs finish."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import durq
from helpers import eventually
from worker.support import Durq
from workflows.support import KillingFleet, leftovers, runs

pytestmark = [pytest.mark.slow, pytest.mark.fault]


@pytest.fixture
def fleets(durq_cli: Durq) -> Iterator[list[KillingFleet]]:
    made: list[KillingFleet] = []
    yield made
    for fleet in made:
        fleet.close()


def _fleet(fleets: list[KillingFleet], *args: Any, **kwargs: Any) -> KillingFleet:
    fleet = KillingFleet(*args, **kwargs)
    fleets.append(fleet)
    return fleet


def _outputs(durq_cli: Durq) -> str:
    return durq_cli.outputs()[-6000:]


def test_a_group_of_1000_under_kills_calls_back_once(
    wapp: durq.App, log: str, raw: redis.Redis, durq_cli: Durq, fleets: list[KillingFleet]
) -> None:
    t = wapp.tasks
    n = 1000
    handle = (
        durq.group([t["square"].s(log, i, 0.04) for i in range(n)])
        .then(t["collect"].s(log))
        .enqueue()
    )
    fleet = _fleet(fleets, durq_cli, wapp.url, [wapp.default_queue], concurrency=4).killing(1.0)
    try:
        assert handle.result(120) == n
    except TimeoutError:
        pytest.fail(f"no result; status {handle.status()}\n{_outputs(durq_cli)}")
    fleet.stop_killing()  # the survivors deliver what a killed courier left
    callbacks = runs(log, "callback")
    assert {c["job"] for c in callbacks} == {handle.step_id(n + 3)}  # one callback job
    assert all(c["results"] == [i * i for i in range(n)] for c in callbacks)
    ran = {r["key"] for r in runs(log) if r["key"] != "callback"}
    assert len(ran) == n
    assert fleet.kills >= 2, "the run was too short to be interrupted"
    eventually(
        lambda: leftovers(raw, [wapp.default_queue], [handle.id]) == [],
        5,
        lambda: f"leftovers {leftovers(raw, [wapp.default_queue], [handle.id])}",
    )


def test_a_5_step_chain_under_kills_runs_in_order(
    wapp: durq.App, log: str, raw: redis.Redis, durq_cli: Durq, fleets: list[KillingFleet]
) -> None:
    link = wapp.tasks["link"]
    other = f"{wapp.default_queue}-b"
    steps = [link.si([], log, "k0", 0.4)]
    steps += [
        link.options(queue=other if i % 2 else None).s(log, f"k{i}", 0.4) for i in (1, 2, 3, 4)
    ]
    handle = durq.chain(*steps).enqueue()
    queues = [wapp.default_queue, other]
    fleet = _fleet(fleets, durq_cli, wapp.url, queues, size=2).killing(0.7)
    try:
        assert handle.result(90) == [f"k{i}" for i in range(5)]
    except TimeoutError:
        pytest.fail(f"no result; status {handle.status()}\n{_outputs(durq_cli)}")
    fleet.stop_killing()  # the survivors deliver what a killed courier left
    # every run of step i saw exactly the results of steps 0..i-1, and none started
    # before the step before it had finished
    done_at: dict[str, float] = {}
    for run in runs(log):
        i = int(run["key"][1:])
        assert run["seen"] == [f"k{j}" for j in range(i)]
        done_at.setdefault(run["key"], run["time"])
    starts = [e for e in _events(log) if e["event"] == "start"]
    for start in starts:
        i = int(start["key"][1:])
        if i:
            assert start["time"] >= done_at[f"k{i - 1}"]
    eventually(lambda: leftovers(raw, queues, [handle.id]) == [], 10, "no leftovers")


def _events(log: str) -> list[dict[str, Any]]:
    import json
    from pathlib import Path

    return [json.loads(line) for line in Path(log).read_text().splitlines() if line]


def test_a_step_run_twice_counts_once(
    wapp: durq.App, log: str, raw: redis.Redis, durq_cli: Durq, fleets: list[KillingFleet]
) -> None:
    """A worker is stopped (SIGSTOP) while it runs a step; the lease runs out, another
    worker runs the step and completes it; the first one resumes and finishes too, and
    its release is refused: one count, one result."""
    t = wapp.tasks
    handle = (
        durq.group([t["slow_first"].s(log, "slow", 2.0), t["square"].si(log, 1)])
        .then(t["collect"].s(log))
        .enqueue()
    )
    first = _fleet(fleets, durq_cli, wapp.url, [wapp.default_queue], size=1)
    [holder] = first.procs
    start = eventually(
        lambda: [e for e in _events(log) if e["event"] == "start"] if os.path.exists(log) else [],
        15,
        "the slow step to start",
    )[0]
    assert start["pid"] == holder.pid
    os.kill(holder.pid, signal.SIGSTOP)
    try:
        _fleet(fleets, durq_cli, wapp.url, [wapp.default_queue], size=1)
        eventually(lambda: len([e for e in _events(log) if e["event"] == "finish"]) == 1, 15,
                   "the second run to finish")  # fmt: skip
        time.sleep(0.5)
    finally:
        os.kill(holder.pid, signal.SIGCONT)
    assert handle.result(15) == 2
    # the first run (attempt 1, in the stopped worker) finishes too; the stopped worker
    # may even have been handed the job again (a fetch it had sent before it stopped
    # ran on the server when the lease ran out), and runs that delivery as well
    eventually(
        lambda: [e for e in _events(log) if e["event"] == "finish" and e["attempt"] == 1],
        15,
        lambda: "the first run to finish as well" + _outputs(durq_cli),
    )
    # fenced: its extension or its release was refused, and it says so
    eventually(
        lambda: "lease lost on job" in holder.output() or "(LEASE_LOST)" in holder.output(),
        10,
        holder.output,
    )
    time.sleep(0.5)
    [callback] = runs(log, "callback")
    assert callback["results"] == ["slow", 1]
    finishes = [e for e in _events(log) if e["event"] == "finish"]
    assert len({e["pid"] for e in finishes}) == 2 and len({e["job"] for e in finishes}) == 1
    assert len(finishes) >= 2
    eventually(lambda: leftovers(raw, [wapp.default_queue], [handle.id]) == [], 10, "leftovers")

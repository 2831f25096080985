"""A rolling deploy, simulated with worker processes of two releases of one app
(``deploy.rolling``): v1 without task t; v2 with t, and u's signature changed at version
2 with a migration. Old and new workers share one queue, both releases enqueue jobs of
every task, workers are SIGKILLed and replaced by new ones: nothing a v2 worker can run
is dead-lettered, nothing is lost, u's version-1 jobs that v2 runs get upgraded
arguments, and no v1 worker ever runs t or a version-2 u."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import durq
from deploy.fleet import Fleet, wait_for
from deploy.rolling import build

pytestmark = [pytest.mark.slow, pytest.mark.fault]

TARGET = "deploy.rolling:app"
N = 150  # jobs of each kind


def _ledger(path: Path) -> list[tuple[str, str, int, int]]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 5:
            out.append((parts[0], parts[1], int(parts[2]), int(parts[3])))
    return out


def test_a_rolling_deploy_under_kills_dead_letters_nothing_a_new_worker_can_run_and_loses_nothing(
    tmp_path: Path, redis_url: str, queue_name: str
) -> None:
    ledger = tmp_path / "ledger"
    env = {
        "DURQ_ROLL_URL": redis_url,
        "DURQ_ROLL_QUEUE": queue_name,
        "DURQ_ROLL_LEDGER": str(ledger),
    }
    v1_env, v2_env = {"DURQ_ROLL_RELEASE": "v1"}, {"DURQ_ROLL_RELEASE": "v2"}
    old, new = build("v1", redis_url, queue_name), build("v2", redis_url, queue_name)
    queue = old.queue(queue_name)
    fleet = Fleet(tmp_path, env)
    expected: Counter[tuple[str, int]] = Counter()

    def enqueue(app: durq.App, task: str, base: int, **options: Any) -> None:
        calls = [(base + i, 7) if app is new and task == "u" else (base + i,) for i in range(N)]
        if options:
            for call in calls:
                app.tasks[task].options(**options).enqueue(*call)
        else:
            app.tasks[task].enqueue_many(calls)
        expected.update((task, base + i) for i in range(N))

    try:
        # v1 in production, with jobs of both its tasks, some of them delayed
        enqueue(old, "u", 0)
        enqueue(old, "w", 0)
        enqueue(old, "u", 1000, delay=2.0)
        v1 = [fleet.spawn(sys.executable, TARGET, [queue_name], label=f"v1-{i}", env=v1_env)
              for i in range(2)]  # fmt: skip
        for proc in v1:
            fleet.wait_ready(proc)
        # v2's producers deploy first: jobs of the new task and of u at version 2
        enqueue(new, "t", 0)
        enqueue(new, "u", 2000)
        enqueue(new, "w", 2000)
        wait_for("jobs held by v1 workers", lambda: queue.stats().held > 0, 30, fleet)
        held = queue.stats().held
        # the rollout: a v1 worker killed and replaced by a v2 one, both producers go on
        v1[0].kill()
        v2 = [fleet.spawn(sys.executable, TARGET, [queue_name], label="v2-0", env=v2_env)]
        enqueue(old, "u", 3000)
        enqueue(new, "t", 3000)
        fleet.wait_ready(v2[0])
        v1[1].kill()
        v2.append(fleet.spawn(sys.executable, TARGET, [queue_name], label="v2-1", env=v2_env))

        def done() -> bool:
            ran = {(task, seq) for _, task, seq, _ in _ledger(ledger)}
            return set(expected) <= ran

        wait_for("every job run", done, 120, fleet)
        wait_for("the queue empty", lambda: queue.stats().size == 0, 30, fleet)
        stats = queue.stats()
        assert (stats.dead, stats.held) == (0, 0), fleet.logs()
        lines = _ledger(ledger)
        ran = Counter((task, seq) for _, task, seq, _ in lines)
        assert set(ran) == set(expected)  # nothing lost, nothing else run
        duplicates = sum(n - 1 for n in ran.values())
        # a kill may run a job twice (at least once), never a job of the wrong release
        for release, task, seq, scale in lines:
            if task == "t":
                assert release == "v2"
            if task == "u" and seq >= 2000 and seq < 3000:  # version 2: only v2 runs it
                assert (release, scale) == ("v2", 7)
            if task == "u" and release == "v2" and not 2000 <= seq < 3000:
                assert scale == 10  # a version-1 job, migrated
        print(f"rolling deploy: {len(expected)} jobs, {len(lines)} runs ({duplicates} again "
              f"after a kill), {held} held at one reading while v1 ran, 0 dead")  # fmt: skip
    finally:
        fleet.close()
        old.close()
        new.close()

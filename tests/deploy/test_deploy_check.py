"""``durq deploy check NEW_MODULE:APP`` (``durq.app.deploy``): it reports exactly the
jobs, schedules and workflow steps that would fail under the new App, exits 1 when any
would and 0 on a clean deploy."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

import durq
from cli.support import durq as run
from deploy import target
from deploy.apps import Ran, v1, v2
from durq.app.deploy import deploy_check
from helpers import eventually
from worker.support import running_worker


@pytest.fixture
def old(redis_url: str, queue_name: str) -> Iterator[durq.App]:
    app = v1(redis_url, queue_name, Ran())
    yield app
    app.close()


def test_a_clean_deploy_passes_and_older_jobs_with_a_migration_are_fine(
    old: durq.App, redis_url: str, queue_name: str
) -> None:
    old.tasks["u"].enqueue_many([(i,) for i in range(5)])  # version 1, migrated by v2
    old.tasks["u"].options(delay=3600).enqueue(7)
    new = v2(redis_url, queue_name, Ran())
    try:
        report = deploy_check(new, queues=[queue_name])
        assert report.ok and report.problems == []
        assert report.jobs == 6
        target.app = new
        result = run("deploy", "check", "deploy.target:app", "-q", queue_name)
        assert result.exit_code == 0, result.output
        assert "ok: nothing would fail" in result.output
    finally:
        target.app = None
        new.close()


def test_deploy_check_reports_exactly_the_planted_problems_and_exits_one(
    old: durq.App, redis_url: str, queue_name: str
) -> None:
    queue = old.queue(queue_name)
    gone = [queue.enqueue(["gone", [i], {}]).id for i in range(3)]  # a task removed
    gone.append(queue.enqueue(["gone", [9], {}], delay=3600).id)  # waiting for its time
    bad = queue.enqueue(["t", [1, 2, 3], {}]).id  # arguments that do not bind to t(x)
    unmigrated = [old.tasks["u"].enqueue(i).id for i in range(2)]  # version 1, no migration
    queue.enqueue("a plain message, not a task call")  # not the App's: left out

    @old.task(name="nightly")
    def nightly() -> None: ...

    old.schedule("nightly-job", nightly, every=3600)
    old.sync_schedules([queue_name])

    new = v2(redis_url, queue_name, Ran(), migrate=False)
    try:
        report = deploy_check(new, queues=[queue_name], examples=10)
        found = {(p.kind, p.task): (p.count, sorted(p.examples)) for p in report.problems}
        assert found == {
            ("task_gone", "gone"): (4, sorted(gone)),
            ("bad_arguments", "t"): (1, [bad]),
            ("no_migration", "u"): (2, sorted(unmigrated)),
            ("schedule_task_gone", "nightly"): (1, ["nightly-job"]),
        }
        assert report.jobs == 8 and report.schedules == 1
        target.app = new
        result = run("deploy", "check", "deploy.target:app", "-q", queue_name, "--json")
        assert result.exit_code == 1, result.output
        doc = json.loads(result.output)
        assert doc["ok"] is False
        assert sorted((p["kind"], p["count"]) for p in doc["problems"]) == [
            ("bad_arguments", 1), ("no_migration", 2), ("schedule_task_gone", 1),
            ("task_gone", 4),
        ]  # fmt: skip
        result = run("deploy", "check", "deploy.target:app", "-q", queue_name)
        assert result.exit_code == 1 and "task_gone" in result.output
    finally:
        target.app = None
        new.close()


def test_dead_letters_and_held_jobs_are_checked_too(
    old: durq.App, redis_url: str, queue_name: str
) -> None:
    queue = old.queue(queue_name)
    dead = queue.enqueue(["gone", [], {}], max_attempts=1).id
    job = queue.dequeue(lease=30)
    assert job is not None and job.id == dead
    queue.requeue(job, dead=True)
    held = queue.enqueue(["lost", [], {}]).id  # held by a v1 worker: it has no task "lost"
    with running_worker(old):
        eventually(lambda: queue.stats().held == 1, 10)
    new = v2(redis_url, queue_name, Ran())
    try:
        report = deploy_check(new, queues=[queue_name])
        assert [(p.kind, p.task, p.examples) for p in report.problems] == [
            ("task_gone", "gone", [dead]),
            ("task_gone", "lost", [held]),
        ]
    finally:
        new.close()


def test_deploy_check_reads_every_shard_of_a_sharded_queue(redis_url: str, queue_name: str) -> None:
    old = v1(redis_url, queue_name, Ran(), shards={queue_name: 2})
    new = v2(redis_url, queue_name, Ran(), shards={queue_name: 2})
    try:
        sharded = old.sharded_queue(queue_name)
        ids = [sharded.enqueue(["gone", [i], {}]).id for i in range(10)]
        old.tasks["u"].enqueue_many([(i,) for i in range(10)])  # migrated by v2: fine
        report = deploy_check(new, queues=[queue_name], examples=20)
        assert [(p.kind, p.queue, p.count) for p in report.problems] == [
            ("task_gone", queue_name, 10)
        ]
        assert sorted(report.problems[0].examples) == sorted(ids) and report.jobs == 20
    finally:
        old.close()
        new.close()


async def test_both_front_ends_page_through_the_same_job_records(
    redis_url: str, queue_name: str
) -> None:
    with durq.Queue(queue_name, redis_url) as queue:
        ids = {r.id for r in queue.enqueue_many([{"i": i} for i in range(1200)])}
        seen_sync: set[str] = set()
        cursor = 0
        while True:
            cursor, jobs = queue.scan_jobs(cursor, 500)
            seen_sync |= {j.id for j in jobs}
            if cursor == 0:
                break
    async with durq.AsyncQueue(queue_name, redis_url) as aqueue:
        seen_async: set[str] = set()
        cursor = 0
        while True:
            cursor, jobs = await aqueue.scan_jobs(cursor, 500)
            assert all(j.state is durq.JobState.PENDING for j in jobs)
            seen_async |= {j.id for j in jobs}
            if cursor == 0:
                break
    assert seen_sync == seen_async == ids


def test_a_workflow_step_not_started_whose_task_is_gone_is_reported(
    old: durq.App, redis_url: str, queue_name: str
) -> None:
    new = v2(redis_url, queue_name, Ran())
    try:
        handle = durq.chain(new.tasks["u"].si(1, 2), new.tasks["t"].si(2)).enqueue()
        # checked against a release without t, whose u is at version 1 (a rollback)
        report = deploy_check(old, queues=[queue_name])
        found = {(p.kind, p.task): p.count for p in report.problems}
        assert found == {("step_task_gone", "t"): 1, ("no_migration", "u"): 1}
        (step,) = [p for p in report.problems if p.kind == "step_task_gone"]
        assert step.examples == [handle.id]
        assert report.workflows == 1
    finally:
        new.close()

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
    new = v2(redis_url, queue_name, Ran())
    try:
        report = deploy_check(new, queues=[queue_name])
        assert [(p.kind, p.task, p.examples) for p in report.problems] == [
            ("task_gone", "gone", [dead])
        ]
    finally:
        new.close()

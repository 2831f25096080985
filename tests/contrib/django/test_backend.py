"""DurqBackend in this process (Django 5.2 + django-tasks here), without a worker: what a
call becomes in durq, validation at the edge, checks, results of jobs not yet run."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import durq
from contrib.django.projects import django52_env

django = pytest.importorskip("django")


@pytest.fixture(scope="module")
def configured(redis_url: str) -> Iterator[dict[str, Any]]:
    """Django configured in this process: sqlite in memory, durq on the shared server."""
    django52_env()  # skipped (failed under CI) without Django 5.2 and django-tasks
    from django.conf import settings

    tasks = {
        "default": {
            "BACKEND": "durq.contrib.django.DurqBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {"url": redis_url, "namespace": f"dj-{secrets.token_hex(4)}"},
        }
    }
    if not settings.configured:
        settings.configure(
            INSTALLED_APPS=["durq.contrib.django"],
            DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
            TASKS=tasks,
            USE_TZ=True,
        )
        django.setup()
    yield tasks


@pytest.fixture
def backend(configured: dict[str, Any]) -> Any:
    from durq.contrib.django.compat import task_backends

    return task_backends["default"]


@pytest.fixture
def tasks(configured: dict[str, Any]) -> Any:
    from contrib.django import inproc_tasks

    return inproc_tasks


def test_priority_maps_onto_durqs_scale() -> None:
    from durq.contrib.django import durq_priority

    mapped = {p: durq_priority(p) for p in (-100, -55, -15, -5, -4, 0, 4, 5, 14, 15, 99, 100)}
    assert mapped == {-100: -10, -55: -6, -15: -2, -5: -1, -4: 0, 0: 0, 4: 0, 5: 1,
                      14: 1, 15: 2, 99: 10, 100: 10}  # fmt: skip


def test_a_call_becomes_a_durq_job_with_its_options(backend: Any, tasks: Any) -> None:
    later = tasks.greet_later.using(
        queue_name="emails",
        run_after=django.utils.timezone.now() + timedelta(seconds=60),
        group="tenant-7",
        key="greet-ada",
    )
    result = later.enqueue("ada")
    assert result.status == "READY" and result.id.startswith("emails:")
    info = backend.durq_app.queue("emails").job(result.id)
    assert info.state is durq.JobState.DELAYED
    assert 55 < info.due_at - info.enqueued_at <= 60
    assert (info.priority, info.group, info.key) == (5, "tenant-7", "greet-ada")
    assert info.max_attempts == 2

    # the pending job holds the key: a second call gets its result back
    assert later.enqueue("ada").id == result.id

    found = tasks.greet_later.get_result(result.id)
    assert found.status == "READY"
    assert found.args == ["ada"]
    assert found.enqueued_at is not None and found.started_at is None
    assert found.task.queue_name == "emails"
    assert (found.task.priority, found.task.group) == (50, "tenant-7")
    assert found.task.run_after == later.run_after


def test_a_call_can_carry_an_expiry(backend: Any, tasks: Any) -> None:
    result = tasks.greet.using(queue_name="emails", expires=30).enqueue("ada")
    info = backend.durq_app.queue("emails").job(result.id)
    assert info is not None and info.expires_at is not None
    assert 25 < info.expires_at - info.enqueued_at <= 30


def test_bad_calls_fail_at_enqueue(tasks: Any) -> None:
    from durq.contrib.django.compat import InvalidTask

    with pytest.raises(InvalidTask, match="Queue 'reports' is not valid"):
        tasks.greet.using(queue_name="reports")
    with pytest.raises(InvalidTask, match="max_attempts"):
        tasks.greet.using(max_attempts=0)
    with pytest.raises(InvalidTask, match="expires must be"):
        tasks.greet.using(expires=-1)
    with pytest.raises(InvalidTask, match="group must be"):
        tasks.greet.using(group="")
    with pytest.raises(TypeError, match=r"inproc_tasks.greet\(\): missing a required"):
        tasks.greet.enqueue()
    with pytest.raises(TypeError, match="Unsupported type"):
        tasks.greet.enqueue({1, 2})


def test_unknown_and_missing_results(backend: Any, tasks: Any) -> None:
    from durq.contrib.django.compat import TaskResultDoesNotExist

    for result_id in ("default:nope", "nope", "reports:nope", "default:"):
        with pytest.raises(TaskResultDoesNotExist):
            backend.get_result(result_id)


def test_check_reports_configuration_problems(configured: dict[str, Any]) -> None:
    from durq.contrib.django import DurqBackend

    bad = DurqBackend("bad", {"QUEUES": ["ok", "not ok"], "OPTIONS": {"urll": "x"}})
    messages = list(bad.check())
    assert [m.id for m in messages] == ["durq.E001", "durq.E001"]
    assert "unknown OPTIONS ['urll']" in messages[0].msg
    assert "invalid queue name 'not ok'" in messages[1].msg
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured):
        bad.durq_app  # noqa: B018

    from django.test import override_settings

    with override_settings(INSTALLED_APPS=[]):
        good = DurqBackend("good", {"OPTIONS": {}})
        assert [m.id for m in good.check()] == ["durq.W001"]


def test_enqueue_on_commit_for_durqs_own_tasks(configured: dict[str, Any], redis_url: str) -> None:
    from django.db import transaction

    from durq.contrib.django import enqueue_on_commit

    app = durq.App(redis_url, namespace=configured["default"]["OPTIONS"]["namespace"])
    ping = app.task(queue="native")(_ping)
    queue = app.queue("native")
    try:
        with transaction.atomic():
            job_id = enqueue_on_commit(ping, 1)
            assert queue.job(job_id) is None  # not before the commit
        assert getattr(queue.job(job_id), "state", None) is durq.JobState.PENDING

        with pytest.raises(RuntimeError), transaction.atomic():
            rolled_back = enqueue_on_commit(ping.options(id="rolled-back"), 2)
            raise RuntimeError
        assert rolled_back == "rolled-back" and queue.job("rolled-back") is None

        with pytest.raises(durq.InvalidArgument), transaction.atomic():
            enqueue_on_commit(ping, 1, 2)  # refused in the request, not after the commit
    finally:
        app.close()


def _ping(n: int) -> int:
    return n


def test_a_job_naming_any_module_imports_nothing_in_get_result_or_the_worker(
    backend: Any, tasks: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio
    import sys

    from durq.contrib.django.compat import TaskResultDoesNotExist
    from durq.worker import Worker, WorkerConfig

    # a module on the path with an import side effect, as `this` has (it prints a poem)
    marker = tmp_path / "imported"
    (tmp_path / "planted_module.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    app = backend.durq_app
    queue = app.queue("default")
    ids = {}
    for path in ("planted_module.anything", "this.s", "contrib.django.inproc_tasks.greet"):
        ids[path] = f"default:{secrets.token_urlsafe(12)}"
        call = [path, ["ada"], {}, {"backend": "default"}]  # what any Redis writer can write
        queue.enqueue(["django", call, {}], id=ids[path])

    # the web process reads a pending job's path
    for path in ("planted_module.anything", "this.s"):
        with pytest.raises(TaskResultDoesNotExist, match="not a task of this project"):
            backend.get_result(ids[path])
    assert backend.get_result(ids["contrib.django.inproc_tasks.greet"]).status == "READY"
    # the worker runs the jobs
    config = WorkerConfig(queues=["default"], burst=True)
    asyncio.run(Worker(app, config, handle_signals=False).run())

    for path in ("planted_module.anything", "this.s"):
        info = queue.job(ids[path])
        assert info is not None and info.state is durq.JobState.DEAD
        assert info.reason is not None and "not a task of this project" in info.reason["message"]
        assert info.attempts == 1  # durq.Fail: not retried
    assert tasks.greet.get_result(ids["contrib.django.inproc_tasks.greet"]).return_value == (
        "hello ada"
    )
    assert not marker.exists()
    assert "planted_module" not in sys.modules and "this" not in sys.modules


def test_the_worker_logs_a_django_job_by_its_tasks_path_and_queue(
    backend: Any, caplog: pytest.LogCaptureFixture
) -> None:
    import asyncio
    import logging

    from durq.worker import Worker, WorkerConfig

    app = backend.durq_app
    name = f"logs-{secrets.token_hex(4)}"  # a queue of its own: the burst ends at once
    job_id = f"{name}:{secrets.token_urlsafe(12)}"
    call = ["contrib.django.no_such_module.send", [], {}, {"backend": "default"}]
    app.queue(name).enqueue(["django", call, {}], id=job_id)
    caplog.set_level(logging.DEBUG, logger="durq.worker")
    config = WorkerConfig(queues=[name], burst=True)
    asyncio.run(Worker(app, config, handle_signals=False).run())

    lines = [r.getMessage() for r in caplog.records if job_id in r.getMessage()]
    named = f"job {job_id} (contrib.django.no_such_module.send) of {name} "
    assert any(line.startswith(named + "started") for line in lines), lines
    assert any(line.startswith(named + "dead-lettered") for line in lines), lines
    assert not any("(django" in line for line in lines), lines

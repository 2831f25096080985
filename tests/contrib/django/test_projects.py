"""A fresh Django project (``django-admin startproject``) with durq as its TASKS backend,
on Django 5.2 + django-tasks and on Django 6: a view enqueues, a real durq_worker runs
the task against the project's own model, and Django's API reads the outcome."""

from __future__ import annotations

from contrib.django.projects import Project


def test_a_view_enqueues_and_the_worker_runs_the_task(django_project: Project) -> None:
    found = django_project.drive("view")
    assert found["http"] == 200
    assert found["enqueued_status"] == "READY"
    result = found["result"]
    assert result["status"] == "SUCCESSFUL", django_project.worker_log()
    assert result["return_value"] == {"order": result["args"][0], "item": "book"}
    assert result["task"] == "shop.tasks.fulfil"
    assert found["order_status"] == "fulfilled"  # the worker wrote the app's own model
    assert result["attempts"] == 1 and len(result["worker_ids"]) == 1
    assert result["errors"] == []
    assert all(result["times"]) and result["ordered"]
    # task_enqueued in the web process; task_started and task_finished in the worker
    # (which may start the task before the web process has logged its signal)
    signals = found["signals"]
    assert ["enqueued", "READY", 0] in signals
    assert [s for s in signals if s[0] != "enqueued"] == [
        ["started", "RUNNING", 1],
        ["finished", "SUCCESSFUL", 1],
    ]


def test_a_failing_task_ends_failed_with_its_error(django_project: Project) -> None:
    found = django_project.drive("failed")
    result = found["result"]
    assert result["status"] == "FAILED"
    assert result["return_value_error"] == "Task failed"
    [(path, traceback)] = result["errors"]
    assert path == "shop.tasks.OutOfStock"
    assert "raise OutOfStock" in traceback
    assert traceback.rstrip().endswith("shop.tasks.OutOfStock: no kite left")
    assert result["attempts"] == 1 and all(result["times"])
    # the web process may log task_enqueued after the worker's signals (see above)
    worker_signals = [s for s in found["signals"] if s[0] != "enqueued"]
    assert worker_signals[-1] == ["finished", "FAILED", 1]


def test_a_task_that_fails_once_is_retried_and_keeps_its_error(
    django_project: Project,
) -> None:
    found = django_project.drive("retried")
    result = found["result"]
    assert result["status"] == "SUCCESSFUL"
    assert result["return_value"] == 42
    assert result["attempts"] == 2 and len(result["worker_ids"]) == 2
    [(path, traceback)] = result["errors"]
    assert path == "builtins.ConnectionError" and "attempt 1 fails" in traceback
    # started twice (once per attempt), finished once
    assert sorted(s[0] for s in found["signals"]) == ["enqueued", "finished", "started", "started"]
    worker_signals = [s for s in found["signals"] if s[0] != "enqueued"]
    assert worker_signals[-1] == ["finished", "SUCCESSFUL", 2]


def test_async_tasks_and_the_async_api(django_project: Project) -> None:
    found = django_project.drive("async")
    assert found["result"]["status"] == "SUCCESSFUL"
    assert found["result"]["return_value"] == 5
    assert found["aget_result"] == "SUCCESSFUL"


def test_enqueue_on_commit_enqueues_one_job_after_the_commit(django_project: Project) -> None:
    found = django_project.drive("on_commit")
    assert found["view"]["status"] == "READY"
    assert found["view"]["visible_before_commit"] == "TaskResultDoesNotExist"
    assert found["result"]["id"] == found["view"]["result_id"]  # the id given at call time
    assert found["result"]["status"] == "SUCCESSFUL"
    assert found["enqueued"] == 1


def test_a_commit_hook_run_twice_still_enqueues_once(django_project: Project) -> None:
    found = django_project.drive("hook_twice")
    assert found == {"status": "SUCCESSFUL", "enqueued": 1}


def test_enqueue_on_commit_enqueues_nothing_on_rollback(django_project: Project) -> None:
    found = django_project.drive("rollback")
    assert found["view"]["rolled_back"] is True
    assert found["after_rollback"] == "TaskResultDoesNotExist"
    assert found["enqueued"] == 0
    assert found["orders_added"] == 0


def test_the_backend_contract(django_project: Project) -> None:
    found = django_project.drive("contract")
    assert found["flags"] == [True, True, True, True]
    assert found["checks"] == []
    assert set(found["invalid"].values()) == {"InvalidTask"} or set(found["invalid"].values()) == {
        "InvalidTaskError"
    }
    assert found["missing"] == "TaskResultDoesNotExist"
    assert "Unsupported type" in found["bad_argument"]
    assert found["bad_arity"].startswith("shop.tasks.fulfil(): ")

"""Run one scenario in this Django project and print its findings as one JSON line:
``python drive.py SCENARIO``. A durq_worker runs beside it."""

import asyncio
import json
import os
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "proj.settings")

import django

django.setup()

from django.db import transaction  # noqa: E402
from django.test import Client  # noqa: E402
from shop.models import Order, SignalLog  # noqa: E402
from shop.tasks import add, explode, flaky, fulfil  # noqa: E402

from durq.contrib.django.compat import (  # noqa: E402
    InvalidTask,
    TaskResultDoesNotExist,
    task_backends,
)

backend = task_backends["default"]


def wait_finished(task, result_id, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        result = task.get_result(result_id)
        if result.is_finished or time.monotonic() > deadline:
            return result
        time.sleep(0.05)


def signals_of(result_id, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        rows = list(SignalLog.objects.filter(result_id=result_id).order_by("id"))
        if any(r.signal == "finished" for r in rows) or time.monotonic() > deadline:
            return [[r.signal, r.status, r.attempts] for r in rows]
        time.sleep(0.05)


def describe(result):
    out = {
        "id": result.id,
        "status": str(result.status),
        "attempts": result.attempts,
        "worker_ids": result.worker_ids,
        "errors": [[e.exception_class_path, e.traceback] for e in result.errors],
        "args": result.args,
        "times": [
            t is not None
            for t in (
                result.enqueued_at,
                result.started_at,
                result.last_attempted_at,
                result.finished_at,
            )
        ],
        "ordered": bool(
            result.enqueued_at
            and result.finished_at
            and result.enqueued_at <= result.started_at <= result.finished_at
        ),
        "task": result.task.module_path,
    }
    try:
        out["return_value"] = result.return_value
    except ValueError as exc:
        out["return_value_error"] = str(exc)
    return out


def enqueued():
    return backend.durq_app.queue("default").stats().enqueued


def scenario_view():
    response = Client().post("/orders/", {"item": "book"})
    body = response.json()
    result = wait_finished(fulfil, body["result_id"])
    return {
        "http": response.status_code,
        "enqueued_status": body["status"],
        "result": describe(result),
        "order_status": Order.objects.get(pk=body["order"]).status,
        "signals": signals_of(result.id),
    }


def scenario_failed():
    result = wait_finished(explode, explode.enqueue("kite").id)
    return {"result": describe(result), "signals": signals_of(result.id)}


def scenario_retried():
    result = wait_finished(flaky, flaky.enqueue(21).id)
    return {"result": describe(result), "signals": signals_of(result.id)}


def scenario_async():
    async def go():
        result = await add.aenqueue(2, 3)
        deadline = time.monotonic() + 30
        while not result.is_finished and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
            await result.arefresh()
        again = await add.aget_result(result.id)
        return describe(result), str(again.status)

    result, again = asyncio.run(go())
    return {"result": result, "aget_result": again}


def scenario_on_commit():
    before = enqueued()
    response = Client().post("/orders/on-commit/", {"item": "lamp"})
    body = response.json()
    result = wait_finished(fulfil, body["result_id"])
    return {"view": body, "result": describe(result), "enqueued": enqueued() - before}


def scenario_hook_twice():
    from django.db import connection

    before = enqueued()
    with transaction.atomic():
        order = Order.objects.create(item="pen")
        result = fulfil.enqueue_on_commit(order.id)
        hook = connection.run_on_commit[-1][1]
    hook()  # a hook delivered twice (a retry after a timeout, say)
    done = wait_finished(fulfil, result.id)
    return {"status": str(done.status), "enqueued": enqueued() - before}


def scenario_rollback():
    before, orders = enqueued(), Order.objects.count()
    body = Client().post("/orders/on-commit/", {"item": "lamp", "rollback": "1"}).json()
    time.sleep(0.5)
    try:
        fulfil.get_result(body["result_id"])
        after = "exists"
    except TaskResultDoesNotExist:
        after = "TaskResultDoesNotExist"
    return {
        "view": body,
        "after_rollback": after,
        "enqueued": enqueued() - before,
        "orders_added": Order.objects.count() - orders,
    }


def scenario_contract():
    out = {
        "flags": [
            backend.supports_defer,
            backend.supports_async_task,
            backend.supports_get_result,
            backend.supports_priority,
        ],
        "checks": [m.id for m in backend.check()],
    }
    problems = {}
    for name, change in {
        "queue": {"queue_name": "not a queue"},
        "priority": {"priority": 101},
        "group": {"group": "bad\ngroup"},
        "max_attempts": {"max_attempts": 0},
    }.items():
        try:
            fulfil.using(**change)
            problems[name] = "accepted"
        except InvalidTask as exc:
            problems[name] = type(exc).__name__
    out["invalid"] = problems
    try:
        backend.get_result("default:no-such-result")
        out["missing"] = "found"
    except TaskResultDoesNotExist:
        out["missing"] = "TaskResultDoesNotExist"
    try:
        fulfil.enqueue(object())
    except TypeError as exc:
        out["bad_argument"] = str(exc)
    try:
        fulfil.enqueue(1, 2)
    except TypeError as exc:
        out["bad_arity"] = str(exc)
    return out


def scenario_enqueue_slow():
    from shop.tasks import slow

    return {"id": slow.enqueue(float(sys.argv[2])).id}


def scenario_enqueue_many():
    return {"ids": [add.enqueue(i, i).id for i in range(int(sys.argv[2]))]}


def scenario_results():
    return {"results": [describe(add.get_result(i)) for i in sys.argv[2:]]}


def scenario_wait_running():
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        status = str(backend.get_result(sys.argv[2]).status)
        if status != "READY":
            return {"status": status}
        time.sleep(0.02)
    return {"status": "READY"}


def scenario_wait():
    from shop.tasks import slow

    return describe(wait_finished(slow, sys.argv[2]))


if __name__ == "__main__":
    print(json.dumps(globals()[f"scenario_{sys.argv[1]}"]()))

"""Redis ACL users with the minimal rules for a producer and a worker."""

from __future__ import annotations

import asyncio
import re

import pytest
import redis

import durq
from durq import lua
from durq.dev.server import RedisServer
from durq.worker import Worker, WorkerConfig
from worker.support import running_worker

from .acl_rules import ADMIN, PRODUCER, SCRIPT_COMMANDS, WORKER
from .users import acl_user as _user
from .users import command as _command
from .users import denials


def test_a_producer_and_a_worker_with_minimal_acl_users_process_jobs(
    server: RedisServer, queue_name: str
) -> None:
    # the admin loads the library (the documented users may not): then nothing they
    # send is refused, not even once
    from cli.support import durq as run

    admin_url = _user(server.url, "durq-admin", ADMIN, "a-secret-1")
    loaded = run("functions", "load", "--url", admin_url)
    assert loaded.exit_code == 0, loaded.output
    producer_url = _user(server.url, "durq-producer", PRODUCER, "p-secret-1")
    worker_url = _user(server.url, "durq-worker", WORKER, "w-secret-1")
    producer = durq.App(producer_url)
    done: list[int] = []

    @producer.task(queue=queue_name, result=True)
    def double(x: int) -> int:
        done.append(x)
        return 2 * x

    handles = double.enqueue_many([(i,) for i in range(5)])
    worker_app = durq.App(worker_url)
    worker_app.tasks = producer.tasks
    asyncio.run(Worker(worker_app, WorkerConfig(queues=[queue_name], burst=True),
                       handle_signals=False).run())  # fmt: skip
    assert sorted(done) == list(range(5))
    assert handles[3].result(timeout=2) == 6
    producer.close()
    worker_app.close()
    assert denials(server.url, "durq-producer", "durq-worker", "durq-admin") == []


def test_a_workflow_runs_and_is_read_with_minimal_acl_users(
    server: RedisServer, queue_name: str
) -> None:
    """Workflows across two slots (outbox entries, numbered starts), their status and a
    cancel, with the documented rules only."""
    from cli.support import durq as run

    admin_url = _user(server.url, "durq-admin", ADMIN, "a-secret-1")
    assert run("functions", "load", "--url", admin_url).exit_code == 0
    producer_url = _user(server.url, "durq-producer-wf", PRODUCER, "p-secret-3")
    worker_url = _user(server.url, "durq-worker-wf", WORKER, "w-secret-3")
    producer = durq.App(producer_url)
    other = f"{queue_name}-b"

    @producer.task(queue=queue_name)
    def square(x: int) -> int:
        return x * x

    @producer.task(queue=other)
    def total(values: list[int]) -> int:
        return sum(values)

    handle = durq.group([square.s(i) for i in range(4)]).then(total.s()).enqueue()
    stopped = durq.group([square.s(i) for i in range(3)]).then(total.s()).enqueue()
    assert stopped.cancel() is durq.CancelStatus.CANCELLED
    worker_app = durq.App(worker_url)
    worker_app.tasks = producer.tasks
    with running_worker(worker_app, queues=[queue_name, other]):
        assert handle.result(timeout=10) == 14
    info, gone = handle.status(), stopped.status()
    assert info is not None and info.state == "completed"
    assert gone is not None and gone.counts == {"cancelled": 4}
    producer.close()
    worker_app.close()
    assert denials(server.url, "durq-producer-wf", "durq-worker-wf") == []


def test_the_producer_user_cannot_touch_keys_outside_durq(
    server: RedisServer, queue_name: str
) -> None:
    url = _user(server.url, "durq-producer-2", PRODUCER, "p-secret-2")
    client = redis.Redis.from_url(url)
    try:
        with pytest.raises(redis.exceptions.NoPermissionError):
            client.set("not-durq", "x")
        with pytest.raises(redis.exceptions.NoPermissionError):
            _command(client, "FLUSHALL")
    finally:
        client.close()


def test_a_wrong_password_fails_clearly_without_echoing_it(
    server: RedisServer, queue_name: str
) -> None:
    host_port = server.url.split("//", 1)[1].split("/", 1)[0]
    with (
        durq.Queue(queue_name, f"redis://nobody:wrong-pass-xyz@{host_port}/0") as q,
        pytest.raises(redis.exceptions.RedisError) as info,
    ):
        q.stats()
    assert "wrong-pass-xyz" not in str(info.value)


def test_every_command_a_script_calls_is_in_the_documented_rules() -> None:
    # scripts run with the caller's permissions: a command missing from the rules fails
    # only under ACL, in production, so the rules are checked against the Lua source
    code = "\n".join(lua._read(name) for name in [*lua.SCRIPT_NAMES, *lua.lib_names()])
    called = {c.lower() for c in re.findall(r"redis\.p?call\('([A-Za-z]+)'", code)}
    allowed = {rule[1:] for rule in SCRIPT_COMMANDS.split()}
    assert called - allowed == set()


def test_doctor_works_for_a_worker_user_without_config_or_function_list(
    server: RedisServer, queue_name: str
) -> None:
    # what doctor cannot read (CONFIG GET, FUNCTION LIST) it leaves out; it never fails
    from cli.support import durq as run

    url = _user(server.url, "doctor", WORKER.replace("+config|get ", ""), "doctor-pw")
    with durq.Queue(queue_name, url) as q:
        q.enqueue("a job")
    result = run("doctor", queue_name, "--url", url)
    assert result.exit_code in (0, 1), result.output
    assert "functions prune" not in result.output


def test_the_holding_area_and_the_health_endpoint_work_with_minimal_acl_users(
    server: RedisServer, queue_name: str
) -> None:
    """A worker holds a job of a task it does not run, a capable one takes it back, and
    /scale.json reads the queue, with the documented rules only."""
    import httpx

    from deploy.apps import Ran, v1, v2
    from helpers import eventually

    admin_url = _user(server.url, "durq-admin", ADMIN, "a-secret-1")
    from cli.support import durq as run

    assert run("functions", "load", "--url", admin_url).exit_code == 0
    producer_url = _user(server.url, "durq-producer-hold", PRODUCER, "p-secret-4")
    worker_url = _user(server.url, "durq-worker-hold", WORKER, "w-secret-4")
    ran = Ran()
    producer = v2(producer_url, queue_name, ran)
    old, new = v1(worker_url, queue_name, ran), v2(worker_url, queue_name, ran)
    try:
        producer.tasks["t"].enqueue(1)
        with running_worker(old, health_port=0) as worker:
            eventually(lambda: old.queue(queue_name).stats().held == 1, 10)
            assert worker.health is not None
            doc = httpx.get(f"http://127.0.0.1:{worker.health.port}/scale.json").json()
            assert doc["held"] == 1
        with running_worker(new):
            eventually(lambda: ran.of("t") == [("v2", (1,))], 10)
    finally:
        for app in (producer, old, new):
            app.close()
    assert denials(server.url, "durq-producer-hold", "durq-worker-hold") == []

"""The worker registry: live workers with their jobs in hand; dead workers drop out."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator

import pytest

import durq
from durq.dev.server import RedisServer
from durq.transport import connection
from durq.worker.registry import list_workers
from helpers import eventually
from worker.apps import build
from worker.support import Durq, ExecLog


@pytest.fixture
def server(make_server: Callable[..., RedisServer]) -> RedisServer:
    """A private server, so that only this test's workers are registered there."""
    return make_server()


@pytest.fixture
def listed(server: RedisServer) -> Iterator[Callable[[], list[dict[str, object]]]]:
    client = connection.sync_client(server.url)
    yield lambda: list_workers(client)
    client.close()


def test_durq_workers_lists_a_live_worker_with_the_jobs_in_its_hands(
    server: RedisServer,
    listed: Callable[[], list[dict[str, object]]],
    exec_log: ExecLog,
    queue_name: str,
    durq_cli: Durq,
) -> None:
    app = build(server.url, default_queue=queue_name)
    worker = durq_cli.worker(server.url, queue_name, args=("-c", "1", "--prefetch", "1"))
    worker.expect_output("consuming", 15)
    running, waiting = app.enqueue_calls(
        [
            app.tasks["stalls_first"].call(str(exec_log), "long", 30.0),
            app.tasks["work"].call(str(exec_log), "next"),
        ]
    )
    eventually(lambda: [w.get("in_hand") for w in listed()] == [2], 10, durq_cli.outputs)

    (entry,) = listed()
    assert str(entry["id"]).split(":")[1] == str(worker.pid)
    assert entry["queues"] == [queue_name]
    shown = durq_cli.run("workers", "--url", server.url)
    assert shown.code == 0, shown
    assert "1 live worker" in shown.stdout
    assert entry["version"] == durq.__version__ and durq.__version__ in shown.stdout
    assert f":{worker.pid}:" in shown.stdout
    rows = {
        cells[2]: cells for cells in map(str.split, shown.stdout.splitlines()) if len(cells) == 6
    }
    assert rows[running.id] == [entry["id"], queue_name, running.id, "stalls_first", "1", "running"]
    assert rows[waiting.id] == [entry["id"], queue_name, waiting.id, "work", "1", "waiting"]
    app.close()


@pytest.mark.fault
def test_a_killed_busy_worker_drops_out_of_the_registry_within_three_heartbeats(
    server: RedisServer,
    listed: Callable[[], list[dict[str, object]]],
    queue_name: str,
    durq_cli: Durq,
    exec_log: ExecLog,
) -> None:
    # a worker with a job in hand beats every heartbeat (an idle one every
    # IDLE_HEARTBEAT, and stays listed three of those: test_idle_promises.py)
    doomed = durq_cli.worker(server.url, queue_name)  # heartbeat 0.2 s
    eventually(lambda: len(listed()) == 1, 15, durq_cli.outputs)
    app = build(server.url, default_queue=queue_name)
    app.tasks["work"].enqueue(str(exec_log), "busy", 60.0)
    eventually(lambda: exec_log.count("start") == 1, 15, durq_cli.outputs)
    app.close()
    survivor = durq_cli.worker(server.url, queue_name)
    eventually(lambda: len(listed()) == 2, 15, durq_cli.outputs)

    doomed.send(signal.SIGKILL)
    doomed.wait(5)
    eventually(lambda: len(listed()) == 1, 3, "the dead worker's entry to expire")

    (entry,) = listed()
    assert str(entry["id"]).split(":")[1] == str(survivor.pid)
    with connection.sync_client(server.url) as client:
        assert client.scard("durq:workers") == 1  # its id was pruned too
    shown = durq_cli.run("workers", "--url", server.url)
    assert f":{doomed.pid}:" not in shown.stdout
    assert f":{survivor.pid}:" in shown.stdout


def test_a_worker_that_stops_cleanly_unregisters_at_once(
    server: RedisServer,
    listed: Callable[[], list[dict[str, object]]],
    queue_name: str,
    durq_cli: Durq,
) -> None:
    worker = durq_cli.worker(server.url, queue_name, args=("--heartbeat", "30"))
    eventually(lambda: len(listed()) == 1, 15, durq_cli.outputs)
    worker.send(signal.SIGTERM)
    assert worker.wait(10) == 0
    assert listed() == []
    assert "0 live workers" in durq_cli.run("workers", "--url", server.url).stdout

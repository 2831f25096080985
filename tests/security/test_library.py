"""durq's Functions library cannot be swapped (issue 31).

A function runs with the permissions of whoever calls it, and durq's library and function
names are fixed and public. Here a Redis user allowed FUNCTION LOAD (as durq's documented
producer was), but refused the application's keys, loads code of its own under durq's
names, and an operator's ``stats()`` would copy an application key into durq's keys for
it. durq must read the library back before calling it and refuse a foreign one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import redis

import durq
from durq.dev.server import RedisServer
from durq.lua.functions import library
from helpers import script_calls

from .acl_rules import ADMIN, PRODUCER, WORKER
from .users import acl_user, command, denials

# a user allowed FUNCTION LOAD: durq's documented producer before issue 31
ATTACKER = PRODUCER + " +function|load"
SECRET_KEY = "app:secret"  # an application key outside durq's namespace
LOOT_KEY = "durq:loot"  # where the attacker's code copies it: a key the attacker may read


def _evil(name: str, functions: list[str]) -> str:
    """A library called ``name`` registering ``functions``: each copies SECRET_KEY into
    LOOT_KEY, with the caller's permissions, then fails like a broken call."""
    body = (
        "function(keys, args)\n"
        f"  local v = redis.call('GET', '{SECRET_KEY}')\n"
        f"  if v then redis.call('SET', '{LOOT_KEY}', v) end\n"
        "  return redis.error_reply('ERR the call failed')\nend"
    )
    return f"#!lua name={name}\n" + "".join(
        f"redis.register_function('{f}', {body})\n" for f in functions
    )


def _prepare(server: RedisServer) -> redis.Redis:
    """The application's secret, and an attacker who cannot read it; the attacker's
    client."""
    admin = redis.Redis.from_url(server.url)
    admin.set(SECRET_KEY, "s3cr3t")
    admin.close()
    attacker = redis.Redis.from_url(acl_user(server.url, "mallory", ATTACKER, "m-pw"))
    with pytest.raises(redis.exceptions.NoPermissionError):
        attacker.get(SECRET_KEY)
    return attacker


async def _operator_stats(server: RedisServer, queue: str, front: str) -> None:
    """``stats()`` as the operator (the default user, allowed everything)."""
    if front == "sync":
        with durq.Queue(queue, server.url) as q:
            q.stats()
    else:
        aq = durq.AsyncQueue(queue, server.url)
        try:
            await aq.stats()
        finally:
            await aq.aclose()


def _library_names(server: RedisServer) -> list[str]:
    admin = redis.Redis.from_url(server.url)
    try:
        listed = admin.function_list()
        names = (e[b"library_name"] if isinstance(e, dict) else e[1] for e in listed)
        return sorted(name.decode() for name in names)
    finally:
        admin.close()


@pytest.mark.parametrize("front", ["sync", "async"])
@pytest.mark.parametrize("holder", ["durqs-name", "another-name"])
async def test_an_operator_does_not_run_code_another_user_loaded_under_durqs_names(
    make_server: Callable[..., RedisServer], queue_name: str, front: str, holder: str
) -> None:
    """The attacker loads first (a new server, or after FUNCTION FLUSH or an empty
    restart): a library of durq's name, or one of another name that registers durq's
    function names. Either way the operator's call must not run it."""
    server = make_server("valkey")
    attacker = _prepare(server)
    lib = library()
    name = lib.name if holder == "durqs-name" else "innocent"
    attacker.function_load(_evil(name, list(lib.functions.values())))

    refused: Exception | None = None
    try:
        await _operator_stats(server, queue_name, front)
    except Exception as exc:
        refused = exc
    assert attacker.get(LOOT_KEY) is None  # nothing of the attacker's ran
    assert isinstance(refused, durq.ForeignLibrary), refused
    assert lib.name in str(refused)
    assert "durq functions load" in str(refused)
    if holder == "another-name":
        assert "innocent" in str(refused)
    attacker.close()


def test_an_admin_load_refuses_a_foreign_library_and_replaces_it_when_told(
    make_server: Callable[..., RedisServer], queue_name: str
) -> None:
    from cli.support import durq as run

    server = make_server("valkey")
    attacker = _prepare(server)
    lib = library()
    attacker.function_load(_evil(lib.name, list(lib.functions.values())))
    admin_url = acl_user(server.url, "durq-admin", ADMIN, "a-pw")

    refused = run("functions", "load", "--url", admin_url)
    assert refused.exit_code != 0
    assert "not durq's own" in refused.output
    replaced = run("functions", "load", "--replace", "--url", admin_url)
    assert replaced.exit_code == 0, replaced.output
    with durq.Queue(queue_name, server.url) as q:
        assert q.stats().pending == 0  # durq's own code now
    assert attacker.get(LOOT_KEY) is None
    again = run("functions", "load", "--url", admin_url)
    assert "already loaded, and its code is this durq version's" in again.output
    # the admin's other commands: list and prune
    assert run("functions", "list", "--url", admin_url).exit_code == 0
    assert run("functions", "prune", "--yes", "--url", admin_url).exit_code == 0
    assert denials(server.url, "durq-admin") == []
    attacker.close()


@pytest.mark.parametrize("rule", [PRODUCER, WORKER], ids=["producer", "worker"])
def test_the_documented_users_cannot_load_replace_or_remove_a_library(
    make_server: Callable[..., RedisServer], rule: str
) -> None:
    """What closes the window between durq's check and its calls: only the admin may
    change the server's Functions."""
    server = make_server("valkey")
    lib = library()
    admin = redis.Redis.from_url(server.url)
    admin.function_load(lib.source)
    dump = admin.function_dump()
    admin.close()
    client = redis.Redis.from_url(acl_user(server.url, "durq-user", rule, "u-pw"))
    evil = _evil(lib.name, list(lib.functions.values()))
    try:
        for args in (
            ("FUNCTION", "LOAD", "REPLACE", evil),
            ("FUNCTION", "LOAD", _evil("other", ["x"])),
            ("FUNCTION", "DELETE", lib.name),
            ("FUNCTION", "FLUSH"),
            ("FUNCTION", "RESTORE", dump, "REPLACE"),
        ):
            with pytest.raises(redis.exceptions.NoPermissionError):
                command(client, *args)
        # and may check the library: FUNCTION LIST is theirs
        assert command(client, "FUNCTION", "LIST", "LIBRARYNAME", lib.name)
    finally:
        client.close()


def test_documented_users_run_with_evalsha_until_the_admin_loads_the_library(
    make_server: Callable[..., RedisServer], queue_name: str
) -> None:
    """The library missing (a new server, a deploy of a new durq version, an empty
    restart), the documented users fall back to EVALSHA: scripts addressed by the hash
    of their text, which no one can swap. Once the admin loaded it, new clients use it."""
    from cli.support import durq as run

    server = make_server("valkey")
    producer_url = acl_user(server.url, "durq-producer", PRODUCER, "p-pw")
    worker_url = acl_user(server.url, "durq-worker", WORKER, "w-pw")

    def round_of_jobs() -> None:
        app = durq.App(producer_url)

        @app.task(queue=queue_name)
        def noop(x: int) -> None:
            return None

        noop.enqueue_many([(i,) for i in range(3)])
        worker_app = durq.App(worker_url)
        worker_app.tasks = app.tasks
        from durq.worker import Worker, WorkerConfig

        worker = Worker(worker_app, WorkerConfig(queues=[queue_name], burst=True),
                        handle_signals=False)  # fmt: skip
        asyncio.run(worker.run())
        assert app.queue(queue_name).stats().completed % 3 == 0
        app.close()
        worker_app.close()

    round_of_jobs()
    before = script_calls(server)
    assert before["fcall"] == 0 and before["evalsha"] > 0
    # each client's refused FUNCTION LOAD, once per connection pool
    assert {e[b"object"] for e in denials(server.url, "durq-producer", "durq-worker")} == {
        b"function|load"
    }
    admin_url = acl_user(server.url, "durq-admin", ADMIN, "a-pw")
    assert run("functions", "load", "--url", admin_url).exit_code == 0
    round_of_jobs()
    after = script_calls(server)
    assert after["fcall"] > 0 and after["evalsha"] == before["evalsha"]
    assert _library_names(server) == [library().name]

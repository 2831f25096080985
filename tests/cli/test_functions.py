"""``durq functions list|prune`` and the line ``durq doctor`` prints about old libraries."""

from __future__ import annotations

from collections.abc import Callable

import redis

import durq
from cli.support import durq as run
from durq.dev.server import RedisServer
from durq.lua.functions import library

# a library as an older durq version would have left it, and a user's own whose name
# merely starts like durq's: prune must remove the first and never touch the second
OLD = "durq_0123456789ab"
USERS = "durq_reports"


def _load(client: redis.Redis, name: str) -> None:
    client.function_load(
        f"#!lua name={name}\nredis.register_function('{name}_f', function() return 1 end)\n"
    )


def _names(client: redis.Redis) -> set[str]:
    return {entry[1].decode() for entry in client.function_list()}


def test_prune_removes_only_the_libraries_of_other_durq_versions(
    make_server: Callable[..., RedisServer], queue_name: str
) -> None:
    server = make_server("valkey")
    current = library().name
    with redis.Redis.from_url(server.url) as client, durq.Queue(queue_name, server.url) as q:
        q.enqueue("loads this version's library")
        _load(client, OLD)
        _load(client, USERS)

        listed = run("functions", "list", "--url", server.url)
        assert listed.exit_code == 0, listed.output
        assert current in listed.output and "this durq" in listed.output
        assert OLD in listed.output and "another durq version" in listed.output
        assert USERS not in listed.output

        doctor = run("doctor", queue_name, "--url", server.url)
        assert "durq functions prune" in doctor.output and OLD in doctor.output

        pruned = run("functions", "prune", "--yes", "--url", server.url)
        assert pruned.exit_code == 0, pruned.output
        assert f"deleted {OLD}" in pruned.output and "deleted 1 library" in pruned.output
        assert _names(client) == {current, USERS}
        assert q.enqueue("still works").created

        again = run("functions", "prune", "--yes", "--url", server.url)
        assert "deleted 0 libraries" in again.output
        assert "durq functions prune" not in run("doctor", queue_name, "--url", server.url).output


def test_prune_asks_first(make_server: Callable[..., RedisServer]) -> None:
    server = make_server("valkey")
    with redis.Redis.from_url(server.url) as client:
        _load(client, OLD)
        refused = run("functions", "prune", "--url", server.url, input="n\n")
        assert refused.exit_code != 0
        assert OLD in _names(client)


def test_a_client_whose_library_was_pruned_loads_it_again(
    make_server: Callable[..., RedisServer], queue_name: str
) -> None:
    # what a worker of an older version sees when a newer version's `prune` deleted its
    # library: "Function not found", then FUNCTION LOAD and the call again
    server = make_server("valkey")
    with redis.Redis.from_url(server.url) as client, durq.Queue(queue_name, server.url) as q:
        q.enqueue("first")
        client.function_delete(library().name)
        assert q.enqueue("second").created
        assert library().name in _names(client)
        assert [job.payload for job in q.dequeue_many(2)] == ["first", "second"]


def test_a_server_without_functions_has_nothing_to_prune(redis62_server: RedisServer) -> None:
    listed = run("functions", "list", "--url", redis62_server.url)
    assert listed.exit_code == 0, listed.output
    assert "no Functions" in listed.output
    pruned = run("functions", "prune", "--yes", "--url", redis62_server.url)
    assert pruned.exit_code == 0, pruned.output
    assert "nothing to prune" in pruned.output


def test_load_loads_this_versions_library_once(make_server: Callable[..., RedisServer]) -> None:
    server = make_server("valkey")
    first = run("functions", "load", "--url", server.url)
    assert first.exit_code == 0, first.output
    assert f"{library().name} loaded" in first.output
    again = run("functions", "load", "--url", server.url)
    assert again.exit_code == 0, again.output
    assert "already loaded, and its code is this durq version's" in again.output
    with redis.Redis.from_url(server.url) as client:
        assert _names(client) == {library().name}


def test_load_on_a_server_without_functions_says_so(redis62_server: RedisServer) -> None:
    loaded = run("functions", "load", "--url", redis62_server.url)
    assert loaded.exit_code == 0, loaded.output
    assert "no Functions" in loaded.output

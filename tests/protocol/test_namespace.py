"""What lives in a namespace: its queues, shard counts and live workers, read and written
only through durq.protocol.namespace, on a real server (the Cluster suite runs these
again, where each of these keys is in a slot of its own)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from durq._sync.driver import Driver
from durq.dev.server import RedisServer
from durq.errors import InvalidArgument
from durq.keys import NamespaceKeys
from durq.protocol import namespace
from durq.protocol.calls import Command
from durq.transport import connection
from durq.transport.cluster import is_cluster
from helpers import eventually


@pytest.fixture
def space() -> NamespaceKeys:
    """A namespace of this test's own: these keys are shared by everything in it."""
    return NamespaceKeys(f"ns-{secrets.token_hex(5)}")


@pytest.fixture
def client(server: RedisServer) -> Iterator[Any]:
    made = connection.sync_client(server.url)
    yield made
    made.close()


@pytest.fixture
def driver(client: Any) -> Driver:
    return Driver(client)


@pytest.fixture(params=[True, False], ids=["batched", "one-key-each"])
def batch(request: pytest.FixtureRequest, client: Any) -> bool:
    """Both ways of sending the registry's requests; a Cluster allows one key each only."""
    if request.param and is_cluster(client):
        pytest.skip("a Cluster serves these keys from different nodes")
    return bool(request.param)


def test_namespace_keys_keep_their_names() -> None:
    space = NamespaceKeys("app")
    assert (space.queues, space.shards, space.workers) == (
        "app:queues",
        "app:shards",
        "app:workers",
    )
    assert space.worker("h:1:ab") == "app:worker:h:1:ab"
    assert NamespaceKeys().namespace == "durq"
    with pytest.raises(InvalidArgument, match="namespace"):
        NamespaceKeys("no spaces")


def test_queues_are_listed_sorted_once_registered(driver: Driver, space: NamespaceKeys) -> None:
    assert driver.run(namespace.queue_names(space)) == []
    driver.run(namespace.register_queue(space, "b", "ShardedQueue"))
    driver.run(namespace.add_queue(space, "a/sub"))
    driver.run(namespace.register_queue(space, "b", "ShardedQueue"))  # idempotent
    assert driver.run(namespace.queue_names(space)) == ["a/sub", "b"]
    assert driver.run(namespace.is_queue(space, "b")) is True
    assert driver.run(namespace.is_queue(space, "c")) is False


def test_a_sharded_queue_keeps_its_count_and_refuses_another(
    driver: Driver, space: NamespaceKeys
) -> None:
    driver.run(namespace.register_sharded(space, "emails", 4))
    driver.run(namespace.register_sharded(space, "emails", 4))
    assert driver.run(namespace.shard_counts(space)) == {"emails": 4}
    assert driver.run(namespace.queue_names(space)) == ["emails"]
    with pytest.raises(InvalidArgument, match="has 4 shards in Redis, not 5"):
        driver.run(namespace.register_sharded(space, "emails", 5))
    with pytest.raises(InvalidArgument, match=r"use a sharded queue \(ShardedQueue, or App"):
        driver.run(namespace.register_queue(space, "emails", "ShardedQueue"))


def test_a_heartbeat_lists_the_worker_with_its_fields_until_it_is_removed(
    driver: Driver, space: NamespaceKeys, batch: bool
) -> None:
    fields = {"host": "h", "pid": 7, "queues": ["q"], "jobs": [{"id": "j1"}], "in_hand": 1}
    for worker_id in ("w2", "w1"):
        driver.run(namespace.beat_worker(space, worker_id, fields, 30.0, batch=batch))
    found = driver.run(namespace.live_workers(space, batch=batch))
    assert list(found) == ["w1", "w2"]
    assert found["w1"] == fields
    ttl = driver.execute(Command(("PTTL", space.worker("w1"))))
    assert 29_000 < ttl <= 30_000
    driver.run(namespace.remove_worker(space, "w1", batch=batch))
    assert list(driver.run(namespace.live_workers(space, batch=batch))) == ["w2"]
    assert driver.execute(Command(("EXISTS", space.worker("w1")))) == 0


def test_an_expired_heartbeat_drops_out_and_only_a_pruning_reader_forgets_its_id(
    driver: Driver, space: NamespaceKeys, batch: bool
) -> None:
    driver.run(namespace.beat_worker(space, "dead", {"pid": 1}, 0.2, batch=batch))
    driver.run(namespace.beat_worker(space, "live", {"pid": 2}, 30.0, batch=batch))
    eventually(lambda: list(driver.run(namespace.live_workers(space, batch=batch))) == ["live"])
    members = driver.execute(Command(("SMEMBERS", space.workers)))
    assert sorted(members) == [b"dead", b"live"]  # the dashboard's reads write nothing
    driver.run(namespace.live_workers(space, batch=batch, prune=True))
    assert driver.execute(Command(("SMEMBERS", space.workers))) in ([b"live"], {b"live"})


def test_a_malformed_heartbeat_field_reads_as_none(
    driver: Driver, space: NamespaceKeys, batch: bool
) -> None:
    driver.run(namespace.beat_worker(space, "w", {"pid": 3}, 30.0, batch=batch))
    driver.execute(Command(("HSET", space.worker("w"), "jobs", b"{not json")))
    assert driver.run(namespace.live_workers(space, batch=batch)) == {"w": {"pid": 3, "jobs": None}}

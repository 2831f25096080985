"""URLs of every deployment: one server, Redis Cluster, Sentinel; and their redaction."""

from __future__ import annotations

import pytest
import redis
import redis.asyncio
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster

from durq import InvalidArgument
from durq.dev.server import RedisServer
from durq.transport import connection


def test_a_cluster_url_lists_its_startup_nodes_and_credentials() -> None:
    target = connection.parse_target("redis+cluster://ops:s3cret@10.0.0.1:7000,[::1]:7001/")
    assert target.kind == "cluster"
    assert target.hosts == (("10.0.0.1", 7000), ("::1", 7001))
    assert (target.options["username"], target.options["password"]) == ("ops", "s3cret")
    with pytest.raises(InvalidArgument, match="only database 0"):
        connection.parse_target("redis+cluster://h:7000/3")


def test_a_sentinel_url_names_the_service_the_db_and_the_sentinels_credentials() -> None:
    target = connection.parse_target(
        "rediss+sentinel://:data-pw@s1:26379,s2:26380/orders/2"
        "?sentinel_password=sent-pw&ssl_ca_certs=/ca.pem"
    )
    assert (target.kind, target.service, target.options["db"]) == ("sentinel", "orders", 2)
    assert target.hosts == (("s1", 26379), ("s2", 26380))
    assert target.options["password"] == "data-pw" and target.options["ssl"] is True
    assert target.sentinel_options == {"password": "sent-pw", "ssl": True,
                                       "ssl_ca_certs": "/ca.pem"}  # fmt: skip
    with pytest.raises(InvalidArgument, match="names the service"):
        connection.parse_target("redis+sentinel://s1:26379/")


def test_passwords_are_redacted_from_every_kind_of_url() -> None:
    shown = connection.redact("redis+sentinel://u:data-pw@s1:1,s2:2/svc?sentinel_password=sp")
    assert "data-pw" not in shown and "sp" not in shown.split("?")[1].replace("%2A", "")
    assert shown.startswith("redis+sentinel://u:***@s1:1,s2:2/svc?")
    assert connection.redact("redis+cluster://:pw@h:1,h:2/") == "redis+cluster://:***@h:1,h:2/"
    assert connection.redact("redis://h:1/0") == "redis://h:1/0"


def test_unknown_schemes_are_refused() -> None:
    with pytest.raises(InvalidArgument, match="redis\\+cluster://"):
        connection.resolve_url("memcache://h:1")


async def test_clients_match_the_url(valkey_server: RedisServer) -> None:
    port = valkey_server.port
    plain = connection.sync_client(valkey_server.url)
    assert type(plain) is redis.Redis
    plain.close()
    aplain = connection.async_client(valkey_server.url)
    assert type(aplain) is redis.asyncio.Redis
    await aplain.aclose()
    acluster = connection.async_client(f"redis+cluster://127.0.0.1:{port}/")
    assert isinstance(acluster, AsyncRedisCluster)  # it connects on first use
    await acluster.aclose()
    with pytest.raises(Exception, match=r"[Cc]luster"):  # the blocking one at once
        connection.sync_client(f"redis+cluster://127.0.0.1:{port}/")

"""Fixtures of the Cluster tests: one local Redis Cluster (3 primaries, 3 replicas) for
the whole session, standing in for the shared server of the engine and worker tests.

The engine and worker test modules are collected again here (``test_engine.py``,
``test_worker.py`` import them), so the same tests run unchanged against the cluster:
``server``, ``redis_url`` and ``raw`` are overridden below, everything else comes from
the suites' own fixtures.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis.cluster

from durq.dev.topology import LocalCluster
from engine.conftest import front, local_q, make_q, q
from helpers import default_flavor, require_flavor
from worker.fixtures import app, durq_cli, exec_log

__all__ = ["app", "durq_cli", "exec_log", "front", "local_q", "make_q", "q"]


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    """The session's local cluster (the default flavor's binary)."""
    flavor = default_flavor()
    local = LocalCluster(flavor=flavor, binary=require_flavor(flavor))
    try:
        local.start()
        yield local
    finally:
        local.close()


@pytest.fixture(scope="session")
def server(cluster: LocalCluster) -> LocalCluster:
    """The engine tests' server: the cluster (it has ``url``, ``flavor``, ``version``)."""
    return cluster


@pytest.fixture(scope="session")
def redis_url(cluster: LocalCluster) -> str:
    """The worker tests' server URL: the cluster's ``redis+cluster://`` URL."""
    return cluster.url


@pytest.fixture
def raw(cluster: LocalCluster) -> Iterator[Any]:
    """A plain redis-py Cluster client, to look at or damage durq's keys."""
    client = redis.cluster.RedisCluster.from_url(
        f"redis://{cluster.servers[0].host}:{cluster.servers[0].port}/0"
    )
    yield client
    client.close()

"""An idle worker on a Redis Cluster sends next to nothing, as on one server
(tests/worker/test_idle_promises.py): its queue's keys, its outbox's and the registry's
are on different primaries, and none of them hears from it for many heartbeats."""

from __future__ import annotations

import redis

import durq
from durq.dev.topology import LocalCluster
from worker.test_idle_promises import TARGET, idle_commands

#: what the replicas send their primary (acks), and this test's INFO
_OWN = ("info", "replconf")


def _calls(nodes: list[redis.Redis]) -> dict[str, int]:
    out: dict[str, int] = {}
    for node in nodes:
        for name, stats in node.info("commandstats").items():
            key = name.removeprefix("cmdstat_")
            out[key] = out.get(key, 0) + stats["calls"]
    return out


def test_an_idle_worker_on_a_cluster_sends_no_command_for_many_heartbeats(
    cluster: LocalCluster, queue_name: str
) -> None:
    app = durq.App(cluster.url, default_queue=queue_name)

    @app.task
    def noop() -> None: ...

    # the primaries (replicas count their primary's replication pings too)
    nodes = [redis.Redis(host=s.host, port=s.port) for s in cluster.servers]
    # the primaries (replicas count their primary's replication pings too)
    primaries = [n for n in nodes if n.info("replication")["role"] == "master"]
    try:
        sent, seconds = idle_commands(app, noop.enqueue, lambda: _calls(primaries))
    finally:
        for node in nodes:
            node.close()
        app.close()
    for own in _OWN:
        sent.pop(own, None)
    assert sum(sent.values()) <= TARGET * seconds, sent

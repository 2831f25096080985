"""``durq functions`` on a Cluster: every primary holds its own libraries."""

from __future__ import annotations

import redis

from cli.support import durq as run
from durq.dev.topology import LocalCluster
from durq.lua.functions import library

OLD = "durq_ba9876543210"


def _primaries(cluster: LocalCluster) -> list[redis.Redis]:
    nodes = [redis.Redis(host=s.host, port=s.port) for s in cluster.servers]
    return [n for n in nodes if n.info("replication")["role"] == "master"]


def test_load_list_and_prune_visit_every_primary(cluster: LocalCluster) -> None:
    primaries = _primaries(cluster)
    if int(str(primaries[0].info("server")["redis_version"]).split(".")[0]) < 7:
        return  # no Functions on this flavor: test_functions covers the message
    for node in primaries:
        node.function_load(
            f"#!lua name={OLD}\nredis.register_function('{OLD}_f', function() return 1 end)\n"
        )
    loaded = run("functions", "load", "--url", cluster.url)
    assert loaded.exit_code == 0, loaded.output
    assert loaded.output.count(library().name) == len(primaries)
    listed = run("functions", "list", "--url", cluster.url)
    assert listed.exit_code == 0, listed.output
    assert listed.output.count(OLD) == len(primaries)

    pruned = run("functions", "prune", "--yes", "--url", cluster.url)
    assert pruned.exit_code == 0, pruned.output
    assert f"deleted {len(primaries)} libraries" in pruned.output
    for node in primaries:
        names = {entry[1].decode() for entry in node.function_list()}
        assert OLD not in names
        assert names == {library().name}
        node.close()

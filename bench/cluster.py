"""Throughput of one queue on a local 3-primary Redis Cluster, by shard count.

    .venv/bin/python bench/cluster.py                 # 1, 3 and 6 shards
    .venv/bin/python bench/cluster.py --shards 1 3 --jobs 40000 --flavor redis

For each shard count, a fresh queue is filled by producer processes (enqueue_many in
batches) and then drained by consumer processes (dequeue_many + release_many in
batches, each consumer task on one shard, as a worker's pumps are). Reported: jobs per
second enqueued and drained, and the CPU each server process used. The cluster has no
replicas (they would only share the same two cores), and everything, servers and
clients, runs on this machine, so the clients' Python takes much of the CPU that a real
deployment would leave to the servers.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import secrets
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from durq import AsyncShardedQueue
from durq.dev.topology import LocalCluster

BATCH = 200
TASKS = 3  # asyncio tasks per process


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _produce(url: str, name: str, shards: int, jobs: int, seed: int) -> None:
    async with AsyncShardedQueue(name, url, shards=shards) as queue:
        payload = {"user": 42, "action": "resize", "size": [128, 128]}

        async def task(count: int) -> None:
            for start in range(0, count, BATCH):
                await queue.enqueue_many([payload] * min(BATCH, count - start))

        share = jobs // TASKS
        await asyncio.gather(*(task(share) for _ in range(TASKS)))


async def _consume(url: str, name: str, shards: int, proc: int, procs: int) -> None:
    async with AsyncShardedQueue(name, url, shards=shards) as queue:

        async def task(shard: int) -> None:
            source = queue.shards[shard]
            while True:
                jobs = await source.dequeue_many(BATCH, lease=60)
                if not jobs:
                    return
                await source.release_many(jobs)

        # consumer tasks spread over the shards, each on one shard
        slots = [(proc * TASKS + t) % shards for t in range(TASKS)]
        await asyncio.gather(*(task(s) for s in slots))


def _run(target: str, *args: object) -> None:
    coro = _produce if target == "produce" else _consume
    asyncio.run(coro(*args))  # type: ignore[arg-type]


def _timed(procs: list[mp.Process]) -> float:
    begun = time.perf_counter()
    for p in procs:
        p.start()
    for p in procs:
        p.join()
        if p.exitcode:
            raise SystemExit(f"a benchmark process failed (exit {p.exitcode})")
    return time.perf_counter() - begun


def measure(cluster: LocalCluster, shards: int, jobs: int, procs: int) -> dict[str, float]:
    """Fill then drain one queue of ``shards`` shards; jobs/s and server CPU."""
    name = f"bench-{secrets.token_hex(3)}"
    pids = [s.pid for s in cluster.servers]
    cpu = [_cpu_seconds(pid) for pid in pids]
    fill = _timed(
        [
            mp.Process(target=_run, args=("produce", cluster.url, name, shards, jobs // procs, i))
            for i in range(procs)
        ]
    )
    drain = _timed([mp.Process(target=_run, args=("consume", cluster.url, name, shards, i,
                                                  procs)) for i in range(procs)])  # fmt: skip
    used = [_cpu_seconds(pid) - before for pid, before in zip(pids, cpu, strict=True)]
    total = (jobs // procs // TASKS) * TASKS * procs
    return {
        "enqueue_per_s": total / fill,
        "drain_per_s": total / drain,
        "server_cpu_s": sum(used),
        "busiest_server_share": max(used) / max(sum(used), 1e-9),
    }


def main(argv: list[str]) -> int:
    """Run the benchmark and print a table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 3, 6])
    parser.add_argument("--jobs", type=int, default=60_000)
    parser.add_argument("--procs", type=int, default=2, help="producer/consumer processes")
    parser.add_argument("--flavor", default="valkey")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    print(f"cluster: 3 primaries, no replicas ({args.flavor}); {args.jobs} jobs per run; "
          f"{args.procs} producer and {args.procs} consumer processes x {TASKS} tasks; "
          f"batches of {BATCH}; {os.cpu_count()} cores", flush=True)  # fmt: skip
    print(f"{'shards':>6} {'enqueue/s':>10} {'drain/s':>10} {'server CPU s':>13} "
          f"{'busiest server':>15}")  # fmt: skip
    with LocalCluster(flavor=args.flavor, replicas=0) as cluster:
        for shards in args.shards:
            for _ in range(args.repeat):
                r = measure(cluster, shards, args.jobs, args.procs)
                print(f"{shards:>6} {r['enqueue_per_s']:>10.0f} {r['drain_per_s']:>10.0f} "
                      f"{r['server_cpu_s']:>13.1f} {r['busiest_server_share']:>14.0%}",
                      flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

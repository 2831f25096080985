"""Server time per call of dequeue and release, run as Functions (FCALL) and with EVALSHA.

    .venv/bin/python bench/fcall_vs_evalsha.py [--jobs 2000] [--cold 200] [--rounds 3]

On a fresh Valkey server (no persistence), through the real Queue API, once with the
driver's FCALL and once with EVALSHA forced (``driver.functions``), in turn for
``--rounds`` rounds. Per round and mode, each phase starts with CONFIG RESETSTAT and reads
``usec_per_call`` of ``cmdstat_fcall`` / ``cmdstat_evalsha`` after it:

* warm dequeue: ``--jobs`` jobs enqueued, then dequeued one call each, back to back;
* warm release: those jobs released one call each, back to back;
* cold dequeue: ``--cold`` dequeues of the empty queue, one every 10 ms (the pickup
  path of a queue that work trickles into);
* cold release: ``--cold`` leased jobs released one every 10 ms.

Prints each phase's median over the rounds. The server's time only: no round trip.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import redis

import durq
from durq.dev.server import RedisServer


def _usec(client: redis.Redis, command: str) -> float:
    stats: dict[str, Any] = client.info("commandstats")
    return float(stats.get(f"cmdstat_{command}", {}).get("usec_per_call", 0.0))


def _round(client: redis.Redis, url: str, fcall: bool, jobs: int, cold: int) -> dict[str, float]:
    command = "fcall" if fcall else "evalsha"
    out: dict[str, float] = {}
    with durq.Queue(f"bench-{command}", url) as queue:
        queue._driver.functions = fcall
        queue.enqueue_many(range(jobs))
        client.config_resetstat()
        held = [queue.dequeue() for _ in range(jobs)]
        out["warm dequeue"] = _usec(client, command)
        client.config_resetstat()
        for job in held:
            assert job is not None
            queue.release(job)
        out["warm release"] = _usec(client, command)
        client.config_resetstat()
        for _ in range(cold):
            time.sleep(0.01)
            assert queue.dequeue() is None
        out["cold dequeue (empty, every 10 ms)"] = _usec(client, command)
        queue.enqueue_many(range(cold))
        held = [queue.dequeue() for _ in range(cold)]
        client.config_resetstat()
        for job in held:
            assert job is not None
            time.sleep(0.01)
            queue.release(job)
        out["cold release (one every 10 ms)"] = _usec(client, command)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--cold", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with RedisServer(flavor="valkey") as server:
        client = redis.Redis.from_url(server.url)
        print(f"server {'.'.join(map(str, server.version))}, {args.rounds} rounds")
        results: dict[bool, list[dict[str, float]]] = {True: [], False: []}
        for _ in range(args.rounds):
            for fcall in (False, True):
                results[fcall].append(_round(client, server.url, fcall, args.jobs, args.cold))
        print(f"{'µs per call (server)':36} {'EVALSHA':>8} {'FCALL':>8} {'saved':>8}")
        for phase in results[True][0]:
            ev = statistics.median(r[phase] for r in results[False])
            fc = statistics.median(r[phase] for r in results[True])
            print(f"{phase:36} {ev:8.2f} {fc:8.2f} {ev - fc:8.2f}")
        client.close()


if __name__ == "__main__":
    main()

"""What dequeue and release cost the server per call, and which commands they run.

    .venv/bin/python bench/per_job_calls.py [--rounds 200]

On a fresh server (Valkey, no persistence), for dequeue of 1 job from an idle queue (one
call every 10 ms, as work trickles in: the pickup path), dequeue of 100 jobs, and release
of 1 and of 100 jobs: the server time of the EVALSHA (``INFO commandstats`` after
``CONFIG RESETSTAT`` around each call) and the commands the script ran (commandstats
counts the commands a script makes too). Prints the median and p90 of the server time and
the commands of one call, TYPE apart.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import redis

import durq
from durq.dev.server import RedisServer


def _measured(client: redis.Redis, call: Any) -> tuple[Any, float, dict[str, int]]:
    """Run ``call``; its result, the EVALSHA server time (us) and the other commands."""
    client.config_resetstat()
    result = call()
    stats = client.info("commandstats")
    usec = float(stats["cmdstat_evalsha"]["usec"])
    calls = {
        name.removeprefix("cmdstat_"): int(s["calls"])
        for name, s in stats.items()
        if name != "cmdstat_evalsha" and not name.startswith("cmdstat_config")
    }
    return result, usec, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    with RedisServer(flavor="valkey") as server:
        client = redis.Redis.from_url(server.url)
        queue = durq.Queue("calls", server.url)
        times: dict[str, list[float]] = {}
        commands: dict[str, dict[str, int]] = {}

        def record(label: str, usec: float, calls: dict[str, int]) -> None:
            times.setdefault(label, []).append(usec)
            commands[label] = calls

        for _ in range(args.rounds):
            for n in (1, 100):
                queue.enqueue_many([{"n": i} for i in range(n)])
                time.sleep(0.01)
                jobs, usec, calls = _measured(client, lambda n=n: queue.dequeue_many(n))
                assert len(jobs) == n
                record(f"dequeue {n}", usec, calls)
                time.sleep(0.01)
                _, usec, calls = _measured(client, lambda j=jobs: queue.release_many(j))
                record(f"release {n}", usec, calls)
        print(f"server time per EVALSHA (n={args.rounds}, one call every 10 ms)")
        for label, us in times.items():
            us.sort()
            calls = commands[label]
            other = ", ".join(f"{k} {v}" for k, v in sorted(calls.items()) if k != "type")
            print(
                f"  {label:12s} median {statistics.median(us):6.1f} us  p90 "
                f"{us[int(len(us) * 0.9)]:6.1f} us  TYPE {calls.get('type', 0):2d}  "
                f"commands {sum(calls.values()):3d}: {other}"
            )
        queue.close()
        client.close()


if __name__ == "__main__":
    main()

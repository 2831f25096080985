"""Redis commands a durq worker sends per job, amortised, while it drains a queue.

    .venv/bin/python bench/commands.py [--jobs 20000] [-c 20] [-p 1]

Fills a queue on a fresh server (Valkey, no persistence), resets the server's command
statistics, starts ``durq worker`` on it and waits until every job ran. Then counts
the commands clients sent during the drain, from ``INFO commandstats``: EVALSHA (each
durq script call) and the blocking and bookkeeping commands (BZPOPMIN, the registry's
HSET/PEXPIRE/SADD, ...). Commands that scripts run inside Redis are listed too, but
apart: they are not round trips. The no-op task lives in ``bench/commands_app.py``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import redis

import durq
from durq.dev.server import RedisServer

HERE = Path(__file__).resolve().parent
# sent by clients only; every other command in the statistics ran inside a script
# (the worker's registry heartbeat writes HSET/PEXPIRE/SADD, a handful per second,
# which are counted with the scripts' and so make the in-script figure a bound)
CLIENT_COMMANDS = ("evalsha", "eval", "bzpopmin", "script|load", "ping", "client|setinfo")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("-c", "--concurrency", type=int, default=20)
    parser.add_argument("-p", "--processes", type=int, default=1)
    args = parser.parse_args()
    server = RedisServer(flavor="valkey").start()
    try:
        env = {**os.environ, "BENCH_REDIS_URL": server.url, "PYTHONPATH": str(HERE)}
        os.environ["BENCH_REDIS_URL"] = server.url
        sys.path.insert(0, str(HERE))
        from commands_app import app, noop

        for start in range(0, args.jobs, 1000):
            noop.enqueue_many([(i,) for i in range(start, min(start + 1000, args.jobs))])
        client = redis.Redis.from_url(server.url)
        client.config_resetstat()
        began = time.perf_counter()
        worker = subprocess.Popen(
            [sys.executable, "-m", "durq", "worker", "commands_app:app", "-q", "bench",
             "--url", server.url, "-c", str(args.concurrency), "-p", str(args.processes),
             "--log-level", "warning"],
            env=env,
        )  # fmt: skip
        try:
            with durq.Queue("bench", server.url) as queue:
                while True:
                    s = queue.stats()
                    if s.pending + s.active == 0 and s.completed >= args.jobs:
                        break
                    time.sleep(0.05)
            elapsed = time.perf_counter() - began
            stats = client.info("commandstats")
        finally:
            worker.terminate()
            worker.wait(30)
        app.close()
        calls = {k.removeprefix("cmdstat_"): v["calls"] for k, v in stats.items()}
        sent = {k: v for k, v in calls.items() if k in CLIENT_COMMANDS}
        inside = {k: v for k, v in calls.items() if k not in CLIENT_COMMANDS}
        total = sum(sent.values())
        print(f"server: {server.flavor} {'.'.join(map(str, server.version))}")
        print(
            f"worker: -p {args.processes} -c {args.concurrency}; {args.jobs:,} jobs "
            f"drained in {elapsed:.2f} s (including the worker's start)"
        )
        print(f"commands sent by clients: {total:,} = {total / args.jobs:.3f} per job")
        for name, n in sorted(sent.items(), key=lambda kv: -kv[1]):
            print(f"  {name:16s} {n:>9,}  {n / args.jobs:.3f} per job")
        run_inside = sum(inside.values())
        print(f"commands run inside scripts: {run_inside:,} = {run_inside / args.jobs:.2f} per job")
        for name, n in sorted(inside.items(), key=lambda kv: -kv[1])[:8]:
            print(f"  {name:16s} {n:>9,}  {n / args.jobs:.3f} per job")
    finally:
        server.stop()


if __name__ == "__main__":
    main()

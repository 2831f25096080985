"""Where durq's pickup latency goes: round trips, thread hand-off, worker paths.

    .venv/bin/python bench/latency.py [--runs 3] [--jobs 500] [--no-floors] [--path DIR]

On a fresh server (Valkey, no persistence): redis-py PING back to back and after 10 ms
idle; a thread-pool hand-off after 10 ms idle; then one ``durq worker`` (defaults) and,
per run, ``--jobs`` jobs sent every 10 ms to a plain ``def`` task and as many to an
``async def`` task (``bench/latency_app.py``), each measuring ``time.time()`` at its
start against the ``time.time()`` taken just before its enqueue call. Prints p50 / p99 /
max per path and run.

Then, with the server's slow log recording every command, one more run of ``async def``
jobs, and the server time of each command by kind (median and p90, µs): what the
scripts on the pickup path (the enqueue, the fetch that ends the worker's wait) cost
when they run once every 10 ms on a cold CPU, not back to back as in a drain.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import redis

from durq import lua
from durq.dev.server import RedisServer

HERE = Path(__file__).resolve().parent


def _pct(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p99 = ms[max(0, int(len(ms) * 0.99) - 1)]
    return f"p50 {ms[len(ms) // 2]:.3f} / p99 {p99:.3f} / max {ms[-1]:.3f} ms (n={len(ms)})"


def _floors(url: str) -> None:
    client = redis.Redis.from_url(url)
    client.ping()
    hot, idle, hop = [], [], []
    for _ in range(500):
        t = time.perf_counter()
        client.ping()
        hot.append(time.perf_counter() - t)
    for _ in range(300):
        time.sleep(0.01)
        t = time.perf_counter()
        client.ping()
        idle.append(time.perf_counter() - t)
    with ThreadPoolExecutor(4) as pool:
        for _ in range(300):
            time.sleep(0.01)
            t = time.perf_counter()
            hop.append(pool.submit(lambda t=t: time.perf_counter() - t).result())
    client.close()
    print(f"PING back to back:                  {_pct(hot)}")
    print(f"PING after 10 ms idle:              {_pct(idle)}")
    print(f"thread hand-off after 10 ms idle:   {_pct(hop)}")


def _server_times(client: redis.Redis, send: Any, jobs: int) -> None:
    """Send ``jobs`` jobs every 10 ms with every command in the slow log; print the server
    time per command (scripts by name)."""
    names = {script.sha: name for name, script in lua.load_all().items()}
    client.config_set("slowlog-max-len", 4 * jobs * 50)
    client.config_set("slowlog-log-slower-than", 0)
    client.slowlog_reset()
    for _ in range(jobs):
        send(time.time())
        time.sleep(0.01)
    time.sleep(0.5)
    client.config_set("slowlog-log-slower-than", 10000)
    by_kind: dict[str, list[int]] = {}
    for entry in client.slowlog_get(4 * jobs * 50):
        words = entry["command"].split(b" ")
        kind = words[0].decode()
        if kind == "EVALSHA" and len(words) > 1:
            kind = f"script {names.get(words[1].decode(), words[1][:8].decode())}"
        elif kind == "FCALL" and len(words) > 1:
            kind = f"FCALL {words[1].decode()}"
        by_kind.setdefault(kind, []).append(entry["duration"])
    print(f"server time per command, async def jobs sent every 10 ms (n={jobs}):")
    for kind, us in sorted(by_kind.items(), key=lambda kv: -sum(kv[1]))[:12]:
        us.sort()
        print(
            f"   {kind:28s} {len(us) / jobs:5.1f}/job  median {us[len(us) // 2]:4d} us  "
            f"p90 {us[int(len(us) * 0.9)]:4d} us"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--no-floors", action="store_true", help="skip the PING/hand-off floors")
    parser.add_argument(
        "--path",
        action="append",
        default=[],
        help="prepend to the worker's PYTHONPATH (repeatable): a scratch copy's src/ with a\n"
        "prototype change, a --target dir with uvloop",
    )
    args = parser.parse_args()
    with RedisServer(flavor="valkey") as server, tempfile.TemporaryDirectory() as tmp:
        if not args.no_floors:
            _floors(server.url)
        out = Path(tmp) / "latency.txt"
        os.environ.update(BENCH_REDIS_URL=server.url, BENCH_LATENCY_OUT=str(out))
        sys.path.insert(0, str(HERE))
        from latency_app import app, lat_async, lat_sync

        worker = subprocess.Popen(
            [sys.executable, "-m", "durq", "worker", "latency_app:app", "-q", "latency",
             "--url", server.url, "--log-level", "error"],
            env={**os.environ, "PYTHONPATH": os.pathsep.join([*args.path, str(HERE)])},
        )  # fmt: skip
        try:
            time.sleep(2)  # the worker's start
            for run in range(1, args.runs + 1):
                for kind, task in (("plain def", lat_sync), ("async def", lat_async)):
                    out.write_text("")
                    for _ in range(args.jobs):
                        task.enqueue(time.time())
                        time.sleep(0.01)
                    time.sleep(0.5)
                    delays = [float(line.split()[1]) for line in out.read_text().splitlines()]
                    label = f"worker, {kind} task, run {run}:"
                    print(f"{label:36s}{_pct(delays)}")
            with redis.Redis.from_url(server.url) as client:
                _server_times(client, lat_async.enqueue, args.jobs)
        finally:
            worker.terminate()
            worker.wait(30)
            app.close()


if __name__ == "__main__":
    main()

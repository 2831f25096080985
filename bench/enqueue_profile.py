"""Where an enqueue's time goes: client round trip, durq's Python, the script's parts.

    .venv/bin/python bench/enqueue_profile.py [--calls 5000] [--no-cprofile]

On a fresh server (Valkey, no persistence), in one process:

1. single calls: wall time per call of redis-py PING and LPUSH, ``Queue.enqueue`` and
   ``Task.enqueue``, with the server's time per command from ``INFO commandstats``;
2. the enqueue script's server time by variant (``EVALSHA`` of: nothing but the key
   vector, the shared library's definitions, plus ``TIME``, the whole script), so the
   parts can be told apart;
3. bulk: ``Task.enqueue_many`` of 1,000 jobs, 100 calls, the server's share per job,
   and a cProfile of the client (unless ``--no-cprofile``).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from collections.abc import Callable
from typing import Any

import redis

import durq
from durq import lua
from durq.dev.server import RedisServer


def _server_us(client: redis.Redis, command: str) -> float:
    stats = client.info("commandstats").get(f"cmdstat_{command}", {})
    return float(stats.get("usec_per_call", 0.0))


def single_calls(client: redis.Redis, url: str, task: Any, calls: int) -> None:
    queue = durq.Queue("profile-raw", url)
    paths: list[tuple[str, str, Callable[[int], object]]] = [
        ("redis-py PING", "ping", lambda i: client.ping()),
        ("redis-py LPUSH", "lpush", lambda i: client.lpush("profile-list", b"x" * 80)),
        ("Queue.enqueue(payload)", "evalsha", lambda i: queue.enqueue({"n": i})),
        ("Task.enqueue(i)", "evalsha", lambda i: task.enqueue(i)),
    ]
    print("1. single calls: wall per call, server per command")
    for _ in range(2):
        for label, command, call in paths:
            client.config_resetstat()
            start, cpu = time.perf_counter(), time.process_time()
            for i in range(calls):
                call(i)
            wall = (time.perf_counter() - start) / calls * 1e6
            cpu = (time.process_time() - cpu) / calls * 1e6
            print(
                f"   {label:24s} {1e6 / wall:8,.0f}/s  wall {wall:6.1f} us  client CPU "
                f"{cpu:5.1f} us  server {_server_us(client, command):5.1f} us ({command})"
            )
    queue.close()


def script_parts(client: redis.Redis, url: str, calls: int) -> None:
    queue = durq.Queue("profile-parts", url)
    queue.enqueue({"n": 0})
    # capture one real call's arguments from the slow log
    client.config_set("slowlog-log-slower-than", 0)
    client.slowlog_reset()
    queue.enqueue({"n": 1})
    entries = client.slowlog_get(10)
    client.config_set("slowlog-log-slower-than", 10000)
    queue.close()
    command = next(e["command"] for e in entries if e["command"].startswith(b"EVALSHA"))
    args = command.split(b" ")
    numkeys = int(args[2])
    keys, argv = args[3 : 3 + numkeys], args[3 + numkeys :]
    full = lua.load("enqueue_plain").source
    body = full.index("local n = tonumber(ARGV[1])")
    variants = {
        "the 17 keys only": "local a = KEYS[1] return 1",
        "+ library definitions": full[:body] + "return 1",
        "+ TIME": full[:body] + "local x = now_ms() return 1",
        "whole script": full,
    }
    print("2. enqueue_plain.lua server time by variant (one job per call; median, range)")
    shas = {label: client.script_load(source) for label, source in variants.items()}
    times: dict[str, list[float]] = {label: [] for label in variants}
    for run in range(5):  # interleaved, so drift of the machine's speed hits all alike
        for label, sha in shas.items():
            client.config_resetstat()
            for i in range(calls):
                call_argv = list(argv)
                call_argv[1] = f"p{run}{label[:4]}{i}".encode()  # a new job id per call
                client.evalsha(sha, numkeys, *keys, *call_argv)
            times[label].append(_server_us(client, "evalsha"))
    for label, values in times.items():
        print(
            f"   {label:28s} {statistics.median(values):6.2f} us "
            f"({min(values):.2f}-{max(values):.2f})"
        )


def bulk(client: redis.Redis, task: Any, profile: bool) -> None:
    batches = [[(i,) for i in range(b * 1000, b * 1000 + 1000)] for b in range(100)]
    print("3. bulk: Task.enqueue_many, 100 calls of 1,000 jobs")
    for _ in range(3):
        client.flushall()
        client.config_resetstat()
        start, cpu = time.perf_counter(), time.process_time()
        for batch in batches:
            task.enqueue_many(batch)
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
        server = client.info("commandstats")["cmdstat_evalsha"]["usec"] / 1e6
        print(
            f"   {100_000 / wall:,.0f} jobs/s, {wall * 10:.2f} us per job, client CPU "
            f"{cpu * 10:.2f} us, server {server * 10:.2f} us per job "
            f"({server / wall * 100:.0f}% of wall)"
        )
    if profile:
        client.flushall()
        profiler = cProfile.Profile()
        profiler.enable()
        for batch in batches[:30]:
            task.enqueue_many(batch)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--no-cprofile", action="store_true")
    args = parser.parse_args()
    with RedisServer(flavor="valkey") as server:
        client = redis.Redis.from_url(server.url)
        app = durq.App(url=server.url)

        @app.task(queue="profile")
        def noop(i: int) -> None:
            """Never runs: only enqueued."""

        single_calls(client, server.url, noop, args.calls)
        script_parts(client, server.url, args.calls)
        bulk(client, noop, not args.no_cprofile)
        app.close()
        client.close()


if __name__ == "__main__":
    main()

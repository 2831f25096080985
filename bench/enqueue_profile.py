"""Where a single enqueue's time goes, in one process and one window.

    .venv/bin/python bench/enqueue_profile.py [--calls 1000] [--rounds 9] [--no-huey]
                                              [--cprofile]

On a fresh server (Valkey, no persistence), all against the same server:

1. single calls, interleaved rounds: wall time, client CPU, the server's time per
   command (``INFO commandstats``) and its process's CPU per call (``INFO cpu``: the
   command plus reading, parsing and replying, and the event loop) of a PING and an
   LPUSH on durq's own transport (a redis-py connection driven by
   ``durq.connection.sync_exchange``: its socket and hiredis reader, none of redis-py's
   command layers), redis-py's ``LPUSH``, ``Queue.enqueue``, ``Task.enqueue`` and
   Huey's enqueue (its own process and venv, ``bench/.envs/huey``; an ``LPUSH``);
2. the enqueue script's server time per FCALL against floors with the same 17 keys and
   4 arguments: a function that returns 1, and a minimal plain-job function (the
   commands a plain enqueue needs, without durq's guards), then ``enqueue_single`` and
   ``enqueue_plain`` with one job (medians of interleaved runs);
3. durq's client Python per call with the socket I/O excluded (the exchange answers
   with a canned reply);
4. one ``Task.enqueue`` taken apart, interleaved: the round trip of an FCALL of the
   same size that returns 1, of ``enqueue_single`` alone (no durq Python), and of the
   whole call, with the client's and the server process's CPU of each;
5. bulk: ``Task.enqueue_many`` of 1,000 jobs, 100 calls (and a cProfile of the client
   with ``--cprofile``).

The machine's speed drifts (a VM with 2 cores shared with others): compare rows of one
run, not runs of different hours.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hiredis
import redis

import durq
from durq import connection
from durq._sync import driver
from durq.dev.server import RedisServer
from durq.lua import functions

#: Huey's venv, as bench/run.py makes it (--huey-python for another)
HUEY_PYTHON = Path(__file__).parent / ".envs" / "huey" / "bin" / "python"
HUEY_SCRIPT = """
import sys, time
from huey import RedisHuey
huey = RedisHuey("profile-huey", url=sys.argv[1])
@huey.task()
def noop(i):
    pass
calls = int(sys.argv[2])
for i in range(300):
    noop(i)
start, cpu = time.perf_counter(), time.process_time()
for i in range(calls):
    noop(i)
print(time.perf_counter() - start, time.process_time() - cpu)
"""

# floors with durq's key vector: the same command size, the server's work left out
FLOOR_LIBRARY = """#!lua name=durq_profile_floor
redis.register_function('durq_profile_ret', function(keys, args) return 1 end)
redis.register_function('durq_profile_plain', function(keys, args)
  local t = redis.call('TIME')
  redis.call('HEXISTS', keys[2], args[1])
  redis.call('ZSCORE', keys[8], args[1])
  redis.call('SISMEMBER', keys[4], '')
  redis.call('RPUSH', keys[1] .. 'pending', args[1])
  redis.call('HSET', keys[2], args[1], args[2])
  redis.call('HINCRBY', keys[11], 'ready', 1)
  redis.call('HINCRBY', keys[11], 'enqueued', 1)
  return {1, args[1]}
end)
"""


def _server_us(client: redis.Redis, command: str) -> float:
    stats = client.info("commandstats").get(f"cmdstat_{command}", {})
    return float(stats.get("usec_per_call", 0.0))


def _server_cpu(client: Any) -> float:
    """The server process's CPU seconds so far (user + system)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _exchange(conn: Any, command: tuple[Any, ...]) -> Callable[[int], object]:
    packed = [hiredis.pack_command(command)]
    return lambda i: connection.sync_exchange(conn, packed, 1)


def _huey(
    client: redis.Redis, url: str, calls: int, python: Path
) -> tuple[float, float, float, float] | None:
    if not python.exists():
        return None
    client.config_resetstat()
    before = _server_cpu(client)
    out = subprocess.run(
        [str(python), "-c", HUEY_SCRIPT, url, str(calls)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    # 300 warm-up calls come before the timed ones; the server's figures cover both
    process = (_server_cpu(client) - before) / (calls + 300) * 1e6
    wall, cpu = float(out[0]) / calls * 1e6, float(out[1]) / calls * 1e6
    return wall, cpu, _server_us(client, "lpush"), process


def single_calls(
    client: redis.Redis, url: str, task: Any, calls: int, rounds: int, huey: Path | None
) -> dict[str, float]:
    queue = durq.Queue("profile-queue", url)
    transport = connection.sync_client(url)
    conn = transport.connection_pool.get_connection()
    paths: list[tuple[str, str, Callable[[int], object]]] = [
        ("durq transport PING", "ping", _exchange(conn, ("PING",))),
        ("durq transport LPUSH", "lpush", _exchange(conn, ("LPUSH", "profile-l", b"x" * 80))),
        ("redis-py LPUSH", "lpush", lambda i: client.lpush("profile-list", b"x" * 80)),
        ("Queue.enqueue(payload)", "fcall", lambda i: queue.enqueue({"n": i})),
        ("Task.enqueue(i)", "fcall", lambda i: task.enqueue(i)),
    ]
    rows: dict[str, list[tuple[float, float, float, float]]] = {}
    commands = {label: command for label, command, _ in paths}
    for _ in range(rounds):
        for label, command, call in paths:
            client.config_resetstat()
            before = _server_cpu(client)
            start, cpu = time.perf_counter(), time.process_time()
            for i in range(calls):
                call(i)
            wall = (time.perf_counter() - start) / calls * 1e6
            cpu = (time.process_time() - cpu) / calls * 1e6
            process = (_server_cpu(client) - before) / calls * 1e6
            rows.setdefault(label, []).append((wall, cpu, _server_us(client, command), process))
        if huey is not None:
            measured = _huey(client, url, calls, huey)
            if measured is not None:
                rows.setdefault("Huey enqueue", []).append(measured)
                commands["Huey enqueue"] = "lpush"
    print(
        f"1. single calls, one at a time, {rounds} interleaved rounds of {calls}: medians "
        "(wall: min too) per call"
    )
    print(f"   {'':24s} {'rate':>9s} {'wall':>6s} {'min':>6s} {'client CPU':>10s} "
          f"{'server cmd':>10s} {'server process CPU':>18s}")  # fmt: skip
    for label, values in rows.items():
        wall, cpu, server, process = (statistics.median(v[j] for v in values) for j in range(4))
        print(
            f"   {label:24s} {1e6 / wall:8,.0f}/s {wall:6.1f} {min(v[0] for v in values):6.1f} "
            f"{cpu:10.1f} {server:6.1f} ({commands[label]}) {process:12.1f}"
        )
    print("   (us; Huey runs in its own process, its server figures per call of its LPUSH)")
    transport.connection_pool.release(conn)
    transport.close()
    queue.close()
    return {label: statistics.median(v[0] for v in values) for label, values in rows.items()}


def script_server_time(client: redis.Redis, url: str, calls: int) -> dict[str, float]:
    queue = durq.Queue("profile-script", url)
    queue.enqueue({"n": 0})  # loads durq's library
    client.function_load(FLOOR_LIBRARY, replace=True)
    keys = list(queue.keys.vector)
    names = functions.library().functions
    data = b'["noop",[1],{}]'

    def fcall(function: str, argv: Callable[[str], list[Any]]) -> Callable[[str], object]:
        return lambda job: client.fcall(function, len(keys), *keys, *argv(job))

    single = lambda job: [job, data, 20, 1]  # noqa: E731
    variants = {
        "return 1": fcall("durq_profile_ret", single),
        "minimal plain-job function": fcall("durq_profile_plain", single),
        "enqueue_single": fcall(names["enqueue_single"], single),
        "enqueue_plain, one job": fcall(
            names["enqueue_plain"], lambda job: [1, job, data, 0, 0, 20, 1, "", "", 0]
        ),
    }
    print("2. server time per FCALL, same 17 keys (median of 5 interleaved runs, range)")
    times: dict[str, list[float]] = {label: [] for label in variants}
    for run in range(5):
        for k, (label, call) in enumerate(variants.items()):
            client.config_resetstat()
            for i in range(calls):
                call(f"s{run}.{k}.{i}")  # a new job id per call
            times[label].append(_server_us(client, "fcall"))
    out = {}
    for label, values in times.items():
        out[label] = statistics.median(values)
        print(f"   {label:28s} {out[label]:6.2f} us ({min(values):.2f}-{max(values):.2f})")
    client.function_delete("durq_profile_floor")
    queue.close()
    return out


def client_python(url: str, task: Any, calls: int) -> dict[str, float]:
    """Per call, with durq's socket exchange replaced by one that answers at once."""
    queue = durq.Queue("profile-python", url)
    queue.enqueue(0)
    task.enqueue(0)
    real = driver.sync_exchange
    driver.sync_exchange = lambda conn, packed, count: [[1, b"x"]] * count
    out: dict[str, float] = {}
    try:
        for label, call in (
            ("Task.enqueue(i)", lambda i: task.enqueue(i)),
            ("Queue.enqueue(payload)", lambda i: queue.enqueue({"n": i})),
        ):
            best = []
            for _ in range(15):  # short rounds, the least disturbed one counts
                start = time.perf_counter()
                for i in range(calls):
                    call(i)
                best.append((time.perf_counter() - start) / calls * 1e6)
            out[label] = min(best)
    finally:
        driver.sync_exchange = real
    queue.close()
    print(f"3. durq's client Python per call, socket I/O excluded (min of 15 x {calls})")
    for label, value in out.items():
        print(f"   {label:24s} {value:6.2f} us")
    return out


def budget(
    url: str,
    task: Any,
    walls: dict[str, float],
    script: dict[str, float],
    python: float,
    calls: int,
    rounds: int,
) -> None:
    """A ``Task.enqueue`` taken apart, interleaved in one window: the round trip of an
    FCALL of the same size that returns 1, of ``enqueue_single`` itself (packed per call,
    no durq Python around it), and the whole call; set against the server's and the
    client's own figures from sections 2 and 3."""
    client = connection.sync_client(url)
    client.function_load(FLOOR_LIBRARY, replace=True)
    conn = client.connection_pool.get_connection()
    queue = durq.Queue("profile-budget", url)
    queue.enqueue(0)  # durq's library is loaded
    keys = queue.keys.vector
    head = ("FCALL", functions.library().functions["enqueue_single"], len(keys), *keys)
    floor = _exchange(conn, ("FCALL", "durq_profile_ret", len(keys), *keys, "i" * 16, b"x", 20, 1))

    def single(i: int) -> object:
        packed = [hiredis.pack_command((*head, f"b{i}.{time.monotonic_ns()}", b"x", 20, 1))]
        return connection.sync_exchange(conn, packed, 1)

    paths = {"floor": floor, "single": single, "task": lambda i: task.enqueue(i)}
    walls_of: dict[str, list[float]] = {name: [] for name in paths}
    cpus: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
    for _ in range(rounds):
        for name, call in paths.items():
            before = _server_cpu(client)
            start, cpu = time.perf_counter(), time.process_time()
            for i in range(calls):
                call(i)
            walls_of[name].append((time.perf_counter() - start) / calls * 1e6)
            server_cpu = (_server_cpu(client) - before) / calls * 1e6
            cpus[name].append(((time.process_time() - cpu) / calls * 1e6, server_cpu))
    client.connection_pool.release(conn)
    client.function_delete("durq_profile_floor")
    client.close()
    queue.close()
    trip, bare, whole = (statistics.median(walls_of[name]) for name in paths)
    work = script["enqueue_single"] - script["return 1"]
    print(f"4. one Task.enqueue taken apart (medians of {rounds} interleaved rounds of {calls})")
    for name, label in (("floor", "return 1"), ("single", "enqueue_single"), ("task", "Task")):
        client_cpu = statistics.median(c for c, _ in cpus[name])
        server_cpu = statistics.median(s for _, s in cpus[name])
        print(
            f"   CPU per call, {label:15s} client {client_cpu:5.1f} us, server process "
            f"{server_cpu:5.1f} us (INFO cpu)"
        )
    print(f"   FCALL of the same size returning 1, durq's transport {trip:6.1f} us")
    print(
        f"   FCALL enqueue_single, durq's transport, no durq Python {bare:6.1f} us: "
        f"+{bare - trip:.1f} (server: +{work:.1f} us of script)"
    )
    print(
        f"   Task.enqueue(i)                                      {whole:6.1f} us: "
        f"+{whole - bare:.1f} (durq's Python alone: {python:.1f} us)"
    )
    if "Huey enqueue" in walls:
        huey, ours = walls["Huey enqueue"], walls["Task.enqueue(i)"]
        print(
            f"   section 1: Huey's enqueue {huey:.1f} us, Task.enqueue {ours:.1f} us: "
            f"durq at {huey / ours:.2f}x Huey's rate"
        )


def bulk(client: redis.Redis, task: Any, profile: bool) -> None:
    batches = [[(i,) for i in range(b * 1000, b * 1000 + 1000)] for b in range(100)]
    print("5. bulk: Task.enqueue_many, 100 calls of 1,000 jobs")
    for _ in range(3):
        client.flushall()
        client.config_resetstat()
        start, cpu = time.perf_counter(), time.process_time()
        for batch in batches:
            task.enqueue_many(batch)
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
        server = _server_us(client, "fcall") * 100 / 1e6
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
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    # short rounds, many: this VM's speed swings within seconds
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--no-huey", action="store_true", help="skip Huey's enqueue")
    parser.add_argument("--huey-python", type=Path, default=HUEY_PYTHON, help="Huey's venv")
    parser.add_argument("--cprofile", action="store_true", help="profile the bulk client")
    args = parser.parse_args()
    print(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), f"load {os.getloadavg()[0]:.2f}")
    with RedisServer(flavor="valkey") as server:
        client = redis.Redis.from_url(server.url)
        app = durq.App(url=server.url)

        @app.task(queue="profile")
        def noop(i: int) -> None:
            """Never runs: only enqueued."""

        huey = None if args.no_huey else args.huey_python
        walls = single_calls(client, server.url, noop, args.calls, args.rounds, huey)
        script = script_server_time(client, server.url, args.calls)
        python = client_python(server.url, noop, args.calls)
        budget(server.url, noop, walls, script, python["Task.enqueue(i)"], args.calls, args.rounds)
        bulk(client, noop, args.cprofile)
        app.close()
        client.close()


if __name__ == "__main__":
    main()

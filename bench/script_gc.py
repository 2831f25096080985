"""Where the server's Lua collector does its work: the slow script calls and their spacing.

    .venv/bin/python bench/script_gc.py [--rounds 1500] [--slow 300] [--payload 10]
    .venv/bin/python bench/script_gc.py --cold [--stepmul 200,50,25] [--cycles 500]

On a fresh server (Valkey, no persistence), enqueue, dequeue and release of one job, in
a loop (3 script calls a round), with the slow log catching every call slower than
``--slow`` us: prints how many there were per script, their median and longest time and
the gaps between them in calls, with the Functions VM's memory (``INFO memory``
``used_memory_vm_functions``) every 50 rounds.

Why: Valkey and Redis step the scripts' Lua collector themselves every 50 script calls
(``lua_gc(LUA_GCSTEP, 50)``: 50 KB of collector debt, up to 50 increments). Between those
steps the collector advances in small increments inside the scripts, in proportion to
what they allocate. A step that lands in the sweep frees a whole cycle's garbage and
walks the library's ~1 MB of objects in one call (0.5 to 1.1 ms). With a steady mix of
calls, the cycle's length in calls is fixed, so either no periodic step lands there or
one in every cycle does: slow calls at an exact period (e.g. every 150 calls). Which
one depends on what each script allocates per call and on the payloads, not on a slow
path in a script: a script that allocates less leaves more of the work to the periodic
step. Run it for the tree to judge (``--payload`` from 10 to 5000 bytes) before reading
a p99 difference of ``bench/latency_ab.py`` as a cost of the code.

With ``--cold``, instead: the collector's step multiplier, which durq sets at every call
(``durq.lua.functions.COLLECTOR_STEPMUL``). For each value of ``--stepmul`` (a library
built with that value, on a fresh server, the values in turn ``--repeat`` times), cycles
of the worker's four calls as an idle worker makes them: enqueue (the producer's),
dequeue (takes the job), release, dequeue (finds nothing), each after ``--gap`` s of an
idle server, so each runs cold as on the pickup path. Each call's server time is the
delta of ``cmdstat_fcall`` usec in INFO commandstats; prints p50 / p99 / max per call,
and p50 / p95 / p99 of enqueue + dequeue, the two calls on the pickup path, with the
Functions VM's memory at the end.

With ``--bystander``, instead: a tiny function of its own (about 2.7 KB of strings per
call) called 3 times ``--rounds`` on a fresh server, alone and then with durq's
library loaded beside it, unused: what the library's size alone costs every script of
the server (each collector cycle marks and sweeps all of it).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from typing import Any

import redis

import durq
from durq.dev.server import RedisServer
from durq.lua import functions
from durq.lua.functions import library

SCRIPTS = ("FCALL", "EVALSHA")


BYSTANDER = """#!lua name=bystander
redis.register_function('bystander', function(keys, args)
  local t = {}
  for i = 1, 24 do t[i] = string.format('%s:%d', args[1], i) .. string.rep('y', 60) end
  return #t
end)"""


def _bystander(calls: int, slow: int) -> None:
    """The bystander's server time alone and beside durq's library."""
    for with_durq in (False, True):
        with RedisServer(flavor="valkey") as server:
            client = redis.Redis.from_url(server.url)
            if with_durq:
                client.function_load(library().source)
            client.function_load(BYSTANDER)
            heap = int(client.info("memory")["used_memory_vm_functions"]) // 1024
            client.config_set("slowlog-max-len", 100000)
            client.config_set("slowlog-log-slower-than", slow)
            client.config_resetstat()
            client.slowlog_reset()
            for k in range(calls):
                client.fcall("bystander", 0, str(k))
            per_call = client.info("commandstats")["cmdstat_fcall"]["usec_per_call"]
            logged = [
                e["duration"]
                for e in client.slowlog_get(100000)
                if e["command"].startswith(b"FCALL")
            ]
            client.close()
        print(
            f"bystander, {'beside durq' if with_durq else 'alone'} (Functions VM {heap} KB): "
            f"{per_call:.1f} us per call; {len(logged)} of {calls} calls slower than {slow} us"
            + (f", max {max(logged)} us" if logged else "")
        )


def _cold_variant(stepmul: int, cycles: int, gap: float) -> str:
    """One value of the step multiplier: the cycles' per-call server time, as a line."""
    functions.COLLECTOR_STEPMUL = stepmul  # the library built next carries this value
    functions.library.cache_clear()
    assert f"collectgarbage('setstepmul', {stepmul})" in functions.library().source
    calls: dict[str, list[int]] = {"enqueue": [], "dequeue": [], "release": [], "idle": []}
    with RedisServer(flavor="valkey") as server:
        client = redis.Redis.from_url(server.url)
        queue = durq.Queue("gc", server.url)
        queue.release_many(queue.dequeue_many(1))  # the library loads
        jobs: list[Any] = []
        for _ in range(cycles):
            for name, spent in calls.items():
                time.sleep(gap)
                before = client.info("commandstats")["cmdstat_fcall"]["usec"]
                if name == "enqueue":
                    queue.enqueue({"pad": "x" * 10})
                elif name == "dequeue":
                    jobs = queue.dequeue_many(1)
                elif name == "release":
                    queue.release_many(jobs)
                else:
                    queue.dequeue_many(1)
                spent.append(client.info("commandstats")["cmdstat_fcall"]["usec"] - before)
        heap = int(client.info("memory")["used_memory_vm_functions"]) // 1024
        queue.close()
        client.close()

    def pct(values: list[int], q: float) -> int:
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))]

    path = [a + b for a, b in zip(calls["enqueue"], calls["dequeue"], strict=True)]
    parts = [f"{name} {pct(v, 0.5)}/{pct(v, 0.99)}/{max(v)}" for name, v in calls.items()]
    return (
        f"stepmul {stepmul:3d} (VM {heap} KB): p50/p99/max us: {', '.join(parts)}; "
        f"enqueue+dequeue p50 {pct(path, 0.5)} p95 {pct(path, 0.95)} p99 {pct(path, 0.99)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1500)
    parser.add_argument("--slow", type=int, default=300, help="us; slower calls are listed")
    parser.add_argument("--payload", type=int, default=10, help="bytes of each job's payload")
    parser.add_argument("--bystander", action="store_true", help="the library's size alone")
    parser.add_argument("--cold", action="store_true", help="the step multiplier, calls cold")
    parser.add_argument("--stepmul", default="200,50,25", help="--cold: values to compare")
    parser.add_argument("--cycles", type=int, default=500, help="--cold: cycles per value")
    parser.add_argument("--gap", type=float, default=0.0025, help="--cold: s idle per call")
    parser.add_argument("--repeat", type=int, default=2, help="--cold: passes over the values")
    args = parser.parse_args()
    if args.cold:
        for _ in range(args.repeat):
            for stepmul in (int(v) for v in args.stepmul.split(",")):
                print(_cold_variant(stepmul, args.cycles, args.gap), flush=True)
        return
    if args.bystander:
        _bystander(3 * args.rounds, args.slow)
        return
    _periodic(args.rounds, args.slow, args.payload)


def _periodic(rounds: int, slow_us: int, payload: int) -> None:
    """Back-to-back cycles of enqueue, dequeue and release: the slow calls, their gaps."""
    with RedisServer(flavor="valkey") as server:
        client = redis.Redis.from_url(server.url)
        queue = durq.Queue("gc", server.url)
        queue.enqueue_many([0])  # the library loads, the queue's keys exist
        queue.release_many(queue.dequeue_many(1))
        client.config_set("slowlog-max-len", 100000)
        client.config_set("slowlog-log-slower-than", slow_us)
        client.slowlog_reset()
        seen = 0
        slow: list[tuple[int, str, int]] = []  # (call number, script, us)
        memory: list[int] = []
        jobs: list[Any] = []
        pad = "x" * payload
        for i in range(rounds):
            for k, name in enumerate(("enqueue", "dequeue", "release")):
                if name == "enqueue":
                    queue.enqueue_many([{"pad": pad}])
                elif name == "dequeue":
                    jobs = queue.dequeue_many(1)
                else:
                    queue.release_many(jobs)
                logged = client.slowlog_len()
                if logged != seen:  # one call at a time: the newest entry is this call's
                    seen = logged
                    entry = client.slowlog_get(1)[0]
                    if entry["command"].split(b" ")[0].decode() in SCRIPTS:
                        slow.append((3 * i + k + 1, name, entry["duration"]))
            if i % 50 == 0:
                memory.append(int(client.info("memory")["used_memory_vm_functions"]))
        queue.close()
        client.close()
    print(
        f"{3 * rounds} script calls, payload {payload} B; Lua memory of the "
        f"Functions VM {min(memory) // 1024}-{max(memory) // 1024} KB"
    )
    print(f"calls slower than {slow_us} us: {len(slow)}")
    for name in ("enqueue", "dequeue", "release"):
        us = sorted(d for _, n, d in slow if n == name)
        if us:
            print(
                f"  {name:8s} {len(us):4d}  median {statistics.median(us):6.0f} us  max {us[-1]} us"
            )
    calls = [c for c, _, _ in slow]
    gaps = [b - a for a, b in itertools.pairwise(calls)]
    print("gaps between them, in calls:", gaps[:40])


if __name__ == "__main__":
    main()

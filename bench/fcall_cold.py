"""Server time of the FCALLs on the pickup path, cold (one call every 10 ms) and warm.

    .venv/bin/python bench/fcall_cold.py [--cycles 300] [--gap 0.01] [--want 4] [--kinds]

On a fresh server (Valkey, no persistence), durq's library loaded, one job's way as an
idle worker sees it, each FCALL sent alone after ``--gap`` s of an idle server (the CPU
then cold, as when jobs trickle in): ``enqueue_single`` to an empty queue (the enqueue
that wakes the worker), the ``dequeue`` that takes the job (the fetch pipelined after the
worker's BZPOPMIN: on the pickup path), ``release``, the ``dequeue`` that finds the queue
empty (before the worker blocks again), and an FCALL of a function that returns 1 with
the same keys (the floor of a cold call). Then the same cycle back to back (warm).

Each call's server time is the delta of ``cmdstat_fcall`` usec in INFO commandstats,
read right after the call (the previous reading is the one after the previous call, so
nothing but the call itself runs on the server between the gap and the call). Unlike
the slow log at 0 µs, which makes an entry of every command a script runs (Valkey logs
a script's inner commands too) and so inflates the time of a script of many commands,
this adds nothing to the call. Prints median and p90 per call (µs).

With ``--kinds``, instead: cold FCALLs of functions that make 12 calls of one command
against 12 calls of 12 different commands (the same small keys), which shows what a cold
script pays for: each distinct command it runs (its code and data out of the caches),
several µs, where another call of a command already run costs well under one.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import redis

import durq
from durq.dev.server import RedisServer
from durq.lua.functions import library
from durq.protocol.record import record_fields

_FLOOR = (
    "#!lua name=durq_cold_floor\n"
    "redis.register_function('durq_cold_floor', function() return 1 end)"
)


def _fcall_usec(client: redis.Redis) -> tuple[int, int]:
    stats = client.info("commandstats").get("cmdstat_fcall", {"calls": 0, "usec": 0})
    return int(stats["calls"]), int(stats["usec"])


class _Meter:
    """Server time of each FCALL, from the commandstats after it."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.last = _fcall_usec(client)
        self.times: dict[str, dict[str, list[int]]] = {}
        self.mode = ""

    def call(self, label: str, *command: Any) -> Any:
        reply = self.client.execute_command(*command)
        calls, usec = _fcall_usec(self.client)
        if calls != self.last[0] + 1:
            raise SystemExit(f"{label}: {calls - self.last[0]} FCALLs seen, expected one")
        self.times.setdefault(self.mode, {}).setdefault(label, []).append(usec - self.last[1])
        self.last = (calls, usec)
        return reply


def _cycle(
    meter: _Meter, fn: dict[str, str], keys: list[str], i: int, gap: float, want: int
) -> None:
    """One job's way through the queue, each call after ``gap`` s."""
    nk = len(keys)
    time.sleep(gap)
    status, _ = meter.call(
        "enqueue_single (empty queue)",
        "FCALL", fn["enqueue_single"], nk, *keys, f"job-{i}", b'{"a":[],"k":{}}', 3, 0,
    )  # fmt: skip
    if int(status) != 1:  # CREATED
        raise SystemExit(f"enqueue_single answered {status}")
    time.sleep(gap)
    reply = meter.call(
        "dequeue (takes the job)", "FCALL", fn["dequeue"], nk, *keys, want, 30000, "c1"
    )
    if len(reply) != 6:
        raise SystemExit(f"dequeue handed out {(len(reply) - 4) // 2} jobs, expected 1")
    fields = record_fields(reply[5], "replace")
    assert fields is not None
    token = f"{fields[5]}.{fields[8]}"  # deliveries, dequeued_at (as parse_dequeue)
    time.sleep(gap)
    statuses = meter.call(
        "release", "FCALL", fn["release"], nk, *keys, 0, 3600000, 1, reply[4], token, b""
    )
    if int(statuses[0]) != 0:
        raise SystemExit(f"release answered {statuses}")
    time.sleep(gap)
    reply = meter.call("dequeue (finds none)", "FCALL", fn["dequeue"], nk, *keys, want, 30000, "c1")
    if len(reply) != 4:
        raise SystemExit("the empty dequeue handed out a job")
    time.sleep(gap)
    meter.call("FCALL of return 1 (floor)", "FCALL", "durq_cold_floor", nk, *keys)


_KINDS = """#!lua name=durq_cold_kinds
local MIX = {{'HEXISTS', 'h', 'x'}, {'ZSCORE', 'z', 'x'}, {'TIME'}, {'SISMEMBER', 's', 'x'},
  {'LLEN', 'l'}, {'HLEN', 'h'}, {'ZRANGEBYSCORE', 'z', '-inf', '100', 'LIMIT', '0', '1'},
  {'HMGET', 'h', 'a', 'b'}, {'TYPE', 'h'}, {'ZCARD', 'z'}, {'EXISTS', 'h'},
  {'ZRANGE', 'z', '0', '0', 'WITHSCORES'}}
redis.register_function('durq_cold_none', function(keys) return 1 end)
redis.register_function('durq_cold_one_kind', function(keys)
  for i = 1, 12 do redis.call('HEXISTS', keys[1] .. 'h', 'x') end
  return 1
end)
redis.register_function('durq_cold_type', function(keys)
  for i = 1, 12 do redis.call('TYPE', keys[1] .. 'h') end
  return 1
end)
redis.register_function('durq_cold_twelve_kinds', function(keys)
  for i = 1, 12 do
    local c = MIX[i]
    if c[2] then redis.call(c[1], keys[1] .. c[2], unpack(c, 3)) else redis.call(c[1]) end
  end
  return 1
end)
"""


def _kinds(client: redis.Redis, calls: int, gap: float) -> None:
    client.execute_command("FUNCTION", "LOAD", "REPLACE", _KINDS)
    client.hset("{k}h", "a", "1")
    client.zadd("{k}z", {"m": 1})
    client.sadd("{k}s", "m")
    client.rpush("{k}l", "m")
    meter = _Meter(client)
    meter.mode = "kinds"
    labels = {
        "durq_cold_none": "no command",
        "durq_cold_one_kind": "12 x HEXISTS",
        "durq_cold_type": "12 x TYPE",
        "durq_cold_twelve_kinds": "12 different commands",
    }
    for _ in range(calls):
        for function, label in labels.items():
            time.sleep(gap)
            meter.call(label, "FCALL", function, 1, "{k}")
    _print(f"cold: one FCALL after {gap * 1000:g} ms idle", meter.times["kinds"])


def _print(title: str, times: dict[str, list[int]]) -> None:
    print(title)
    for label, us in times.items():
        us = sorted(us)
        print(
            f"   {label:30s} median {statistics.median(us):6.1f} us"
            f"   p90 {us[int(len(us) * 0.9)]:4d} us   (n={len(us)})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--gap", type=float, default=0.01, help="idle seconds before a cold call")
    parser.add_argument("--want", type=int, default=4, help="jobs a dequeue asks for")
    parser.add_argument("--kinds", action="store_true", help="one command kind against many")
    args = parser.parse_args()
    with RedisServer(flavor="valkey") as server:
        if args.kinds:
            _kinds(redis.Redis.from_url(server.url), args.cycles, args.gap)
            return
        queue = durq.Queue("cold", server.url)
        queue.stats()  # loads durq's library
        client = redis.Redis.from_url(server.url)
        client.execute_command("FUNCTION", "LOAD", "REPLACE", _FLOOR)
        fn = library().functions
        keys = list(queue.keys.vector)
        meter = _Meter(client)
        for i in range(20):  # first calls (connections, lazy allocations)
            _cycle(meter, fn, keys, -1 - i, 0, args.want)
        for i in range(args.cycles):
            meter.mode = "cold"
            _cycle(meter, fn, keys, 2 * i, args.gap, args.want)
            meter.mode = "warm"
            _cycle(meter, fn, keys, 2 * i + 1, 0, args.want)
        _print(f"cold: one FCALL after {args.gap * 1000:g} ms idle", meter.times["cold"])
        _print("warm: the same calls back to back", meter.times["warm"])
        queue.close()
        client.close()


if __name__ == "__main__":
    main()

"""Server time of the FCALLs on the pickup path, cold (one call every 10 ms) and warm.

    .venv/bin/python bench/fcall_cold.py [--cycles 300] [--gap 0.01] [--want 4]
        [--ab OTHER/src] [--parts] [--kinds]

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

With ``--ab OTHER/src``, two servers: one with the library of the tree at OTHER (A),
one with this tree's (B), the cycles alternating between them (A cold, B cold, A warm,
B warm, ...), so that both see the same machine: on a shared machine, runs one after
the other differ more than two libraries do.

With ``--parts``, instead: where a cold call's time goes. Cold, in turn: enqueue_single
to an empty queue, a function that runs the same 12 commands straight-line with no other
Lua (on a queue of its own), the dequeue that takes the job, the same for its 24
commands, and the floor. durq's call minus the bare one is what its Lua costs cold.

With ``--kinds``, instead: cold FCALLs of functions that make 12 calls of one command
against 12 calls of 12 different commands (the same small keys), which shows what a cold
script pays for: each distinct command it runs (its code and data out of the caches),
several µs, where another call of a command already run costs well under one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import redis

import durq
import durq.keys
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
redis.register_function('durq_cold_one_kind_12_keys', function(keys)
  for i = 1, 12 do redis.call('HEXISTS', keys[1] .. 'h' .. i, 'x') end
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
    for i in range(1, 13):
        client.hset(f"{{k}}h{i}", "a", "1")
    client.zadd("{k}z", {"m": 1})
    client.sadd("{k}s", "m")
    client.rpush("{k}l", "m")
    meter = _Meter(client)
    meter.mode = "kinds"
    labels = {
        "durq_cold_none": "no command",
        "durq_cold_one_kind": "12 x HEXISTS",
        "durq_cold_one_kind_12_keys": "12 x HEXISTS, 12 keys",
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
            f"   {label:42s} median {statistics.median(us):6.1f} us"
            f"   p90 {us[int(len(us) * 0.9)]:4d} us   (n={len(us)})"
        )


# the commands that enqueue_single (to an empty queue) and the dequeue that takes its job
# run, straight-line with no other Lua: what the same calls cost without durq's code
_BARE = """#!lua name=durq_cold_bare
redis.register_function('durq_cold_bare_enqueue', function(keys, args)
  local id = args[1]
  redis.call('HEXISTS', keys[2], id)
  redis.call('ZSCORE', keys[8], id)
  redis.call('TIME')
  redis.call('SISMEMBER', keys[4], '')
  redis.call('LLEN', keys[3])
  redis.call('RPUSH', keys[1] .. 'pending', id)
  redis.call('HSET', keys[2], id, args[2])
  redis.call('RPUSH', keys[3], '')
  redis.call('SADD', keys[4], '')
  redis.call('HINCRBY', keys[11], 'ready', 1)
  redis.call('HINCRBY', keys[11], 'enqueued', 1)
  redis.call('ZADD', keys[13], 0, '0')
  return {1, id}
end)
redis.register_function('durq_cold_bare_dequeue', function(keys, args)
  local p = keys[1]
  redis.call('EXISTS', p .. 'flow')
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZRANGEBYSCORE', keys[5], '-inf', now, 'LIMIT', 0, 100)
  redis.call('ZRANGEBYSCORE', keys[6], '-inf', now, 'LIMIT', 0, 1000)
  redis.call('ZRANGEBYSCORE', p .. 'sched', '-inf', now, 'LIMIT', 0, 100)
  redis.call('HLEN', keys[17])
  redis.call('HMGET', keys[12], 'group_limit', 'dedup_window', 'dead_cap', 'seq')
  redis.call('HLEN', keys[16])
  redis.call('LLEN', keys[3])
  for _, i in ipairs({2, 7, 8, 9, 4, 15}) do redis.call('TYPE', keys[i]) end
  redis.call('LPOP', keys[3], 1)
  local ids = redis.call('LPOP', p .. 'pending', 4)
  local raws = redis.call('HMGET', keys[2], ids[1])
  redis.call('ZCARD', p .. 'prio')
  redis.call('SREM', keys[4], '')
  redis.call('HSET', keys[2], ids[1], raws[1])
  redis.call('ZADD', keys[5], now + 30000, ids[1])
  redis.call('ZRANGEBYSCORE', keys[8], '-inf', now, 'LIMIT', 0, 100)
  redis.call('HINCRBY', keys[11], 'ready', -1)
  return {now, now + 30000, -1, 0, ids[1], raws[1]}
end)
redis.register_function('durq_cold_bare_clean', function(keys)
  redis.call('DEL', keys[1] .. 'pending', keys[2], keys[3], keys[4], keys[5], keys[11], keys[13])
  return 1
end)
"""


def _parts(client: redis.Redis, cycles: int, gap: float, want: int) -> None:
    """Where a cold call's time goes: durq's call, the same commands with no other Lua,
    and the floor."""
    source, fn = _library_of(None)
    for text in (source, _BARE):
        client.execute_command("FUNCTION", "LOAD", "REPLACE", text)
    client.execute_command("FUNCTION", "LOAD", "REPLACE", _FLOOR)
    keys = list(durq.keys.QueueKeys("cold").vector)
    bare = list(durq.keys.QueueKeys("bare").vector)
    meter = _Meter(client)
    for i in range(cycles + 20):
        meter.mode = "parts" if i >= 20 else "first"
        calls: list[tuple[str, tuple[Any, ...]]] = [
            ("enqueue_single", ("FCALL", fn["enqueue_single"], len(keys), *keys, f"j{i}",
                                b'{"a":[],"k":{}}', 3, 0)),
            ("   its commands, no other Lua", ("FCALL", "durq_cold_bare_enqueue", len(bare),
                                                *bare, f"j{i}", b"x" * 40)),
            ("dequeue (takes the job)", ("FCALL", fn["dequeue"], len(keys), *keys, want, 30000,
                                         "c1")),
            ("   its commands, no other Lua", ("FCALL", "durq_cold_bare_dequeue", len(bare),
                                                *bare)),
            ("FCALL of return 1 (floor)", ("FCALL", "durq_cold_floor", len(keys), *keys)),
        ]  # fmt: skip
        for label, command in calls:
            time.sleep(gap)
            # the rows of one label are told apart by the call they follow
            key = f"{label} ({command[1][-7:]})" if label.startswith(" ") else label
            reply = meter.call(key, *command)
            if command[1] == fn["dequeue"]:
                job = reply
        fields = record_fields(job[5], "replace")
        assert fields is not None
        meter.mode = "cleanup"
        token = f"{fields[5]}.{fields[8]}"
        meter.call("release", "FCALL", fn["release"], len(keys), *keys, 0, 3600000, 1, job[4],
                   token, b"")  # fmt: skip
        meter.call("clean", "FCALL", "durq_cold_bare_clean", len(bare), *bare)
    _print(f"cold: one FCALL after {gap * 1000:g} ms idle", meter.times["parts"])


_LIBRARY = (
    "import json, durq.lua.functions as f; l = f.library(); "
    "print(json.dumps({'source': l.source, 'functions': l.functions}))"
)


def _library_of(src: str | None) -> tuple[str, dict[str, str]]:
    """The Functions library (source, function by operation) of the tree whose ``src``
    is given, or of this process's durq."""
    if src is None:
        return library().source, library().functions
    out = subprocess.run(
        [sys.executable, "-c", _LIBRARY],
        env={**os.environ, "PYTHONPATH": src},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    built = json.loads(out)
    return built["source"], built["functions"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--gap", type=float, default=0.01, help="idle seconds before a cold call")
    parser.add_argument("--want", type=int, default=4, help="jobs a dequeue asks for")
    parser.add_argument("--kinds", action="store_true", help="one command kind against many")
    parser.add_argument("--parts", action="store_true", help="where a cold call's time goes")
    parser.add_argument(
        "--ab", metavar="SRC", help="another tree's src/: its library (A) against this one (B)"
    )
    args = parser.parse_args()
    if args.kinds or args.parts:
        with RedisServer(flavor="valkey") as server:
            client = redis.Redis.from_url(server.url)
            if args.kinds:
                _kinds(client, args.cycles, args.gap)
            else:
                _parts(client, args.cycles, args.gap, args.want)
        return
    trees = {"A": args.ab, "B": None} if args.ab else {"": None}
    with contextlib.ExitStack() as stack:
        sides = {}
        for side, src in trees.items():
            server = stack.enter_context(RedisServer(flavor="valkey"))
            client = redis.Redis.from_url(server.url)
            stack.callback(client.close)
            source, fn = _library_of(src)
            client.execute_command("FUNCTION", "LOAD", "REPLACE", source)
            client.execute_command("FUNCTION", "LOAD", "REPLACE", _FLOOR)
            sides[side] = (_Meter(client), fn)
        keys = list(durq.keys.QueueKeys("cold").vector)
        for meter, fn in sides.values():
            for i in range(20):  # first calls (connections, lazy allocations)
                _cycle(meter, fn, keys, -1 - i, 0, args.want)
        # the sides alternate cycle by cycle, so that both see the same machine
        for i in range(args.cycles):
            for mode, gap in (("cold", args.gap), ("warm", 0)):
                for meter, fn in sides.values():
                    meter.mode = mode
                    _cycle(meter, fn, keys, 2 * i + (mode == "warm"), gap, args.want)
        for side, (meter, _) in sides.items():
            name = f"{side}: " if side else ""
            _print(f"{name}cold: one FCALL after {args.gap * 1000:g} ms idle", meter.times["cold"])
            _print(f"{name}warm: the same calls back to back", meter.times["warm"])


if __name__ == "__main__":
    main()

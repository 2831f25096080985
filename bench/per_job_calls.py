"""What dequeue and release cost the server per call, and which commands they run.

    .venv/bin/python bench/per_job_calls.py [--rounds 200] [--gap 0.01] [--warm 0] [--versus REV]

On a fresh server (Valkey, no persistence), for dequeue of 1 job from an idle queue (one
call every 10 ms, ``--gap``, as work trickles in: the pickup path), dequeue of 100 jobs,
and release of 1 and of 100 jobs: the server time of the EVALSHA (``INFO commandstats``
after ``CONFIG RESETSTAT`` around each call) and the commands the script ran
(commandstats counts the commands a script makes too). Prints the p10, median and p90
of the server time and the commands of one call, TYPE apart. With ``--versus REV`` (a
git revision), each call is also made, in turn with the current one in the same run,
with the dequeue and release scripts of REV: a comparison that the load of a shared
machine skews less than two runs. With ``--warm N``, also N blocks of 200 dequeues of 1
job in a row, then 200 releases, each block's server time per call from
``usec_per_call`` (no INFO between the calls).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import redis

import durq
from durq import lua
from durq.dev.server import RedisServer

LUA_DIR = "src/durq/lua/"


def _scripts_of(rev: str) -> dict[str, lua.Script]:
    """The dequeue and release scripts as of git revision ``rev``, flattened."""
    root = Path(__file__).resolve().parent.parent

    def read(name: str) -> str:
        show = ["git", "-C", str(root), "show", f"{rev}:{LUA_DIR}{name}.lua"]
        return subprocess.run(show, check=True, capture_output=True, text=True).stdout

    current = lua._read
    lua._read = read
    try:
        sources = {name: lua._flatten(name, (), set()) for name in ("dequeue", "release")}
    finally:
        lua._read = current
    return {
        name: lua.Script(name, source, hashlib.sha1(source.encode()).hexdigest())
        for name, source in sources.items()
    }


def _using(scripts: dict[str, lua.Script] | None) -> None:
    """Make the queues run ``scripts`` (None: the current ones) for those names."""
    if scripts is None:
        lua.load = _current_load
    else:
        lua.load = lambda name: scripts.get(name) or _current_load(name)  # type: ignore[assignment]


_current_load = lua.load


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


def _warm(
    client: redis.Redis,
    queue: durq.Queue,
    variants: dict[str, dict[str, lua.Script] | None],
    blocks: int,
) -> None:
    """Dequeue and release of 1 job, warm: ``blocks`` blocks of 200 calls in a row per
    variant (in turn), each block's server time per call from ``usec_per_call``."""
    per_call: dict[str, list[float]] = {}
    for i in range(blocks):
        order = list(variants.items())
        for suffix, scripts in order[i % len(order) :] + order[: i % len(order)]:
            _using(scripts)
            queue.enqueue_many(range(200))
            client.config_resetstat()
            jobs = [queue.dequeue_many(1)[0] for _ in range(200)]
            stats = client.info("commandstats")["cmdstat_evalsha"]
            per_call.setdefault(f"dequeue 1{suffix}", []).append(stats["usec_per_call"])
            client.config_resetstat()
            for job in jobs:
                queue.release_many([job])
            stats = client.info("commandstats")["cmdstat_evalsha"]
            per_call.setdefault(f"release 1{suffix}", []).append(stats["usec_per_call"])
    _using(None)
    print(f"warm: server time per EVALSHA, blocks of 200 calls in a row (n={blocks})")
    for label in sorted(per_call):
        us = sorted(per_call[label])
        print(f"  {label:22s} min {us[0]:6.1f} us  median {statistics.median(us):6.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--gap", type=float, default=0.01, help="seconds between calls")
    parser.add_argument("--warm", type=int, default=0, help="blocks of warm calls (0: none)")
    parser.add_argument("--versus", help="a git revision whose scripts to compare with")
    args = parser.parse_args()
    # the variants are scripts swapped in by name and run by SHA: EVALSHA, not the
    # Functions library (one fixed version per server), so the figures are EVALSHA's
    os.environ["DURQ_EVALSHA"] = "1"
    variants: dict[str, dict[str, lua.Script] | None] = {"": None}
    if args.versus:
        variants[f" ({args.versus})"] = _scripts_of(args.versus)
    with RedisServer(flavor="valkey") as server:
        client = redis.Redis.from_url(server.url)
        queue = durq.Queue("calls", server.url)
        times: dict[str, list[float]] = {}
        commands: dict[str, dict[str, int]] = {}

        def record(label: str, usec: float, calls: dict[str, int]) -> None:
            times.setdefault(label, []).append(usec)
            commands[label] = calls

        for n in (1, 100):
            for i in range(args.rounds):
                # each variant goes first in turn: a call pays for the garbage the call
                # before it left (Lua's collector), so a fixed order would favour one
                order = list(variants.items())
                for suffix, scripts in order[i % len(order) :] + order[: i % len(order)]:
                    _using(scripts)
                    queue.enqueue_many([{"n": i} for i in range(n)])
                    time.sleep(args.gap)
                    jobs, usec, calls = _measured(client, lambda n=n: queue.dequeue_many(n))
                    assert len(jobs) == n
                    record(f"dequeue {n}{suffix}", usec, calls)
                    time.sleep(args.gap)
                    _, usec, calls = _measured(client, lambda j=jobs: queue.release_many(j))
                    record(f"release {n}{suffix}", usec, calls)
        _using(None)
        print(f"server time per EVALSHA (n={args.rounds}, {args.gap * 1000:g} ms between calls)")
        for label, us in times.items():
            us.sort()
            calls = commands[label]
            other = ", ".join(f"{k} {v}" for k, v in sorted(calls.items()) if k != "type")
            print(
                f"  {label:22s} p10 {us[len(us) // 10]:6.1f} us  median "
                f"{statistics.median(us):6.1f} us  p90 "
                f"{us[int(len(us) * 0.9)]:6.1f} us  TYPE {calls.get('type', 0):2d}  "
                f"commands {sum(calls.values()):3d}: {other}"
            )
        if args.warm:
            _warm(client, queue, variants, args.warm)
        queue.close()
        client.close()


if __name__ == "__main__":
    main()

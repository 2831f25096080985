"""What a durq script costs the server when it runs cold, and how much of it is the
definitions a Redis function library would make once.

    .venv/bin/python bench/script_cold.py [--calls 300] [--script dequeue]

On a fresh server (Valkey, no persistence): captures the keys and arguments of one real
call of the script (``dequeue``: a fetch from an empty queue; ``enqueue_plain``: one
job), then, once every 10 ms as a queue sees it when work trickles in, calls in turn:
EVALSHA of ``return 1`` with the same keys and arguments (the floor: the call itself,
KEYS and ARGV), EVALSHA of the script's definitions only (its flattened source up to the
main body, then ``return 1``), the whole script, and FCALL of a function that returns 1
(what a call costs once the definitions live in a loaded library). Each call's server
time comes from the slow log (threshold 0 around that one call). Prints median and p90.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import redis

import durq
from durq import lua
from durq.dev.server import RedisServer

# where each script's main body begins (its definitions come before)
BODY_START = {
    "dequeue": "local want = tonumber(ARGV[1])",
    "enqueue_plain": "local n = tonumber(ARGV[1])",
}


def _timed(client: redis.Redis, command: bytes, *call: Any) -> int:
    client.config_set("slowlog-log-slower-than", 0)
    client.slowlog_reset()
    client.execute_command(*call)
    client.config_set("slowlog-log-slower-than", 10000)
    return next(
        int(e["duration"]) for e in client.slowlog_get(10) if e["command"].startswith(command)
    )


def _capture(client: redis.Redis, queue: durq.Queue, script: str) -> list[bytes]:
    """The EVALSHA arguments (numkeys, keys, argv) of one real call of ``script``."""
    client.config_set("slowlog-log-slower-than", 0)
    client.slowlog_reset()
    if script == "dequeue":
        queue.dequeue()
    else:
        queue.enqueue({"n": 0})
    client.config_set("slowlog-log-slower-than", 10000)
    sha = lua.load(script).sha.encode()
    for entry in client.slowlog_get(50):
        words = entry["command"].split(b" ")
        if words[0] == b"EVALSHA" and words[1] == sha:
            return words[2:]
    raise SystemExit(f"no call of {script} seen in the slow log")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--script", choices=sorted(BODY_START), default="dequeue")
    args = parser.parse_args()
    with RedisServer(flavor="valkey") as server:
        client = redis.Redis.from_url(server.url)
        queue = durq.Queue("cold", server.url)
        rest = _capture(client, queue, args.script)
        source = lua.load(args.script).source
        body = source.index(BODY_START[args.script])
        variants = {
            "EVALSHA of return 1": client.script_load("return 1"),
            "EVALSHA of the definitions": client.script_load(source[:body] + "return 1"),
            f"EVALSHA of {args.script}": client.script_load(source),
        }
        client.execute_command(
            "FUNCTION", "LOAD", "REPLACE",
            "#!lua name=cold\nredis.register_function('cold_one', function() return 1 end)",
        )  # fmt: skip
        times: dict[str, list[int]] = {label: [] for label in [*variants, "FCALL of return 1"]}
        for i in range(args.calls):
            for label, sha in variants.items():
                call = list(rest)
                if args.script == "enqueue_plain":  # a new job id each time
                    call[int(call[0]) + 2] = f"cold-{label[:12]}-{i}".encode()
                times[label].append(_timed(client, b"EVALSHA", "EVALSHA", sha, *call))
                time.sleep(0.01)
            times["FCALL of return 1"].append(_timed(client, b"FCALL", "FCALL", "cold_one", *rest))
            time.sleep(0.01)
        print(f"{args.script}: server time per call, one call every 10 ms (n={args.calls})")
        for label, us in times.items():
            us.sort()
            print(
                f"   {label:32s} median {statistics.median(us):6.1f} us"
                f"   p90 {us[int(len(us) * 0.9)]:4d} us"
            )
        queue.close()
        client.close()


if __name__ == "__main__":
    main()

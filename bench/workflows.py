"""Workflow benchmark: the cost of fan-in per step.

    .venv/bin/python bench/workflows.py [--n 10000] [--reps 3] [--json out.json]

Against a fresh Valkey with one ``durq worker`` process (concurrency 50), alternately:

- plain: N no-op jobs enqueued with ``enqueue_many`` (one round trip per 1,000), timed
  until the queue's completed counter says all ran;
- group: ``durq.group([noop.s(i) for i in range(N)]).then(collect.s())`` enqueued (one
  script call) and timed until ``handle.result()`` returns (the callback ran with all N
  results).

Reported: the medians of both wall times, the submission time of the workflow and of the
plain jobs, the difference per step (the fan-in overhead: the workflow's bookkeeping per
step plus the callback's run with N results), and the server's slow log (commands over
5 ms: no script should run long).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _wait_completed(queue: Any, target: int, timeout: float = 300.0) -> None:
    give_up = time.monotonic() + timeout
    while queue.stats().completed < target:
        if time.monotonic() > give_up:
            raise TimeoutError(f"completed {queue.stats().completed} of {target}")
        time.sleep(0.005)


def plain(app: Any, n: int) -> tuple[float, float]:
    queue = app.queue("wfbench")
    noop = app.tasks["noop"]
    base = queue.stats().completed
    start = time.perf_counter()
    for first in range(0, n, 1000):
        noop.enqueue_many([(i,) for i in range(first, min(first + 1000, n))])
    submitted = time.perf_counter() - start
    _wait_completed(queue, base + n)
    return time.perf_counter() - start, submitted


def group(app: Any, n: int) -> tuple[float, float]:
    import durq

    noop, collect = app.tasks["noop"], app.tasks["collect"]
    flow = durq.group([noop.s(i) for i in range(n)]).then(collect.s())
    start = time.perf_counter()
    handle = flow.enqueue()
    submitted = time.perf_counter() - start
    assert handle.result(300) == n
    return time.perf_counter() - start, submitted


def _slow_scripts(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The slow log by script: how many calls took over 5 ms, and the longest (ms)."""
    from durq import lua

    names = {s.sha: name for name, s in lua.load_all().items()}
    out: dict[str, Any] = {}
    for e in entries:
        words = e["command"].split()
        name = names.get(words[1].decode(), words[0].decode()) if len(words) > 1 else "?"
        row = out.setdefault(name, {"calls": 0, "max_ms": 0.0})
        row["calls"] += 1
        row["max_ms"] = max(row["max_ms"], e["duration"] / 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    from durq.dev.server import RedisServer

    with RedisServer(flavor="valkey") as server:
        env = {**os.environ, "BENCH_REDIS_URL": server.url, "PYTHONPATH": str(HERE)}
        os.environ["BENCH_REDIS_URL"] = server.url
        sys.path.insert(0, str(HERE))
        from workflows_app import app

        worker = subprocess.Popen(
            [sys.executable, "-m", "durq", "worker", "workflows_app:app", "-q", "wfbench",
             "-c", "50", "--log-level", "warning"],
            env=env,
        )  # fmt: skip
        try:
            plain(app, 1000)  # warm up: scripts loaded, worker connected
            group(app, 1000)
            client = app.queue("wfbench").client
            client.config_set("slowlog-log-slower-than", 5000)  # 5 ms
            client.config_set("slowlog-max-len", 10000)
            client.slowlog_reset()
            runs: dict[str, list[float]] = {k: [] for k in ("plain", "plain_submit",
                                                            "group", "group_submit")}  # fmt: skip
            for _ in range(args.reps):
                total, sub = plain(app, args.n)
                runs["plain"].append(total)
                runs["plain_submit"].append(sub)
                total, sub = group(app, args.n)
                runs["group"].append(total)
                runs["group_submit"].append(sub)
            slow = _slow_scripts(client.slowlog_get(10000))
        finally:
            worker.terminate()
            worker.wait(30)
    med = {k: statistics.median(v) for k, v in runs.items()}
    results = {
        "n": args.n,
        "reps": args.reps,
        "runs_s": runs,
        "median_s": med,
        "plain_jobs_per_s": args.n / med["plain"],
        "group_steps_per_s": args.n / med["group"],
        "fan_in_overhead_per_step_us": (med["group"] - med["plain"]) / args.n * 1e6,
        "scripts_over_5ms": slow,
    }
    print(json.dumps(results, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

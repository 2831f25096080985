"""One drain measurement of an unlimited queue, run by bench/flow.py under a given
checkout's interpreter (this branch's or the main branch's venv): prints one JSON line.

    <venv>/bin/python bench/flow_drain.py --url URL --mode engine|worker --jobs N
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import redis

import durq

BENCH = Path(__file__).resolve().parent


def server_cpu(url: str) -> float:
    """Seconds of CPU the server has used (user + system)."""
    client = redis.Redis.from_url(url)
    try:
        info = client.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
    finally:
        client.close()


def engine(url: str, jobs: int, batch: int = 100) -> tuple[float, float]:
    """Dequeue+release in batches from one process: the scripts' cost. Returns jobs/s
    and the server's CPU µs per job while draining."""
    with durq.Queue(f"drain-e-{secrets.token_hex(3)}", url) as q:
        for start in range(0, jobs, 1000):
            q.enqueue_many([{"n": i} for i in range(start, min(start + 1000, jobs))])
        done = 0
        cpu = server_cpu(url)
        began = time.perf_counter()
        while done < jobs:
            got = q.dequeue_many(batch)
            q.release_many(got)
            done += len(got)
        rate = jobs / (time.perf_counter() - began)
        return rate, (server_cpu(url) - cpu) / jobs * 1e6


def worker(url: str, jobs: int, concurrency: int = 50) -> tuple[float, float]:
    """One ``durq worker -c 50`` process drains ``jobs`` no-op jobs: the rate from its
    first completion to its last (start-up left out), and the server's CPU µs per job
    over the whole drain."""
    name = f"drain-w-{secrets.token_hex(3)}"
    app = durq.App(url)
    task = app.task(name="noop", queue=name)(lambda: None)
    for start in range(0, jobs, 1000):
        task.enqueue_many([() for _ in range(start, min(start + 1000, jobs))])
    env = dict(os.environ, PYTHONPATH=str(BENCH), DURQ_URL=url)
    cpu = server_cpu(url)
    cli = Path(sys.executable).with_name("durq")
    proc = subprocess.Popen(
        [str(cli), "worker", "flow_app:app", "-q", name, "-c", str(concurrency),
         "--log-level", "warning"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        with durq.Queue(name, url) as q:
            first = None
            while True:
                done = q.stats().completed
                now = time.perf_counter()
                if first is None and done > 0:
                    first = (now, done)
                if done >= jobs:
                    break
                time.sleep(0.002)
        assert first is not None
        return (jobs - first[1]) / (now - first[0]), (server_cpu(url) - cpu) / jobs * 1e6
    finally:
        proc.terminate()
        proc.wait(10)
        app.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--mode", choices=("engine", "worker"), required=True)
    parser.add_argument("--jobs", type=int, default=20000)
    args = parser.parse_args()
    run = engine if args.mode == "engine" else worker
    rate, cpu_us = run(args.url, args.jobs)
    print(json.dumps({"mode": args.mode, "jobs": args.jobs, "rate": rate, "cpu_us": cpu_us}))


if __name__ == "__main__":
    main()

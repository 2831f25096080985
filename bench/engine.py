"""Engine benchmark: what one durq queue does on this machine, through the Python API.

    .venv/bin/python bench/engine.py [--quick] [--json out.json]

Prints: single and batch enqueue rates; dequeue+release rate with batches; enqueue-to-
dequeue latency (p50/p99/max) with a consumer blocked in dequeue(wait=...); and the
dequeue+release rate with 1,000 vs 1,000,000 jobs queued. A fresh embedded server
(Valkey, no persistence) is started for the run. Noisy figures are repeated (median,
min-max). This measures the engine; bench/run.py measures workers against the peers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import durq
from durq.dev.server import RedisServer


def _repeat(fn: Callable[[], float], times: int) -> dict[str, float]:
    values = [fn() for _ in range(times)]
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def enqueue_single(q: durq.Queue, n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        q.enqueue({"n": i})
    return n / (time.perf_counter() - start)


def enqueue_batch(q: durq.Queue, n: int, batch: int = 1000) -> float:
    payloads = [{"n": i} for i in range(batch)]
    start = time.perf_counter()
    for _ in range(n // batch):
        q.enqueue_many(payloads)
    return n / (time.perf_counter() - start)


def drain(q: durq.Queue, n: int, batch: int = 100) -> float:
    """Dequeue+release ``n`` jobs in batches; returns jobs/s."""
    done = 0
    start = time.perf_counter()
    while done < n:
        jobs = q.dequeue_many(min(batch, n - done))
        if not jobs:
            break
        q.release_many(jobs)
        done += len(jobs)
    return done / (time.perf_counter() - start)


def drain_at_depth(q: durq.Queue, rounds: int = 200, batch: int = 100) -> float:
    """Dequeue+release rate while the queue stays at its depth: each round refills
    ``batch`` jobs (untimed), then times one dequeue and one release of ``batch``."""
    payloads = [{"n": i} for i in range(batch)]
    timed = 0.0
    done = 0
    for _ in range(rounds):
        q.enqueue_many(payloads)
        start = time.perf_counter()
        jobs = q.dequeue_many(batch)
        q.release_many(jobs)
        timed += time.perf_counter() - start
        done += len(jobs)
    return done / timed


def fill(q: durq.Queue, n: int) -> None:
    payloads = [{"n": i} for i in range(1000)]
    for _ in range(n // 1000):
        q.enqueue_many(payloads)


def latency(url: str, name: str, n: int, gap: float) -> dict[str, float]:
    """A consumer thread blocks in dequeue(wait=...); the producer enqueues a job every
    ``gap`` seconds stamped with perf_counter; the consumer measures the delay."""
    delays: list[float] = []
    ready = threading.Event()

    def consume() -> None:
        with durq.Queue(name, url) as q:
            ready.set()
            while len(delays) < n:
                job = q.dequeue(wait=5)
                if job is None:
                    break
                delays.append(time.perf_counter() - job.payload["t"])
                q.release(job)

    thread = threading.Thread(target=consume)
    thread.start()
    ready.wait()
    time.sleep(0.2)
    with durq.Queue(name, url) as q:
        for _ in range(n):
            q.enqueue({"t": time.perf_counter()})
            time.sleep(gap)
    thread.join()
    delays.sort()
    ms = [d * 1000 for d in delays]
    return {
        "p50_ms": ms[len(ms) // 2],
        "p99_ms": ms[int(len(ms) * 0.99) - 1],
        "max_ms": ms[-1],
        "n": len(ms),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs (about 1 min)")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args()
    reps = 1 if args.quick else 3
    big = 100_000 if args.quick else 1_000_000
    results: dict[str, Any] = {}
    with RedisServer(flavor="valkey") as server:
        url = server.url
        results["server"] = f"valkey {'.'.join(map(str, server.version))}"
        with durq.Queue("bench-single", url) as q:
            results["enqueue_single_per_s"] = _repeat(lambda: enqueue_single(q, 3000), reps)
        with durq.Queue("bench-batch", url) as q:
            results["enqueue_batch_per_s"] = _repeat(lambda: enqueue_batch(q, 50_000), reps)
            results["dequeue_release_100_per_s"] = _repeat(lambda: drain(q, 50_000), reps)
        results["latency_blocked_consumer"] = latency(url, "bench-latency", 500, 0.01)
        # both queues exist side by side and their runs alternate, so warm-up and any
        # drift of the machine's speed fall on both depths alike
        sizes = (1000, big)
        queues = {size: durq.Queue(f"bench-depth-{size}", url) for size in sizes}
        try:
            for size, q in queues.items():
                fill(q, size)
            rates: dict[int, list[float]] = {size: [] for size in sizes}
            for _ in range(max(reps, 3)):
                for size, q in queues.items():
                    rates[size].append(drain_at_depth(q))
            for size in sizes:
                values = rates[size]
                results[f"dequeue_release_at_depth_{size}_per_s"] = {
                    "median": statistics.median(values),
                    "min": min(values),
                    "max": max(values),
                }
            queues[big].client.execute_command("FLUSHALL")
        finally:
            for q in queues.values():
                q.close()
    _print(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


def _print(results: dict[str, Any]) -> None:
    for name, value in results.items():
        if isinstance(value, dict) and "median" in value:
            print(
                f"{name:36s} {value['median']:>10,.0f}  ({value['min']:,.0f}-{value['max']:,.0f})"
            )
        elif isinstance(value, dict):
            print(
                f"{name:36s} "
                + ", ".join(
                    f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in value.items()
                )
            )
        elif isinstance(value, float):
            print(f"{name:36s} {value:>10,.0f}")
        else:
            print(f"{name:36s} {value}")


if __name__ == "__main__":
    main()

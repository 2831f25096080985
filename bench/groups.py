"""Groups benchmark: fairness under a flood, and dequeue cost vs the number of groups.

    .venv/bin/python bench/groups.py [--quick] [--json out.json]

1. Fairness: one group holds FLOOD jobs (1,000,000; 100,000 with --quick); another group
   then enqueues 10. A consumer dequeuing 10 jobs at a time reports how many jobs were
   dequeued before each of the small group's jobs.
2. Cost: the same number of jobs spread over few and over 10,000 groups; the
   dequeue+release rate while the queue stays full. A dequeue serves one job per group
   per turn, so its work grows with the number of distinct groups it serves (at most
   its batch size), not with how many groups exist; the runs compare like with like:
   one job per call from 1 group vs from 10,000, and batches of 100 (each serving 100
   groups) from 100 groups vs from 10,000. Every run goes through the round-robin
   (named groups), so they measure the same code path.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import durq
from durq.dev.server import RedisServer
from durq.models import Message


def fill_group(q: durq.Queue, group: str, n: int) -> None:
    payloads = [Message({"n": i}, group=group) for i in range(1000)]
    for start in range(0, n, 1000):
        q.enqueue_many(payloads[: min(1000, n - start)])


def fairness(url: str, flood: int) -> dict[str, Any]:
    with durq.Queue("fair", url) as q:
        fill_group(q, "flood", flood)
        q.enqueue_many([Message({"small": i}, group="small") for i in range(10)])
        seen = 0
        positions: list[int] = []
        while len(positions) < 10:
            jobs = q.dequeue_many(10)
            for job in jobs:
                seen += 1
                if job.group == "small":
                    positions.append(seen)
            q.release_many(jobs)
        return {
            "flood_jobs": flood,
            "small_group_positions": positions,
            "all_small_jobs_within_first": positions[-1],
        }


def cost(url: str, groups: int, jobs: int, rounds: int, take: int) -> float:
    name = f"cost-{groups}-{take}"
    with durq.Queue(name, url) as q:
        per = jobs // groups
        batch: list[Message] = []
        for g in range(groups):
            batch += [Message({"n": i}, group=f"g{g}") for i in range(per)]
            if len(batch) >= 1000:
                q.enqueue_many(batch)
                batch = []
        if batch:
            q.enqueue_many(batch)
        timed, done = 0.0, 0
        for _ in range(rounds):
            start = time.perf_counter()
            got = q.dequeue_many(take)
            q.release_many(got)
            timed += time.perf_counter() - start
            done += len(got)
            # keep every group non-empty: give back as many as were taken, spread evenly
            q.enqueue_many([Message({"n": 0}, group=j.group) for j in got])
        q.client.execute_command("DEL", *q.keys.vector[1:])
        return done / timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    flood = 100_000 if args.quick else 1_000_000
    reps = 1 if args.quick else 3
    results: dict[str, Any] = {}
    with RedisServer(flavor="valkey") as server:
        results["fairness"] = fairness(server.url, flood)
        pairs = ((1, 1, 10_000), (100, 100, 10_000))  # (jobs per call, few, many groups)
        rates: dict[str, list[float]] = {}
        for _ in range(reps):  # alternating, so drift of the machine hits both alike
            for take, few, many in pairs:
                for groups in (few, many):
                    rounds = 2000 if take == 1 else 200
                    rate = cost(server.url, groups, 100_000, rounds, take)
                    rates.setdefault(f"dequeue_{take}_release_{groups}_groups_per_s", [])
                    rates[f"dequeue_{take}_release_{groups}_groups_per_s"].append(rate)
        for name, values in rates.items():
            results[name] = {
                "median": statistics.median(values),
                "min": min(values),
                "max": max(values),
            }
        for take, few, many in pairs:
            a = results[f"dequeue_{take}_release_{few}_groups_per_s"]["median"]
            b = results[f"dequeue_{take}_release_{many}_groups_per_s"]["median"]
            results[f"ratio_{many}_vs_{few}_groups_taking_{take}"] = b / a
    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()

"""Flow-control benchmark: accuracy of rate limits, commands of parked workers, and the
drain rate of an unlimited queue before and after flow control.

    .venv/bin/python bench/flow.py [--quick] [--main /work/main] [--json out.json]

1. Accuracy: WORKERS worker processes (concurrency 10) run a backlog limited to a rate
   for SECONDS; each job records the server time of its dequeue. Reported: the achieved
   rate (after the first second), its error, and the busiest sliding window of the
   rate's period (bound: limit + burst - 1). Also the Redis commands per start.
2. Parked: 4 idle workers of a queue whose only work is a group parked for a minute;
   the commands they send per worker per second (INFO commandstats).
3. Script cost: the server time per job of dequeue + release, this checkout's scripts vs
   the main branch's, alternated in one process (INFO commandstats), for batches of 1,
   10 and 100 jobs: the part of a drain that this change touches, without the noise.
4. Drain of an unlimited queue, this checkout vs the main branch (``--main``, with its
   own venv), on the same server, interleaved and alternating which goes first:
   ``engine`` (dequeue_many(100) + release_many from one process) and ``worker`` (one
   ``durq worker -c 50`` process, no-op task). Wall-clock rates on a shared 2-core
   machine are noisy, so the server's CPU time per job is reported too.

A fresh Valkey (no persistence) serves everything.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

import durq
from durq.dev.server import RedisServer

BENCH = Path(__file__).resolve().parent
LEASE = 5.0
_WORKER_COMMANDS = ("evalsha", "bzpopmin", "zadd", "pexpire")


def _env(url: str, log: str = "") -> dict[str, str]:
    return dict(
        os.environ,
        PYTHONPATH=str(BENCH),
        DURQ_URL=url,
        BENCH_FLOW_LOG=log,
        BENCH_FLOW_LEASE=str(LEASE),
    )


def _workers(url: str, queue: str, n: int, log: str = "") -> list[subprocess.Popen[bytes]]:
    cli = Path(sys.executable).with_name("durq")
    argv = [str(cli), "worker", "flow_app:app", "-q", queue, "-c", "10", "--lease", str(LEASE),
            "--log-level", "warning", "--heartbeat", "30"]  # fmt: skip
    return [
        subprocess.Popen(
            argv, env=_env(url, log), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for _ in range(n)
    ]


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(15)


def _calls(client: redis.Redis) -> dict[str, int]:
    stats: dict[str, Any] = client.info("commandstats")
    return {
        name: int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in _WORKER_COMMANDS
    }


def busiest(times: list[float], width: float) -> int:
    ordered = sorted(times)
    most, lo = 0, 0
    for hi, t in enumerate(ordered):
        while ordered[lo] <= t - width:
            lo += 1
        most = max(most, hi - lo + 1)
    return most


def accuracy(url: str, rate: durq.Rate, seconds: float, workers: int) -> dict[str, Any]:
    queue = f"acc-{secrets.token_hex(3)}"
    log = tempfile.mktemp(prefix="durq-flow-")
    app = durq.App(url)
    stamp = app.task(name="stamp", queue=queue)(lambda: None)
    with durq.Queue(queue, url) as q:
        q.configure(rate=rate)
    procs = _workers(url, queue, workers, log)
    client = redis.Redis.from_url(url)
    try:
        time.sleep(2.0)  # the workers start and go idle
        n = int(rate.per_second * seconds) + rate.burst
        for start in range(0, n, 1000):
            stamp.enqueue_many([() for _ in range(start, min(start + 1000, n))])
        before = _calls(client)
        deadline = time.monotonic() + seconds * 2 + 20
        while time.monotonic() < deadline:
            if Path(log).exists() and len(Path(log).read_text().splitlines()) >= n:
                break
            time.sleep(0.2)
        after = _calls(client)
    finally:
        _stop(procs)
        client.close()
        app.close()
    starts = sorted(float(line) for line in Path(log).read_text().split())
    Path(log).unlink()
    steady = [t for t in starts if t >= starts[0] + 1.0]
    achieved = (len(steady) - 1) / (steady[-1] - steady[0])
    sent = {k: after[k] - before[k] for k in after}
    return {
        "rate": str(rate),
        "workers": workers,
        "starts": len(starts),
        "seconds": round(starts[-1] - starts[0], 2),
        "achieved_per_s": round(achieved, 2),
        "error_pct": round((achieved / rate.per_second - 1) * 100, 2),
        "busiest_window": busiest(starts, rate.per),
        "window_bound": rate.limit + rate.burst - 1,
        "commands_per_start": {k: round(v / len(starts), 2) for k, v in sent.items()},
    }


def parked(url: str, seconds: float, workers: int = 4) -> dict[str, Any]:
    queue = f"parked-{secrets.token_hex(3)}"
    app = durq.App(url)
    noop = app.task(name="noop", queue=queue)(lambda: None)
    with durq.Queue(queue, url) as q:
        q.configure(group_rates={"a": durq.Rate(1, per=60.0)})
        procs = _workers(url, queue, workers)
        client = redis.Redis.from_url(url)
        try:
            time.sleep(2.0)
            noop.options(group="a").enqueue_many([() for _ in range(10)])
            while q.stats().completed < 1:
                time.sleep(0.05)
            time.sleep(1.0)
            before = _calls(client)
            time.sleep(seconds)
            after = _calls(client)
            completed = q.stats().completed
        finally:
            _stop(procs)
            client.close()
            app.close()
    sent = {k: after[k] - before[k] for k in after}
    return {
        "workers": workers,
        "seconds": seconds,
        "sent": sent,
        "commands_per_worker_per_s": round(sum(sent.values()) / workers / seconds, 2),
        "completed_while_parked": completed - 1,
    }


def drain(url: str, main: Path, repeats: int, jobs: dict[str, int]) -> dict[str, Any]:
    sides = {"main": main / ".venv/bin/python", "branch": Path(sys.executable)}
    runs: dict[str, dict[str, list[dict[str, float]]]] = {
        mode: {side: [] for side in sides} for mode in jobs
    }
    for r in range(repeats):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for mode, n in jobs.items():
            for side in order:
                out = subprocess.run(
                    [str(sides[side]), str(BENCH / "flow_drain.py"), "--url", url,
                     "--mode", mode, "--jobs", str(n)],
                    capture_output=True, text=True, timeout=300, check=True,
                )  # fmt: skip
                runs[mode][side].append(json.loads(out.stdout))
    result: dict[str, Any] = {}
    for mode, by_side in runs.items():
        rates = {s: statistics.median(x["rate"] for x in v) for s, v in by_side.items()}
        cpu = {s: statistics.median(x["cpu_us"] for x in v) for s, v in by_side.items()}
        result[mode] = {
            "jobs": jobs[mode],
            "repeats": repeats,
            "rate_median": {s: round(v) for s, v in rates.items()},
            "rate_all": {s: [round(x["rate"]) for x in v] for s, v in by_side.items()},
            "rate_change_pct": round((rates["branch"] / rates["main"] - 1) * 100, 2),
            "server_cpu_us_per_job": {s: round(v, 2) for s, v in cpu.items()},
            "server_cpu_change_pct": round((cpu["branch"] / cpu["main"] - 1) * 100, 2),
        }
    return result


def script_cost(url: str, main: Path, rounds: int, batches: tuple[int, ...]) -> dict[str, Any]:
    """Server time per job of dequeue + release, this checkout's scripts vs the main
    branch's, alternating in one process on one server (INFO commandstats: what the
    scripts cost, without the client's or the machine's noise around them)."""
    from durq.codec import PayloadCodec
    from durq.keys import QueueKeys
    from durq.protocol.lifecycle import parse_dequeue

    dump = (
        "import json; from durq import lua; "
        "print(json.dumps({n: lua.load(n).source for n in ('dequeue', 'release')}))"
    )
    sources = {
        "main": json.loads(subprocess.run([str(main / ".venv/bin/python"), "-c", dump],
                                          capture_output=True, text=True, check=True).stdout),
        "branch": {n: durq.lua.load(n).source for n in ("dequeue", "release")},
    }  # fmt: skip
    client = redis.Redis.from_url(url)
    codec = PayloadCodec("json", 1 << 20)
    shas = {
        side: {n: client.script_load(src) for n, src in s.items()} for side, s in sources.items()
    }
    result: dict[str, Any] = {}
    try:
        for batch in batches:
            per_job: dict[str, list[float]] = {"main": [], "branch": []}
            keys = QueueKeys(f"cost-{secrets.token_hex(3)}")
            with durq.Queue(keys.name, url) as q:
                for r in range(rounds):
                    order = ("main", "branch") if r % 2 == 0 else ("branch", "main")
                    for side in order:
                        q.enqueue_many([{"n": i} for i in range(20 * batch)])
                        client.config_resetstat()
                        for _ in range(20):
                            reply = client.evalsha(shas[side]["dequeue"], len(keys.vector),
                                                   *keys.vector, batch, 30000)  # fmt: skip
                            jobs = parse_dequeue(reply, keys.name, codec)
                            args: list[int | str] = [0, 3600000, len(jobs)]
                            for job in jobs:
                                args += [job.id, job.token, ""]
                            client.evalsha(shas[side]["release"], len(keys.vector),
                                           *keys.vector, *args)  # fmt: skip
                        usec = client.info("commandstats")["cmdstat_evalsha"]["usec"]
                        per_job[side].append(usec / (20 * batch))
            q1 = {s: sorted(v)[len(v) // 4] for s, v in per_job.items()}
            med = {s: statistics.median(v) for s, v in per_job.items()}
            result[f"batch_{batch}"] = {
                "server_us_per_job_q1": {s: round(v, 2) for s, v in q1.items()},
                "server_us_per_job_median": {s: round(v, 2) for s, v in med.items()},
                "change_pct_q1": round((q1["branch"] / q1["main"] - 1) * 100, 2),
                "change_pct_median": round((med["branch"] / med["main"] - 1) * 100, 2),
            }
    finally:
        client.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs")
    parser.add_argument("--main", type=Path, default=Path("/work/main"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--skip", default="", help="comma list of: accuracy,parked,cost,drain")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    seconds = 8.0 if args.quick else 20.0
    out: dict[str, Any] = {}
    with RedisServer(flavor="valkey") as server:
        url = server.url
        if "accuracy" not in skip:
            out["accuracy"] = [
                accuracy(url, durq.Rate(20), seconds, 3),
                accuracy(url, durq.Rate(20, burst=2), seconds, 3),
                accuracy(url, durq.Rate(100), seconds, 3),
                accuracy(url, durq.Rate(100, burst=5), seconds, 3),
            ]
            for row in out["accuracy"]:
                print(json.dumps(row))
        if "parked" not in skip:
            out["parked"] = parked(url, 5.0 if args.quick else 10.0)
            print(json.dumps(out["parked"]))
        if "cost" not in skip:
            out["script_cost"] = script_cost(url, args.main, 10 if args.quick else 30, (1, 10, 100))
            print(json.dumps(out["script_cost"], indent=1))
        if "drain" not in skip:
            jobs = {"engine": 20000, "worker": 10000 if args.quick else 20000}
            out["drain"] = drain(url, args.main, 3 if args.quick else 9, jobs)
            print(json.dumps(out["drain"], indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()

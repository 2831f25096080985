"""The bare job body alone, no queue: the limit of the datastore-bound scenario.

    <venv>/bin/python bench/bare.py --procs P --slots C --style async|sync [--n 20000]
        [--body io_redis]

Starts ``P`` processes; each runs its share of ``n`` bodies (``bench/work.py``) with
``C`` at a time: ``C`` coroutines on one event loop (``--style async``) or ``C``
threads (``--style sync``), the way a worker with P processes of concurrency C runs
them. The processes connect and warm up first, then start together at a common time;
the rate is n / (the last one's end - that start). Prints one JSON line:
``{"rate": ..., "seconds": ..., "cpu_us_per_job": ..., "n": ..., ...}`` (the CPU time
of the processes over that window, per body).

The orchestrator runs it through each peer's driver, so it uses that peer's redis-py.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import work  # noqa: E402

KEY = "bench:bare"  # not bench:done: a driver may be watching that


def _wait_until(t0: float) -> None:
    delay = t0 - time.time()
    if delay > 0:
        time.sleep(delay)


def _child_sync(n: int, slots: int, body: str, t0: float) -> tuple[float, float, float]:
    fn = work.SYNC[body]
    args = (KEY,) if body == "io_redis" else ()
    left = [n]
    lock = threading.Lock()
    work.sync_client().ping()  # connect before the clock starts

    def loop() -> None:
        while True:
            with lock:
                if left[0] <= 0:
                    return
                left[0] -= 1
            fn(*args)

    threads = [threading.Thread(target=loop) for _ in range(slots)]
    _wait_until(t0)
    start = time.time()
    cpu = time.process_time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return start, time.time(), time.process_time() - cpu


async def _child_async(n: int, slots: int, body: str, t0: float) -> tuple[float, float, float]:
    fn = work.ASYNC[body]
    args = (KEY,) if body == "io_redis" else ()
    client = work.async_client()
    # open the connections the coroutines will use before the clock starts
    await asyncio.gather(*(client.ping() for _ in range(slots)))
    left = n

    async def loop() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await fn(*args)

    await asyncio.sleep(max(0.0, t0 - time.time()))
    start = time.time()
    cpu = time.process_time()
    await asyncio.gather(*(loop() for _ in range(slots)))
    end = time.time()
    cpu = time.process_time() - cpu
    await client.aclose()
    return start, end, cpu


def child(args: argparse.Namespace) -> None:
    if args.style == "async":
        start, end, cpu = asyncio.run(_child_async(args.n, args.slots, args.body, args.t0))
    else:
        start, end, cpu = _child_sync(args.n, args.slots, args.body, args.t0)
    print(json.dumps({"start": start, "end": end, "cpu": cpu}), flush=True)


def parent(args: argparse.Namespace) -> dict[str, object]:
    t0 = time.time() + 1.0 + 0.1 * args.procs  # after every child imported and connected
    shares = [
        args.n // args.procs + (1 if i < args.n % args.procs else 0) for i in range(args.procs)
    ]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--child",
                "--n",
                str(share),
                "--slots",
                str(args.slots),
                "--style",
                args.style,
                "--body",
                args.body,
                "--t0",
                repr(t0),
            ],
            stdout=subprocess.PIPE,
            env=os.environ,
        )
        for share in shares
    ]
    spans = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        if p.returncode:
            raise SystemExit(f"bare child exited with {p.returncode}")
        spans.append(json.loads(out.decode().strip().splitlines()[-1]))
    # a child that was slow to start (a busy machine) starts the clock when it starts
    seconds = max(s["end"] for s in spans) - min(s["start"] for s in spans)
    return {
        "rate": args.n / seconds,
        "seconds": seconds,
        # CPU time the processes spent running the bodies, per body (µs)
        "cpu_us_per_job": sum(s["cpu"] for s in spans) / args.n * 1e6,
        "n": args.n,
        "procs": args.procs,
        "slots": args.slots,
        "style": args.style,
        "body": args.body,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--procs", type=int, default=1)
    p.add_argument("--slots", type=int, default=20)
    p.add_argument("--style", choices=("async", "sync"), default="async")
    p.add_argument("--body", choices=("io_redis",), default="io_redis")
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--t0", type=float, default=0.0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args)
    else:
        print(json.dumps(parent(args)), flush=True)


if __name__ == "__main__":
    main()

"""durq's datastore-bound drains against their bare body, in pairs, on one server.

    .venv/bin/python bench/bare_pairs.py [--rounds 8] [--n 20000] [--style async]

The datastore-bound rows of ``make bench`` (``io_redis``: each job makes one Redis round
trip) are judged against the bare body: the same body at the same processes and
concurrency with no queue (``bench/bare.py``). Their ratio swings from run to run on a
shared VM because the two are measured apart. Here one durq driver, on one fresh
Valkey, runs for each io_redis variant of ``bench/peers/durq.py`` (``--style``: its
``async`` or ``def`` ones) a durq drain and a bare-body run back to back, in an order
alternated every round, and prints both rates, the ratio of their medians and each
pair's ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PEERS, drain_timeout, log, work_drain
from driver_client import Driver

from durq.dev.server import RedisServer


def pair_order(i: int) -> tuple[str, str]:
    """Round ``i``'s order: the drain first in even rounds, the bare body in odd ones."""
    return ("durq", "bare") if i % 2 == 0 else ("bare", "durq")


def run(driver: Driver, which: str, e: dict[str, Any], n: int, cap: float, i: int) -> float:
    if which == "durq":
        result = driver.call("drain", drain_timeout(n, cap), run=i, **work_drain(e, n, cap))
    else:
        bare = {"procs": e["procs"], "slots": e["slots"], "style": e["style"], "n": n}
        result = driver.call("bare", 660, **bare)
    return float(result["rate"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--cap", type=float, default=15.0)
    parser.add_argument("--style", choices=("async", "sync"), default="async")
    args = parser.parse_args()
    with RedisServer(flavor="valkey") as server:
        driver = Driver(PEERS["durq"], server.url)
        try:
            entries = driver.call("hello", 60)["work"]["io_redis"]
            driver.call("setup", 60)
            entries = [e for e in entries if e["style"] == args.style]
            rates = {e["label"]: {"durq": [], "bare": []} for e in entries}
            for i in range(args.rounds):
                log(f"-- round {i + 1}/{args.rounds}: {', '.join(pair_order(i))}")
                for e in entries:
                    for which in pair_order(i):
                        rate = run(driver, which, e, args.n, args.cap, i)
                        rates[e["label"]][which].append(rate)
        finally:
            driver.close()
    for e in entries:
        r = rates[e["label"]]
        pairs = [d / b for d, b in zip(r["durq"], r["bare"], strict=True)]
        durq, bare = statistics.median(r["durq"]), statistics.median(r["bare"])
        print(f"\nio_redis [{e['label']}] {e['desc']}")
        print(f"  durq: {' '.join(f'{x:,.0f}' for x in r['durq'])} jobs/s; median {durq:,.0f}")
        print(f"  bare: {' '.join(f'{x:,.0f}' for x in r['bare'])} jobs/s; median {bare:,.0f}")
        print(
            f"  durq / bare of the medians: {durq / bare:.0%}; per pair "
            f"{' '.join(f'{p:.0%}' for p in pairs)} (median {statistics.median(pairs):.0%})"
        )


if __name__ == "__main__":
    main()

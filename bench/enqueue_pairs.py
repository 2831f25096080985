"""durq's single enqueue against Huey's through the harness's own drivers, alternated.

    .venv/bin/python bench/enqueue_pairs.py [--runs 8] [--n 5000] [--durq-python PY]

``make bench`` measures the single enqueue (one call at a time, through the task
layer) three times per framework, round-robin. Three runs on a shared VM leave a ratio
uncertain by 10-20%. This runs the same driver command (``enqueue``, kind ``single``)
for durq and Huey (each in its own venv, as ``make bench`` runs them) on one fresh
Valkey, ``--runs`` times each, alternating which goes first, and prints the rates,
the ratio of their medians and each pair's ratio. Huey's venv must exist (``make
bench`` builds it in bench/.envs/huey).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PEERS, log
from driver_client import Driver

from durq.dev.server import RedisServer

NAMES = ("durq", "huey")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument(
        "--durq-python", help="the interpreter of durq's driver (default: the project's venv)"
    )
    args = parser.parse_args()
    rates: dict[str, list[float]] = {name: [] for name in NAMES}
    with RedisServer(flavor="valkey") as server:
        pythons = {"durq": args.durq_python}
        drivers = {name: Driver(PEERS[name], server.url, pythons.get(name)) for name in NAMES}
        try:
            for driver in drivers.values():
                driver.call("setup", 120)
            for i in range(args.runs):
                order = NAMES if i % 2 == 0 else NAMES[::-1]
                for name in order:
                    result = drivers[name].call("enqueue", 120, kind="single", n=args.n)
                    rates[name].append(float(result["rate"]))
                log(f"run {i + 1}: " + ", ".join(f"{n} {rates[n][-1]:,.0f}/s" for n in order))
        finally:
            for driver in drivers.values():
                driver.close()
    for name in NAMES:
        values = " ".join(f"{x:,.0f}" for x in rates[name])
        print(f"{name}: {values}; median {statistics.median(rates[name]):,.0f}/s")
    pairs = [d / h for d, h in zip(rates["durq"], rates["huey"], strict=True)]
    ratio = statistics.median(rates["durq"]) / statistics.median(rates["huey"])
    print(
        f"durq / Huey of the medians: {ratio:.3f}; per pair "
        f"{' '.join(f'{p:.2f}' for p in pairs)} (median {statistics.median(pairs):.3f})"
    )


if __name__ == "__main__":
    main()

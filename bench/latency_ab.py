"""Pickup latency of two durq trees, job by job interleaved, so both see the same load.

    .venv/bin/python bench/latency_ab.py --a-python OTHER/.venv/bin/python
        [--b-python .venv/bin/python] [--runs 3] [--jobs 500]

Two fresh servers (Valkey, no persistence), one ``durq worker`` (defaults) on each: A run
by ``--a-python`` (a venv with the other tree installed, e.g. main's), B by
``--b-python``. The producer sends one job to A, 5 ms later one to B, and so on (each
worker gets a job every 10 ms), a plain ``def`` task then an ``async def`` one
(``bench/latency_app.py``), and prints p50 / p90 / p99 of enqueue-to-body per side and run.
On a machine shared with others, runs one after the other differ more than A from B;
this comparison is what stays meaningful. Both servers first get both trees' libraries,
so that neither side's scripts pay for a larger Lua heap than the other's. The producer
is the invoking python: with a change to the enqueue, run both orientations. A change
that sets the server's Lua VM in every call (the collector's step multiplier) reaches
both servers through the producer: run such a change with the other tree as producer.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import durq
from durq.dev.server import RedisServer

HERE = Path(__file__).resolve().parent


# the interpreter's durq library loaded on a server, none of its functions called: a
# tree whose calls change a setting of the server's Lua VM (the collector's step
# multiplier, lua/functions.py) changes it on the servers its calls reach only
_LOAD_LIBRARY = (
    "import sys, redis; from durq.lua.functions import library; "
    "r = redis.Redis.from_url(sys.argv[1]); r.function_load(library().source, replace=True); "
    "r.close()"
)


def _load_libraries(pythons: Iterable[str], urls: Iterable[str]) -> None:
    """Every tree's Functions library on every server. The producer (this python) loads
    its own tree's library on both servers, so without this the other side's server
    would hold two libraries and a larger Lua heap, whose collector each script call
    there pays for (script_gc --bystander, bench/archive/README.md): about 0.05 ms of
    p50 in favour of B whenever the trees differed, whichever tree B was."""
    for python in set(pythons):
        for url in urls:
            subprocess.run([python, "-c", _LOAD_LIBRARY, url], check=True)


def _pct(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    p99 = ms[max(0, int(len(ms) * 0.99) - 1)]
    return (
        f"p50 {ms[len(ms) // 2]:.3f} / p90 {ms[int(len(ms) * 0.9)]:.3f} / p99 {p99:.3f} ms "
        f"(n={len(ms)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=500, help="per side, task kind and run")
    parser.add_argument(
        "--a-python", required=True, help="the python of a venv with the other tree installed"
    )
    parser.add_argument("--b-python", default=sys.executable)
    args = parser.parse_args()
    pythons = {"A": args.a_python, "B": args.b_python}
    with (
        RedisServer(flavor="valkey") as server_a,
        RedisServer(flavor="valkey") as server_b,
        tempfile.TemporaryDirectory() as tmp,
    ):
        urls = {"A": server_a.url, "B": server_b.url}
        _load_libraries(pythons.values(), urls.values())
        outs = {side: Path(tmp) / f"{side}.txt" for side in urls}
        workers = [
            subprocess.Popen(
                [
                    pythons[side],
                    "-m",
                    "durq",
                    "worker",
                    "latency_app:app",
                    "-q",
                    "latency",
                    "--url",
                    urls[side],
                    "--log-level",
                    "error",
                ],
                env={
                    **os.environ,
                    "PYTHONPATH": str(HERE),
                    "BENCH_REDIS_URL": urls[side],
                    "BENCH_LATENCY_OUT": str(outs[side]),
                },
            )
            for side in urls
        ]
        apps = {side: durq.App(url=url) for side, url in urls.items()}
        tasks: dict[str, dict[str, durq.Task[[float], Any]]] = {}
        for side, app in apps.items():
            # the same names as bench/latency_app.py's tasks, which the workers run

            def lat_sync(t: float) -> None: ...

            async def lat_async(t: float) -> None: ...

            tasks[side] = {
                "plain def": app.task(queue="latency")(lat_sync),
                "async def": app.task(queue="latency")(lat_async),
            }
        try:
            time.sleep(2.5)  # the workers' start
            for run in range(1, args.runs + 1):
                for kind in ("plain def", "async def"):
                    for out in outs.values():
                        out.write_text("")
                    for _ in range(args.jobs):
                        for side in urls:
                            tasks[side][kind].enqueue(time.time())
                            time.sleep(0.005)
                    time.sleep(0.5)
                    for side, out in outs.items():
                        delays = [float(line.split()[1]) for line in out.read_text().splitlines()]
                        print(f"run {run} {kind} {side}: {_pct(delays)}")
        finally:
            for worker in workers:
                worker.terminate()
                worker.wait(30)
            for app in apps.values():
                app.close()


if __name__ == "__main__":
    main()

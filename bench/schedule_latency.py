"""The delay from a schedule's tick to its job's start, with idle workers.

    .venv/bin/python bench/schedule_latency.py [--workers 2] [--seconds 20] [--every 0.2]

On a fresh server (Valkey, no persistence, default ``hz 10`` and then ``hz 100``):
``--workers`` idle ``durq worker`` processes, then an ``every`` schedule declared and
synced; each job records ``time.time()`` at its start minus its tick time (the server's
clock; same machine). Prints ticks expected, fired and duplicated, and p50 / p99 / max
of the delay. Idle workers block on the wake marker until the next tick (no polling),
so the delay is the server's timeout resolution for a blocked client plus one round
trip and the thread hand-off.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from durq.dev.server import RedisServer

HERE = Path(__file__).resolve().parent


def _run(hz: int, args: argparse.Namespace) -> None:
    config = [f"hz {hz}"]
    with (
        RedisServer(flavor="valkey", config_lines=config) as server,
        tempfile.TemporaryDirectory() as tmp,
    ):
        out = Path(tmp) / "ticks.txt"
        out.write_text("")
        os.environ.update(BENCH_REDIS_URL=server.url, BENCH_SCHEDULE_OUT=str(out))
        sys.path.insert(0, str(HERE))
        from schedule_app import app

        app.url = server.url
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "durq", "worker", "schedule_app:app", "-q", "sched",
                 "--url", server.url, "--log-level", "error"],
                env={**os.environ, "PYTHONPATH": str(HERE)},
            )
            for _ in range(args.workers)
        ]  # fmt: skip
        try:
            time.sleep(2.5)  # the workers' start: they are idle when the schedule begins
            app.schedules.declared.clear()
            app.schedule("beat", "beat", every=args.every)
            app.sync_schedules()
            time.sleep(args.seconds)
            app.schedules.pause("beat")
            time.sleep(0.5)
            info = app.schedules.get("beat")
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(30)
            app.close()
        rows = [line.split() for line in out.read_text().splitlines()]
        ids = [r[0] for r in rows]
        delays = sorted(float(r[1]) * 1000 for r in rows)
        ticks = sorted(int(i.rsplit("@", 1)[1]) for i in set(ids))
        step = round(args.every * 1000)
        expected = (ticks[-1] - ticks[0]) // step + 1
        p99 = delays[min(len(delays) - 1, int(0.99 * len(delays)))]
        print(
            f"hz {hz:3d}: {args.workers} idle workers, every {args.every}s: ticks expected "
            f"{expected}, fired {info.fired if info else '?'}, jobs started {len(ids)}, "
            f"duplicated {len(ids) - len(set(ids))}; tick -> start p50 "
            f"{statistics.median(delays):.1f} ms, p99 {p99:.1f} ms, max {delays[-1]:.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--every", type=float, default=0.2)
    args = parser.parse_args()
    for hz in (10, 100):
        _run(hz, args)


if __name__ == "__main__":
    main()

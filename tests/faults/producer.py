"""A producer for the fault-injection tests: enqueues ``mark`` jobs and writes the
producer side of the ledger.

Used as a thread of the test process (``faults.harness.Producer``) and as a process of
its own, e.g. under a skewed clock (``python -m faults.producer ...``).

Ledger lines (one ``os.write`` each, ``O_APPEND``)::

    ENQ_OK      seq job_id status wall_time producer delay
    ENQ_UNKNOWN seq - - wall_time producer delay error_type   (connection error or timeout:
                the job may or may not exist; Jepsen's :info)
    ENQ_FAIL    seq - - wall_time producer delay error_type   (a definite refusal)

A line is written only after the enqueue call returned or raised.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable, Sequence

import redis

from durq.errors import DurqError
from faults.app import build

Seconds = Callable[[int], float]


class LedgerFile:
    """Appends lines to a ledger with one ``os.write`` each (thread-safe, kill-safe)."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, *parts: object) -> None:
        os.write(self.fd, (" ".join(str(p) for p in parts) + "\n").encode())

    def close(self) -> None:
        os.close(self.fd)


def produce(
    url: str,
    queue: str,
    ledger: LedgerFile,
    seqs: Sequence[int],
    *,
    name: str = "p",
    batch: int = 1,
    pause: float = 0.0,
    seconds: Seconds | None = None,
    delay: Seconds | None = None,
    task: str = "mark",
    stop: threading.Event | None = None,
    enqueue_retry_for: float = 10.0,
) -> None:
    """Enqueue ``task(seq, seconds(seq))`` for each seq, ``batch`` per call, with
    ``delay(seq)``; pause ``pause`` s between calls; stop early when ``stop`` is set."""
    app = build(url, queue, enqueue_retry_for=enqueue_retry_for)
    fn = app.tasks[task]
    try:
        for start in range(0, len(seqs), batch):
            if stop is not None and stop.is_set():
                return
            chunk = seqs[start : start + batch]
            delays = [delay(s) if delay else 0.0 for s in chunk]
            calls = [
                fn.call(s, seconds(s) if seconds else 0.0).with_options(delay=d or None)
                for s, d in zip(chunk, delays, strict=True)
            ]
            try:
                handles = app.enqueue_calls(calls)
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                for s, d in zip(chunk, delays, strict=True):
                    ledger.write("ENQ_UNKNOWN", s, "-", "-", f"{time.time():.6f}", name, d,
                                 type(exc).__name__)  # fmt: skip
            except (DurqError, redis.ResponseError) as exc:
                for s, d in zip(chunk, delays, strict=True):
                    ledger.write("ENQ_FAIL", s, "-", "-", f"{time.time():.6f}", name, d,
                                 type(exc).__name__)  # fmt: skip
            else:
                now = f"{time.time():.6f}"
                for s, d, h in zip(chunk, delays, handles, strict=True):
                    ledger.write("ENQ_OK", s, h.id, h.status.value, now, name, d)
            if pause:
                if stop is not None:
                    stop.wait(pause)
                else:
                    time.sleep(pause)
    finally:
        app.close()


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m faults.producer --url U --queue Q --ledger PATH --first N --count M``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--queue", required=True)
    parser.add_argument("--ledger", required=True)
    parser.add_argument("--name", default="p")
    parser.add_argument("--first", type=int, required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seconds", default="0", help="run time of each job: S, or LO,HI")
    parser.add_argument("--delay", type=float, default=0.0)
    opts = parser.parse_args(argv)
    ledger = LedgerFile(opts.ledger)
    low, _, high = opts.seconds.partition(",")
    lo, hi = float(low), float(high or low)
    produce(
        opts.url,
        opts.queue,
        ledger,
        range(opts.first, opts.first + opts.count),
        name=opts.name,
        batch=opts.batch,
        seconds=lambda seq: lo + (hi - lo) * (seq % 10) / 9,
        delay=lambda _: float(opts.delay),
    )
    ledger.close()


if __name__ == "__main__":
    main()

"""Drain rate of two durq trees, run by run interleaved (ABBA), so both see the same load.

    .venv/bin/python bench/drain_ab.py --a-python /tmp/py-main --b-python /tmp/py-branch
        [--rounds 6] [--n 20000] [--cap 15] [--modes default,best,p1-c100] [--out ab.json]
    .venv/bin/python bench/drain_ab.py ... --modes io-async-p1,io-async-p2,io-def-p1,io-def-p2

Each side's python is a wrapper (or a venv's python) importing durq from its own tree:

    #!/bin/sh
    PYTHONPATH=/work/main/src${PYTHONPATH:+:$PYTHONPATH} exec /work/main/.venv/bin/python "$@"

One fresh Valkey (no persistence) and two durq drivers (``bench/driver.py`` of this tree,
each run by its side's python, so that side's durq fills the queue and runs the workers).
In each of ``--rounds`` rounds every drain configuration ``make bench`` measures for durq
(its "default", "best" and ALSO rows) is drained once by A and once by B, right after each
other, A first in even rounds and B first in odd ones (``abba_order``), FLUSHALL and
FUNCTION FLUSH before every run (so each run has its own tree's library in a fresh Lua
VM). Prints each side's rates, their medians, B/A of the medians and the per-round
paired ratios (min / median / max). On this shared VM runs minutes apart swing 25-45%;
pairs seconds apart are what a change's effect can be read from.

``--modes`` also takes the datastore-bound drains ``make bench`` measures for durq (its
``io_redis`` rows: each job makes one Redis round trip, bench/work.py), named
``io-<async|def>-p<processes>`` after the variants of the peer module's ``WORK``
(``io_modes``): io-async-p1, io-async-p2, io-def-p1, io-def-p2; ``io`` stands for all of
them. Each is the driver's own io_redis drain request (the variant's configuration and
task, as bench/interleaved.py sends it), with ``--n`` jobs and ``--cap``. Not the default:
without ``--modes`` the no-op rows only, as before.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BENCH_DIR, PEERS, Settings, drain_timeout, log, work_drain
from driver_client import Driver, DriverError

SIDES = ("A", "B")


def abba_order(i: int) -> tuple[str, ...]:
    """Round ``i``'s order of the sides: A, B in even rounds, B, A in odd ones, so that
    neither always runs first (a cold server) or second (after the other heated the CPU)."""
    return SIDES if i % 2 == 0 else SIDES[::-1]


def paired_ratios(a: list[float | None], b: list[float | None]) -> list[float]:
    """B/A of each round's pair of rates; a round where either side has no rate is left out."""
    return [y / x for x, y in zip(a, b, strict=True) if x and y]


IO_SCENARIO = "io_redis"
IO_ALL = "io"


def io_mode_name(entry: dict[str, Any]) -> str:
    """``io-async-p1`` for a WORK variant of the io_redis scenario: its task style (async
    def or def) and its processes, which is what tells durq's four variants apart."""
    style = "async" if entry["style"] == "async" else "def"
    return f"io-{style}-p{entry['procs']}"


def io_modes(work: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """The io_redis variants of a driver's hello (its ``work``), by their ``--modes`` name."""
    out: dict[str, dict[str, Any]] = {}
    for entry in work.get(IO_SCENARIO) or []:
        name = io_mode_name(entry)
        if name in out:
            raise ValueError(f"two io_redis variants are both named {name}")
        out[name] = entry
    return out


def parse_modes(
    arg: str | None, hello_modes: dict[str, str], io: dict[str, dict[str, Any]]
) -> list[str]:
    """The configurations to drain: make bench's no-op rows without ``--modes``; else the
    listed names, ``io`` expanded to every io_redis variant, each name once."""
    if not arg:
        return list(hello_modes)
    modes: list[str] = []
    for name in (x.strip() for x in arg.split(",")):
        if not name:
            continue
        names = list(io) if name == IO_ALL else [name]
        if name.startswith("io-") and name not in io:
            raise ValueError(f"unknown io_redis mode {name!r} (known: {', '.join(io)})")
        modes += [n for n in names if n not in modes]
    return modes


def chosen_modes(
    parser: argparse.ArgumentParser,
    arg: str | None,
    hello_modes: dict[str, str],
    io: dict[str, dict[str, Any]],
) -> list[str]:
    """parse_modes, a bad name reported as a usage error (the exit closes the drivers)."""
    try:
        return parse_modes(arg, hello_modes, io)
    except ValueError as exc:
        parser.error(str(exc))


def drain_request(mode: str, io: dict[str, dict[str, Any]], n: int, cap: float) -> dict[str, Any]:
    """The driver's ``drain`` arguments for ``mode``: a no-op drain with that worker
    configuration, or an io_redis variant's configuration and task (as interleaved.py)."""
    if mode in io:
        return work_drain(io[mode], n, cap)
    return {"mode": mode, "n": n, "cap": cap}


def mode_desc(mode: str, hello_modes: dict[str, str], io: dict[str, dict[str, Any]]) -> str:
    if mode in io:
        e = io[mode]
        return f"io_redis [{e['label']}], task {e['task']}, {e['desc']}"
    return hello_modes.get(mode, mode)


def durq_path(python: str) -> str:
    """Where ``python`` imports durq from, with the environment a driver gets."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [python, "-c", "import durq; print(durq.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=BENCH_DIR,
        timeout=60,
    )
    return out.stdout.strip() or f"(failed: {out.stderr.strip()[-200:]})"


@dataclasses.dataclass
class Side:
    """One side's driver, restarted when a failure killed it."""

    name: str
    python: str
    url: str
    driver: Driver | None = None
    hello: dict[str, Any] = dataclasses.field(default_factory=dict)

    def open(self) -> None:
        self.driver = Driver(PEERS["durq"], self.url, python=self.python)
        self.hello = self.driver.call("hello", 60)
        self.driver.call("setup", 60)

    def drain(self, request: dict[str, Any], run: int) -> dict[str, Any]:
        if self.driver is None or self.driver.proc.poll() is not None:
            self.open()
        assert self.driver is not None
        timeout = drain_timeout(request["n"], request["cap"])
        result: dict[str, Any] = self.driver.call("drain", timeout, run=run, **request)
        return result

    def close(self) -> None:
        if self.driver is not None:
            self.driver.close()
            self.driver = None


def summarize(desc: str, runs: dict[str, list[dict[str, Any] | None]]) -> dict[str, Any]:
    """One configuration's runs with each side's rates, their medians and the ratios."""
    rates = {s: [r["rate"] if r else None for r in runs[s]] for s in SIDES}
    median = {s: statistics.median([x for x in rates[s] if x] or [0]) or None for s in SIDES}
    paired = paired_ratios(rates["A"], rates["B"])
    a_med, b_med = median["A"], median["B"]
    return {
        "desc": desc,
        "runs": runs,
        "rates": rates,
        "median": median,
        "ratio": b_med / a_med if a_med and b_med else None,
        "paired": paired,
        "paired_summary": (
            {"min": min(paired), "median": statistics.median(paired), "max": max(paired)}
            if paired
            else None
        ),
    }


def fmt_ratio(x: float | None) -> str:
    return f"{x:.3f} ({(x - 1) * 100:+.1f}%)" if x else "-"


def report(mode: str, entry: dict[str, Any]) -> None:
    print(f"\ndrain {mode}: {entry['desc']}")
    for side in SIDES:
        rates = " ".join(f"{r:,.0f}" if r else "-" for r in entry["rates"][side])
        med = entry["median"][side]
        print(f"  {side}: {rates} jobs/s; median {med:,.0f}" if med else f"  {side}: {rates}")
    p = entry["paired_summary"]
    print(f"  B/A of medians: {fmt_ratio(entry['ratio'])}")
    if p:
        print(
            f"  B/A per round: min {p['min']:.3f} / median {p['median']:.3f} / max "
            f"{p['max']:.3f} ({' '.join(f'{x:.3f}' for x in entry['paired'])})"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--a-python", required=True, help="python running tree A's durq")
    parser.add_argument("--b-python", default=sys.executable, help="tree B's (default: this)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--n", type=int, default=Settings.drain_n, help="jobs per drain")
    parser.add_argument(
        "--cap", type=float, default=Settings.drain_cap, help="seconds of draining at most"
    )
    parser.add_argument(
        "--modes",
        default=None,
        help="comma-separated configurations (default: make bench's no-op drain rows); "
        "io-async-p1, io-async-p2, io-def-p1, io-def-p2 (or io: all four) for its io_redis rows",
    )
    parser.add_argument("--out", default=None, help="write the runs and ratios as JSON here")
    args = parser.parse_args(argv)

    import redis

    from durq.dev.server import RedisServer

    pythons = {"A": args.a_python, "B": args.b_python}
    results: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "pythons": pythons,
        "durq": {side: durq_path(py) for side, py in pythons.items()},
        "rounds": args.rounds,
        "n": args.n,
        "cap": args.cap,
        "machine": {"cpus": os.cpu_count()},
        "loadavg_start": os.getloadavg(),
        "modes": {},
        "errors": [],
    }
    for side in SIDES:
        log(f"{side}: {pythons[side]} -> durq from {results['durq'][side]}")
    with RedisServer(flavor="valkey") as server:
        results["server"] = f"{server.flavor} {'.'.join(map(str, server.version))}"
        sides = {name: Side(name, pythons[name], server.url) for name in SIDES}
        try:
            for driver in sides.values():
                driver.open()
            hello_modes = sides["B"].hello["modes"]
            io = io_modes(sides["B"].hello.get("work", {}))
            modes = chosen_modes(parser, args.modes, hello_modes, io)
            runs: dict[str, dict[str, list[dict[str, Any] | None]]] = {
                m: {s: [] for s in SIDES} for m in modes
            }
            with redis.Redis.from_url(server.url) as client:
                for i in range(args.rounds):
                    order = abba_order(i)
                    log(f"-- round {i + 1}/{args.rounds}: {', '.join(order)}")
                    for mode in modes:
                        request = drain_request(mode, io, args.n, args.cap)
                        for name in order:
                            client.flushall()
                            # and a fresh Lua VM (Valkey makes one on FUNCTION FLUSH): a
                            # tree's calls may set the VM (the collector's step multiplier,
                            # lua/functions.py), which would otherwise hold for the other
                            # side's runs; each run loads its own library, as in make bench
                            client.function_flush()
                            try:
                                r = sides[name].drain(request, i)
                            except DriverError as exc:
                                log(f"  {name} drain {mode} #{i + 1}: FAILED: {exc}")
                                results["errors"].append(f"{name} {mode} round {i + 1}: {exc}")
                                r = None
                            if r is not None:
                                r.update(round=i + 1, position=order.index(name) + 1)
                                part = "" if r["complete"] else f" (PARTIAL {r['done']}/{args.n})"
                                log(
                                    f"  {name} drain {mode} #{i + 1}: {r['rate'] or 0:,.0f} "
                                    f"jobs/s, drain {r['drain_s']:.2f} s{part}"
                                )
                            runs[mode][name].append(r)
        finally:
            for driver in sides.values():
                driver.close()
    for mode in modes:
        entry = summarize(mode_desc(mode, hello_modes, io), runs[mode])
        results["modes"][mode] = entry
        report(mode, entry)
    results["loadavg_end"] = os.getloadavg()
    if results["errors"]:
        print(f"\n{len(results['errors'])} failed run(s): " + "; ".join(results["errors"]))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
        log(f"wrote {args.out}")
    return 1 if results["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())

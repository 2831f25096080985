"""One peer through a run: its results so far, its driver while one is up, and how a
driver is started (venv, hello, setup) and a harness error recorded."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ENVS_DIR, PeerMeta, log
from driver_client import Driver, DriverError
from venvs import ensure_env


@dataclasses.dataclass
class PeerRun:
    """One peer through a run: its results so far and its driver while one is up."""

    meta: PeerMeta
    url: str
    res: dict[str, Any]
    driver: Driver | None = None
    hello: dict[str, Any] = dataclasses.field(default_factory=dict)
    busy_s: float = 0.0  # time spent on this peer: venv, driver start, its measurements
    interleaved_scenarios: set[str] = dataclasses.field(default_factory=set)

    @property
    def alive(self) -> bool:
        return self.driver is not None and self.driver.proc.poll() is None

    def step(self, label: str, fn: Any) -> bool:
        """Run one measurement; a failure is recorded, never raised. True while the
        driver still runs (a timeout kills it)."""
        try:
            fn()
            return True
        except DriverError as exc:
            log(f"  {self.meta.display}: {label}: FAILED: {exc}")
            self.res["errors"].append(f"{label}: {exc}")
            return self.alive

    def close(self) -> None:
        if self.driver is not None:
            self.driver.close()
            self.driver = None


def open_peer(pr: PeerRun) -> bool:
    """Start ``pr``'s driver (creating its venv if needed), say hello and set it up.
    On failure the error is recorded and False returned; the first failure marks the
    peer skipped."""
    started = time.monotonic()
    res = pr.res
    first = not pr.hello

    def fail(msg: str) -> bool:
        res["errors"].append(msg)
        log(f"  {pr.meta.display}: {msg}")
        if first:
            res["skipped"] = True
        pr.close()
        return False

    try:
        if pr.meta.env is not None:
            err = ensure_env(ENVS_DIR / pr.meta.env, pr.meta.requirements)
            if err:
                return fail(err)
        try:
            pr.driver = Driver(pr.meta, pr.url)
        except DriverError as exc:
            return fail(f"driver did not start: {exc}")
        try:
            hello = pr.driver.call("hello", 60)
        except DriverError as exc:
            return fail(f"hello failed: {exc}")
        if first:
            pr.hello = hello
            res.update(
                versions=hello["versions"],
                python=hello["python"],
                bulk_api=hello["bulk_api"],
                bulk_note=hello["bulk_note"],
                modes=hello["modes"],
            )
            res["notes"] += hello["notes"]
            log(f"  {pr.meta.display}: versions {hello['versions']}")
        try:
            pr.driver.call("setup", 60)
        except DriverError as exc:
            return fail(f"setup failed, peer skipped: {exc}")
        return True
    finally:
        pr.busy_s += time.monotonic() - started


def new_peer_run(meta: PeerMeta, url: str) -> PeerRun:
    res: dict[str, Any] = {
        "name": meta.name,
        "display": meta.display,
        "errors": [],
        "notes": list(meta.notes),
    }
    if not meta.classic:  # a feature row's anchor: the report leaves it out of the classic tables
        res["classic"] = False
    return PeerRun(meta, url, res)


def harness_error(pr: PeerRun, exc: Exception, skip: bool) -> None:
    """A bug of the harness met while measuring ``pr``: recorded, and the run goes on."""
    traceback.print_exc()
    pr.res["errors"].append(f"harness error: {exc}")
    if skip:
        pr.res["skipped"] = True
    with contextlib.suppress(Exception):
        pr.close()

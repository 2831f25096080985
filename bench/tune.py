"""``--tune``: drain once with every worker configuration a peer module lists, to
choose its BEST."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ENVS_DIR, PeerMeta, drain_timeout, log
from driver_client import Driver, DriverError
from venvs import ensure_env


def tune_peer(meta: PeerMeta, url: str, n: int, cap: float, what: str = "noop") -> dict[str, Any]:
    """Drain n jobs once with every worker configuration the peer module lists for
    ``what`` ("noop", or a scenario: then with each of its task kinds)."""
    res: dict[str, Any] = {"name": meta.name, "display": meta.display, "runs": {}, "errors": []}
    if meta.env is not None:
        err = ensure_env(ENVS_DIR / meta.env, meta.requirements)
        if err:
            res["errors"].append(err)
            return res
    driver = Driver(meta, url)
    try:
        hello = driver.call("hello", 60)
        res["best"] = hello["best"] if what == "noop" else hello.get("work", {}).get(what)
        driver.call("setup", 60)
        plan = hello["tune"].get(what) or {"tasks": [what], "candidates": {}}
        if not plan["candidates"]:
            res["errors"].append(f"no configurations listed for {what} (TUNE)")
        for kind in plan["tasks"]:
            for name, desc in plan["candidates"].items():
                key = name if kind == what else f"{kind} {name}"
                try:
                    r = driver.call(
                        "drain", drain_timeout(n, cap), mode=name, n=n, cap=cap, kind=kind
                    )
                except DriverError as exc:
                    log(f"  {key}: FAILED {exc}")
                    res["errors"].append(f"{key}: {exc}")
                    if driver.proc.poll() is not None:
                        return res
                    continue
                res["runs"][key] = r
                flag = "" if r["complete"] else f" PARTIAL {r['done']}/{n}"
                log(f"  {key:34s} {r['rate'] or 0:8,.0f} jobs/s  {desc}{flag}")
    except DriverError as exc:
        res["errors"].append(str(exc))
    finally:
        driver.close()
    return res

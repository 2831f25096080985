"""The server's calibration with ``redis-benchmark`` (installed from Debian's
``redis-tools`` if missing and allowed): what plain commands do on this machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import log


def find_benchmark_binary(allow_install: bool) -> tuple[str | None, str]:
    for name in ("redis-benchmark", "valkey-benchmark"):
        found = shutil.which(name)
        if found:
            return found, ""
    if not allow_install:
        return None, "redis-benchmark not found and --no-install given"
    if os.environ.get("CI"):
        return None, "redis-benchmark not found; not installing packages under CI"
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return None, "redis-benchmark not found and apt-get is not usable here (needs root)"
    log("redis-benchmark missing: apt-get install redis-tools")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        subprocess.run(
            ["apt-get", "-o", "DPkg::Lock::Timeout=120", "update", "-qq"],
            check=True,
            env=env,
            timeout=300,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        subprocess.run(
            ["apt-get", "-o", "DPkg::Lock::Timeout=120", "install", "-y", "-qq", "redis-tools"],
            check=True,
            env=env,
            timeout=300,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        stderr = getattr(exc, "stderr", b"") or b""
        return None, f"apt-get install redis-tools failed: {exc} {stderr.decode()[-300:]}"
    found = shutil.which("redis-benchmark")
    return found, "" if found else "redis-tools installed but redis-benchmark not on PATH"


def calibrate(port: int, quick: bool, allow_install: bool) -> dict[str, Any]:
    binary, note = find_benchmark_binary(allow_install)
    if binary is None:
        log(f"calibration skipped: {note}")
        return {"skipped": True, "note": note}
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip()
    n = 50_000 if quick else 200_000
    configs = [
        ("50 clients", ["-c", "50"], n),
        ("50 clients, pipeline 16 (-P 16)", ["-c", "50", "-P", "16"], n * 4),
        ("1 client", ["-c", "1"], n // 4),
    ]
    rows: list[dict[str, Any]] = []
    for label, extra, requests in configs:
        argv = [
            binary,
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-t",
            "set,get,lpush,rpop",
            "-n",
            str(requests),
            "--csv",
            *extra,
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        for line in proc.stdout.splitlines():
            parts = [p.strip('"') for p in line.split(",")]
            if len(parts) < 2 or parts[0] == "test":
                continue
            try:
                rps = float(parts[1])
            except ValueError:
                continue
            rows.append(
                {
                    "config": label,
                    "test": parts[0],
                    "rps": rps,
                    "requests": requests,
                    "argv": " ".join(argv[1:]),
                }
            )
    log("calibration: " + ", ".join(f"{r['test']} {r['config']}: {r['rps']:,.0f}/s" for r in rows))
    return {"skipped": False, "binary": binary, "version": version, "results": rows}

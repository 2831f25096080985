"""The built wheel, on its own: what a user gets from ``pip install durq-*.whl``.

Usage: ``python3 scripts/wheel_smoke.py dist/durq-*.whl`` (``make wheel-smoke`` builds the
wheel first). It installs the wheel with the ``[server]`` extra into a fresh venv (pip's
cache makes the second run quick), checks that none of the development set came along,
then runs the quickstart's path from a folder outside the checkout: ``durq server``, a
``durq worker``, an enqueue and its result; then ``durq demo``, which ``make demo`` runs
on the same set. Exits non-zero, with the output of the
server and the worker, when any step fails. Only the standard library: it runs before
any venv exists.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TASKS = '''\
import durq

app = durq.App()


@app.task(queue="smoke", result=True)
def add(a: int, b: int) -> int:
    return a + b
'''

ENQUEUE = """\
from smoke_tasks import add

print("result:", add.enqueue(2, 3).result(timeout=60))
"""

# distributions of the [dev] set that the runtime must not need (a sample that would be
# installed by mistake if a runtime import reached into it)
NOT_RUNTIME = {"pytest", "mypy", "ruff", "playwright", "django", "starlette", "sqlalchemy"}


def main(wheel: Path) -> int:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="durq-wheel-smoke-") as tmp:
        root = Path(tmp)
        venv = root / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        py, durq = venv / "bin" / "python", venv / "bin" / "durq"
        spec = f"durq[server] @ {wheel.resolve().as_uri()}"
        subprocess.run([py, "-m", "pip", "install", "-q", spec], check=True)
        installed = _installed(py)
        extra = sorted(installed & NOT_RUNTIME)
        if extra:
            print(f"wheel smoke: the wheel brought development packages: {extra}")
            return 1
        print(f"wheel smoke: {len(installed)} distributions installed ({time.monotonic() - started:.0f} s)")

        (root / "smoke_tasks.py").write_text(TASKS)
        port = _free_port()
        url = f"redis://127.0.0.1:{port}/0"
        env = {**os.environ, "DURQ_URL": url, "PYTHONPATH": str(root)}
        env.pop("VIRTUAL_ENV", None)
        logs = {name: (root / f"{name}.log").open("w+") for name in ("server", "worker")}
        server = subprocess.Popen(
            [durq, "server", "--port", str(port), "--dir", str(root / "data")],
            cwd=root, env=env, stdout=logs["server"], stderr=subprocess.STDOUT,
        )
        worker = None
        try:
            _wait_for(logs["server"], f"listening on {url}", 60)
            worker = subprocess.Popen(
                [durq, "worker", "smoke_tasks:app"],
                cwd=root, env=env, stdout=logs["worker"], stderr=subprocess.STDOUT,
            )
            out = subprocess.run(
                [py, "-c", ENQUEUE], cwd=root, env=env, capture_output=True, text=True,
                timeout=120,
            )
            if out.returncode != 0 or "result: 5" not in out.stdout:
                print(f"wheel smoke: enqueue failed:\n{out.stdout}{out.stderr}")
                return _fail(logs)
        except Exception as exc:
            print(f"wheel smoke: {exc}")
            return _fail(logs)
        finally:
            for proc in (worker, server):
                if proc is not None and proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    try:
                        proc.wait(30)
                    except subprocess.TimeoutExpired:
                        proc.kill()
        print(f"wheel smoke: server, worker, enqueue, result 5: ok ({time.monotonic() - started:.0f} s)")
        # `make demo` installs the same set (.venv-demo): the demo runs on it alone
        demo = subprocess.run(
            [durq, "demo"], cwd=root, env=env, capture_output=True, text=True, timeout=180
        )
        if demo.returncode != 0:
            print(f"wheel smoke: durq demo failed:\n{demo.stdout}{demo.stderr}")
            return 1
        print(f"wheel smoke: durq demo: ok ({time.monotonic() - started:.0f} s)")
        return 0


def _installed(py: Path) -> set[str]:
    out = subprocess.run(
        [py, "-m", "pip", "list", "--format=freeze"], check=True, capture_output=True, text=True
    )
    return {line.split("==")[0].lower() for line in out.stdout.splitlines() if "==" in line}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(log, text: str, timeout: float) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log.seek(0)
        if text in log.read():
            return
        time.sleep(0.2)
    raise TimeoutError(f"no {text!r} within {timeout:.0f} s")


def _fail(logs: dict) -> int:  # type: ignore[type-arg]
    for name, log in logs.items():
        log.seek(0)
        print(f"--- {name} output\n{log.read()}")
    return 1


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(Path(sys.argv[1])))

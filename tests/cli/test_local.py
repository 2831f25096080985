"""``durq server`` and ``durq demo``: local development without any setup."""

from __future__ import annotations

import contextlib
import signal
import socket
import time
from pathlib import Path

import psutil
import pytest
import redis

from durq.dev.server import free_port
from helpers import eventually
from worker.support import Durq, running


def test_server_starts_answers_ping_keeps_its_data_in_dir_and_stops_on_sigint(
    tmp_path: Path, durq_cli: Durq
) -> None:
    port = free_port()
    data = tmp_path / "data"
    server = durq_cli.start("server", "--dir", str(data), "--port", str(port))
    server.expect_output(f"listening on redis://127.0.0.1:{port}/0", 20)
    with redis.Redis(port=port, socket_timeout=5) as client:
        assert client.ping() is True
        client.set("kept", "yes")
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("appendfsync") == {"appendfsync": "everysec"}

    server.send(signal.SIGINT)
    assert server.wait(15) == 0, server.output()
    assert any(data.glob("appendonly*")), list(data.iterdir())

    again = durq_cli.start("server", "--dir", str(data), "--port", str(port))
    again.expect_output("listening on", 20)
    with redis.Redis(port=port, socket_timeout=5) as client:
        assert client.get("kept") == b"yes"  # replayed from the append-only file
    again.send(signal.SIGTERM)
    assert again.wait(15) == 0


def test_server_on_a_port_in_use_says_so_instead_of_claiming_to_listen(
    tmp_path: Path, durq_cli: Durq
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        shown = durq_cli.run("server", "--dir", str(tmp_path), "--port", str(port))
    assert shown.code == 1
    assert "listening" not in shown.stdout
    assert f"127.0.0.1:{port} is in use" in shown.stderr


@pytest.mark.slow
def test_demo_runs_to_its_expected_end_and_leaves_no_folder_behind(
    durq_cli: Durq, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = time.time()
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    demo = durq_cli.start("demo")
    assert demo.wait(90) == 0, demo.output()
    out = demo.output()
    assert "demo finished as expected" in out
    assert "killed worker pid" in out
    assert "handed to another worker" in out
    assert "report result: 'report quarterly ready'" in out
    assert "dead-lettered" in out and "invoice.exe is not an image" in out
    # nothing left behind: the demo stops its workers and its server
    eventually(
        lambda: not _started_since(started, "durq.dev.demo_app:app"),
        10,
        "the demo's workers to exit",
    )
    assert not list(tmp_path.glob("durq-demo-*")), "the demo left its folder behind"


def test_a_demo_stopped_early_stops_its_workers_and_leaves_no_folder_behind(
    durq_cli: Durq, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    demo = durq_cli.start("demo")

    def its_workers() -> list[psutil.Process]:
        with contextlib.suppress(psutil.NoSuchProcess):
            kids = psutil.Process(demo.pid).children(recursive=True)
            return [p for p in kids if running(p) and "demo_app" in " ".join(p.cmdline())]
        return []

    # (its live view is printed at the end when its output is not a terminal)
    workers = eventually(lambda: len(its_workers()) >= 2 and its_workers(), 60, "its workers")
    demo.send(signal.SIGTERM)  # as Ctrl-C (a background process may ignore SIGINT)
    assert demo.wait(30) != 0
    # (each has its grace to drain, then is killed)
    eventually(lambda: not [w for w in workers if running(w)], 40, "its workers to exit")
    assert not list(tmp_path.glob("durq-demo-*")), "the demo left its folder behind"


def _started_since(since: float, text: str) -> list[psutil.Process]:
    """Running processes started after ``since`` with ``text`` in their command line."""
    found = []
    for proc in psutil.process_iter(["cmdline", "create_time"]):
        cmdline = " ".join(proc.info["cmdline"] or ())
        if text in cmdline and proc.info["create_time"] >= since and running(proc):
            found.append(proc)
    return found


def test_server_with_a_password_does_not_print_it(tmp_path: Path, durq_cli: Durq) -> None:
    port = free_port()
    password = "local-pw-not-printed"
    server = durq_cli.start(
        "server", "--dir", str(tmp_path), "--port", str(port), "--password", password
    )
    server.expect_output(f"listening on redis://:***@127.0.0.1:{port}/0", 20)
    with redis.Redis(port=port, password=password, socket_timeout=5) as client:
        assert client.ping() is True
    server.send(signal.SIGTERM)
    assert server.wait(15) == 0
    assert password not in server.output()

"""``durq dashboard``: refuses to listen off loopback without a token, serves with one,
keeps the Redis password out of pages and logs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

import durq
from durq.cli import main
from durq.cli.dashboard import is_loopback
from durq.dev.server import RedisServer, free_port
from helpers import eventually

TOKEN = "tok-1234567890abcdef"
PASSWORD = "hunter2-very-secret"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("dashboard.internal", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "ops.example.com"])
def test_refuses_to_listen_off_loopback_without_a_token(host: str) -> None:
    result = CliRunner().invoke(
        main, ["dashboard", "--host", host], env={"DURQ_DASHBOARD_TOKEN": ""}
    )
    assert result.exit_code == 2
    assert f"refusing to listen on {host} without a token" in result.output


def test_says_how_to_install_the_extra_when_it_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn raises ImportError
    result = CliRunner().invoke(main, ["dashboard"])
    assert result.exit_code == 1
    assert "pip install 'durq[dashboard]'" in result.output


class _Dashboard:
    def __init__(
        self, proc: subprocess.Popen[bytes], port: int, log: Path, host: str = "127.0.0.1"
    ) -> None:
        self.proc = proc
        self.port = port
        self.log = log
        self.host = host

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def run_dashboard(tmp_path: Path) -> Iterator[Callable[..., _Dashboard]]:
    """Starts ``durq dashboard ARGS --port P`` subprocesses; all are stopped at the end."""
    started: list[_Dashboard] = []

    def start(*args: str, env: dict[str, str] | None = None, host: str = "127.0.0.1") -> _Dashboard:
        port = free_port()
        log = tmp_path / f"dashboard-{port}.log"
        argv = ["dashboard", "--port", str(port), "--host", host, *args]
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "durq", *argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
            )
        dash = _Dashboard(proc, port, log, host)
        started.append(dash)

        def answers() -> bool:
            assert proc.poll() is None, dash.output()
            try:
                httpx.get(dash.url + "/static/favicon.svg", timeout=1)
            except httpx.TransportError:
                return False
            return True

        eventually(answers, 20, lambda: f"the dashboard did not start:\n{dash.output()}", 0.1)
        return dash

    yield start
    for dash in started:
        dash.proc.terminate()
        try:
            dash.proc.wait(10)
        except subprocess.TimeoutExpired:
            dash.proc.kill()
            dash.proc.wait()


def test_serves_with_a_token_from_the_environment(
    redis_url: str, run_dashboard: Callable[..., _Dashboard]
) -> None:
    dash = run_dashboard("--url", redis_url, env={"DURQ_DASHBOARD_TOKEN": TOKEN})
    assert httpx.get(dash.url + "/").status_code == 401
    assert httpx.get(dash.url + "/", auth=("ops", TOKEN)).status_code == 200
    metrics = httpx.get(dash.url + "/metrics", headers={"authorization": f"Bearer {TOKEN}"})
    assert metrics.status_code == 200
    assert "durq_workers_live" in metrics.text
    assert TOKEN not in dash.output()
    assert "token required" in dash.output()


def test_loopback_without_token_answers_only_loopback_host_names_and_hides_the_password(
    make_server: Callable[..., RedisServer],
    run_dashboard: Callable[..., _Dashboard],
) -> None:
    server = make_server(password=PASSWORD)
    assert PASSWORD in server.url
    with durq.Queue("secrets-demo", server.url) as queue:
        queue.enqueue({"n": 1})
    dash = run_dashboard("--url", server.url, "--read-only")
    page = httpx.get(dash.url + "/")
    assert page.status_code == 200
    assert "secrets-demo" in page.text
    assert "redis://:***@127.0.0.1" in page.text
    for path in ("/", "/queue?q=secrets-demo", "/workers", "/metrics", "/api/overview"):
        assert PASSWORD not in httpx.get(dash.url + path).text, path
    host = {"host": "rebound.attacker.example"}
    assert httpx.get(dash.url + "/", headers=host).status_code == 400
    assert httpx.get(dash.url + "/", headers={"host": f"localhost:{dash.port}"}).status_code == 200
    dash.proc.terminate()
    dash.proc.wait(10)
    output = dash.output()
    assert "redis://:***@127.0.0.1" in output
    assert "read-only" in output
    assert PASSWORD not in output


def test_a_password_in_the_url_query_stays_out_of_the_pages_and_the_start_up_log(
    make_server: Callable[..., RedisServer],
    run_dashboard: Callable[..., _Dashboard],
) -> None:
    server = make_server(password=PASSWORD)
    url = f"redis://127.0.0.1:{server.port}/0?password={PASSWORD}"
    with durq.Queue("query-pw-demo", url) as queue:
        queue.enqueue({"n": 1})
    dash = run_dashboard("--url", url)
    page = httpx.get(dash.url + "/")
    assert "query-pw-demo" in page.text  # connected with the password
    assert f"redis://127.0.0.1:{server.port}/0?password=***" in page.text
    for path in ("/", "/queue?q=query-pw-demo", "/workers", "/metrics", "/api/overview"):
        assert PASSWORD not in httpx.get(dash.url + path).text, path
    dash.proc.terminate()
    dash.proc.wait(10)
    assert "password=***" in dash.output()
    assert PASSWORD not in dash.output()


def test_any_loopback_address_without_a_token_answers_its_own_host_name(
    redis_url: str, run_dashboard: Callable[..., _Dashboard]
) -> None:
    dash = run_dashboard("--url", redis_url, host="127.0.0.2")
    assert httpx.get(dash.url + "/").status_code == 200  # Host: 127.0.0.2:PORT
    rebound = httpx.get(dash.url + "/", headers={"host": "rebound.attacker.example"})
    assert rebound.status_code == 400

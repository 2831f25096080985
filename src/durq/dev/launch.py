"""Launching a server process: free ports, its command line, waiting until it answers
PING, reading its log and version; and ``run_foreground``, the server of ``durq server``.

:class:`durq.dev.server.RedisServer` owns a server built from these; the public names are
re-exported by :mod:`durq.dev.server`: import them from there.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, TypeAlias
from urllib.parse import quote

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from durq.dev.binary import find_server_binary
from durq.errors import ServerStartError
from durq.redaction import redact_url

__all__ = ["FSYNC_POLICIES", "ServerStartError", "free_port", "run_foreground"]

FSYNC_POLICIES = ("always", "everysec", "no")
# What signal.signal() returns; typeshed's own alias is private.
_SignalHandler: TypeAlias = "Callable[[int, FrameType | None], Any] | int | None"


# --------------------------------------------------------------------------- ports

_handed_out_ports: set[int] = set()
_ports_lock = threading.Lock()


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now.

    The port is found by binding port 0; ports already returned by this process
    are skipped, so servers started back to back never get the same one.
    """
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        with _ports_lock:
            if port not in _handed_out_ports:
                _handed_out_ports.add(port)
                return port
    raise RuntimeError("could not find a free TCP port on 127.0.0.1")


# --------------------------------------------------------------------------- process helpers


def server_argv(
    binary: str,
    *,
    host: str,
    port: int,
    data_dir: Path,
    appendonly: bool,
    appendfsync: str,
    logfile: str,
    password: str | None,
    unixsocket: str | None,
    extra_args: Sequence[str],
) -> list[str]:
    """The command line of a server: no RDB snapshots, protected mode, in the foreground."""
    if appendfsync not in FSYNC_POLICIES:
        raise ValueError(f"appendfsync must be one of {FSYNC_POLICIES}, not {appendfsync!r}")
    argv = [
        binary,
        "--bind", host,
        "--port", str(port),
        "--save", "",
        "--appendonly", "yes" if appendonly else "no",
        "--appendfsync", appendfsync,
        "--dir", str(data_dir),
        "--logfile", logfile,
        "--protected-mode", "yes",
        "--daemonize", "no",
    ]  # fmt: skip
    if password is not None:
        argv += ["--requirepass", password]
    if unixsocket is not None:
        argv += ["--unixsocket", unixsocket, "--unixsocketperm", "700"]
    argv += list(extra_args)
    return argv


def ping_client(
    host: str,
    port: int,
    password: str | None,
    timeout: float,
    unix_socket_path: str | None = None,
) -> redis.Redis:
    """A client for the server's own checks (PING, INFO, SHUTDOWN)."""
    # No retries: callers poll or fall back themselves, and redis-py's default
    # backoff would only slow down startup detection and shutdown.
    if unix_socket_path is not None:
        return redis.Redis(
            unix_socket_path=unix_socket_path,
            password=password,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
        )
    return redis.Redis(
        host=host,
        port=port,
        password=password,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


def wait_until_ready(
    proc: subprocess.Popen[bytes], host: str, port: int, password: str | None, timeout: float
) -> bool:
    """Poll PING until it answers (True) or the process exits (False).

    Raises TimeoutError when neither happens within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    with ping_client(host, port, password, timeout=0.5) as client:
        while True:
            if proc.poll() is not None:
                return False
            try:
                if client.ping():
                    return True
            except (redis.ConnectionError, redis.TimeoutError):
                # Refused while binding, or BusyLoadingError while replaying the AOF.
                pass
            if time.monotonic() >= deadline:
                raise TimeoutError(f"server did not answer PING within {timeout:g} s")
            time.sleep(0.02)


def log_tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a server log, for error messages."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16384))
            data = fh.read()
    except OSError:
        return "(no server log)"
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


def parse_version(text: str) -> tuple[int, ...]:
    """``7.2.4`` as ``(7, 2, 4)``."""
    parts: list[int] = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def server_url(host: str, port: int, password: str | None) -> str:
    """``redis://[:password@]host:port/0``."""
    auth = f":{quote(password, safe='')}@" if password is not None else ""
    if ":" in host:
        host = f"[{host}]"
    return f"redis://{auth}{host}:{port}/0"


def guess_flavor(binary: str) -> str:
    """The flavor a binary's name says."""
    return "valkey" if "valkey" in Path(binary).name else "redis"


# --------------------------------------------------------------------------- foreground


def run_foreground(
    data_dir: str | Path,
    port: int = 6379,
    *,
    host: str = "127.0.0.1",
    binary: str | None = None,
    flavor: str | None = None,
    password: str | None = None,
    extra_args: Sequence[str] = (),
    log_file: str | Path | None = None,
    ready_timeout: float = 30.0,
    echo: Callable[[str], None] | None = None,
) -> int:
    """Run a durable server in the foreground until it exits; used by ``durq server``.

    The server keeps its data in ``data_dir`` with ``appendonly yes`` and
    ``appendfsync everysec``, logs to stdout (or ``log_file``), and receives any
    SIGINT/SIGTERM sent to this process, on which it shuts down cleanly.

    Returns:
        The server's exit code (``128 + signal`` if a signal killed it).
    """
    say = echo if echo is not None else (lambda line: print(line, flush=True))
    exe = binary if binary is not None else find_server_binary(flavor)
    directory = Path(data_dir).expanduser().resolve()
    directory.mkdir(parents=True, exist_ok=True)
    argv = server_argv(
        exe,
        host=host,
        port=port,
        data_dir=directory,
        appendonly=True,
        appendfsync="everysec",
        logfile="" if log_file is None else str(Path(log_file).expanduser().resolve()),
        password=password,
        unixsocket=None,
        extra_args=extra_args,
    )
    proc: subprocess.Popen[bytes] | None = None

    def forward(signum: int, frame: FrameType | None) -> None:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signum)

    previous: dict[int, _SignalHandler] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, forward)
    try:
        # Own session so a terminal Ctrl-C reaches the server once, via
        # forward(); a second SIGINT makes Redis exit without a clean shutdown.
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            ready = wait_until_ready(proc, host, port, password, ready_timeout)
        except TimeoutError as exc:
            say(f"durq server: {exc}")
            proc.terminate()
            ready = False
        if ready:
            shown = redact_url(server_url(host, port, password))
            say(f"durq server: listening on {shown} (data in {directory})")
        code = proc.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return code if code >= 0 else 128 - code

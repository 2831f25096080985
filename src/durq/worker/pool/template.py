"""The template process: forked from the worker before any thread or event loop starts,
with the app imported; it forks the pool's children, reaps them and signals them.

Forking the worker itself once it runs would copy a process with threads (the event
loop's, the task threads) whose locks may be held at that instant; the template is a
single thread that holds no Redis connection, so each child is a clean copy of an
imported app, ready in milliseconds (copy-on-write: the app's memory is shared). The
worker runs ``gc.freeze()`` before forking it, so that the children's collections leave
those pages untouched.

It talks to the worker over a socket of its own (SOCK_SEQPACKET: one message per
datagram, a child's socket passed along with SCM_RIGHTS):

    worker -> template  ("fork", request) + the child's end of its socket
                        ("signal", pid, signal, group)  group: the child's process group
                        ("exit",)
    template -> worker  ("forked", request, pid)
                        ("exited", pid, wait status)

No orphans: the template asks Linux to SIGKILL it when the worker dies (PR_SET_PDEATHSIG)
and exits when its socket reaches end of file; each child asks the same of the template,
leads its own process group (a kill reaches what it started; a terminal's Ctrl-C does
not reach it) and exits when its socket to the worker reaches end of file. Children and
template ignore SIGINT and SIGTERM: the worker decides when they stop.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import pickle
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from durq._process import die_with_parent
from durq.errors import InvalidArgument
from durq.worker.pool.child import serve
from durq.worker.pool.wire import Channel

if TYPE_CHECKING:
    from durq.app.app import App

__all__ = ["Template"]

log = logging.getLogger("durq.worker")

_MESSAGE = 4096  # the largest message on the template's socket (they are a few bytes)


def _send(sock: socket.socket, message: tuple[Any, ...], fds: list[int] | None = None) -> None:
    data = pickle.dumps(message)
    if fds:
        socket.send_fds(sock, [data], fds)
    else:
        sock.send(data)


def _report(sock: socket.socket, message: tuple[Any, ...]) -> None:
    """The template's message to the worker (lost if the worker is gone: the template
    sees the end of its socket next)."""
    with contextlib.suppress(OSError):
        _send(sock, message)


class Template:
    """The worker's side of its template process."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock
        self._requests = 0
        self.exited = False

    @classmethod
    def start(cls, app: App) -> Template:
        """Fork the template of ``app``'s children (call before any thread starts)."""
        if not hasattr(os, "fork") or not hasattr(socket, "send_fds"):
            raise InvalidArgument("the process pool needs fork() and Unix sockets (Linux, macOS)")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        parent_death = die_with_parent(signal.SIGKILL)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        gc.freeze()  # what exists now is shared with every child, never collected there
        try:
            pid = os.fork()
        except OSError:
            gc.unfreeze()
            raise
        if pid == 0:  # the template
            code = 0
            try:
                ours.close()
                if parent_death is not None:
                    parent_death()
                _serve(theirs, app)
            except BaseException:
                log.exception("the process pool's template failed")
                code = 1
            finally:
                os._exit(code)
        gc.unfreeze()
        theirs.close()
        ours.setblocking(False)
        return cls(pid, ours)

    def fileno(self) -> int:
        return self.sock.fileno()

    def fork(self, child_end: socket.socket) -> int:
        """Ask for a child on ``child_end``; the request's number (``forked`` names it)."""
        self._requests += 1
        _send(self.sock, ("fork", self._requests), [child_end.fileno()])
        return self._requests

    def signal(self, pid: int, signum: int, *, group: bool = False) -> None:
        """Send ``signum`` to child ``pid`` (to its process group with ``group``), if it
        has not been reaped: a pid is never signalled once it may name another process."""
        with contextlib.suppress(OSError):
            _send(self.sock, ("signal", pid, signum, group))

    def read(self) -> list[tuple[Any, ...]] | None:
        """The messages waiting; None once the template is gone."""
        out: list[tuple[Any, ...]] = []
        while True:
            try:
                data = self.sock.recv(_MESSAGE)
            except (BlockingIOError, InterruptedError):
                return out
            except OSError:
                return None
            if not data:
                return out or None
            out.append(pickle.loads(data))

    def close(self, wait: float = 3.0) -> None:
        """Ask the template to kill what is left and exit; wait for it (``wait`` s at most,
        then SIGKILL). Blocking: the worker's last step."""
        with contextlib.suppress(OSError):
            _send(self.sock, ("exit",))
        self.sock.close()
        deadline = time.monotonic() + wait
        while not self._reaped():
            if time.monotonic() > deadline:
                with contextlib.suppress(OSError):
                    os.kill(self.pid, signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.005)

    def _reaped(self) -> bool:
        if self.exited:
            return True
        try:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pid = self.pid
        self.exited = pid == self.pid
        return self.exited


# -- the template's side


def _reap(children: set[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return out
        if pid == 0:
            return out
        children.discard(pid)
        out.append((pid, status))


def _signal(pid: int, signum: int, group: bool) -> None:
    with contextlib.suppress(OSError):
        if group:
            try:
                os.killpg(pid, signum)
                return
            except ProcessLookupError:  # not yet its own group leader
                pass
        os.kill(pid, signum)


def _serve(sock: socket.socket, app: App) -> None:
    """The template's loop: fork, signal and reap children until the worker is gone."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    children: set[int] = set()
    parent_death = die_with_parent(signal.SIGKILL)
    inherited = (sock, wake_r, wake_w)  # closed in each child
    try:
        while True:
            readable: list[Any] = select.select([sock.fileno(), wake_r], [], [])[0]
            if wake_r in readable:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 512)
                for pid, status in _reap(children):
                    _report(sock, ("exited", pid, status))
            if sock.fileno() not in readable:
                continue
            try:
                data, fds, _, _ = socket.recv_fds(sock, _MESSAGE, 1)
            except OSError:  # (ECONNRESET: the worker closed with a message unread)
                data, fds = b"", []
            if not data or not _order(pickle.loads(data), fds, children, sock, app,
                                      parent_death, inherited):  # fmt: skip
                return  # the worker is gone, or asked for the end
    finally:
        for pid in children:
            _signal(pid, signal.SIGKILL, True)
        for pid in list(children):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _order(
    message: tuple[Any, ...],
    fds: list[int],
    children: set[int],
    sock: socket.socket,
    app: App,
    parent_death: Callable[[], None] | None,
    inherited: tuple[Any, ...],
) -> bool:
    """Carry out one message of the worker; False for "exit"."""
    if message[0] == "fork":
        child_end = socket.socket(fileno=fds[0])
        pid = _fork_child(child_end, app, parent_death, inherited)
        child_end.close()
        children.add(pid)
        _report(sock, ("forked", message[1], pid))
    elif message[0] == "signal":
        if message[1] in children:  # never a pid reaped: it may name another process
            _signal(message[1], message[2], message[3])
    elif message[0] == "exit":
        return False
    return True


def _fork_child(
    child_end: socket.socket,
    app: App,
    parent_death: Callable[[], None] | None,
    close: tuple[Any, ...],
) -> int:
    pid = os.fork()
    if pid:
        with contextlib.suppress(OSError):  # also done by the child: whichever comes first
            os.setpgid(pid, pid)
        return pid
    code = 0
    try:
        with contextlib.suppress(OSError):
            os.setpgid(0, 0)
        if parent_death is not None:
            parent_death()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for item in close:
            with contextlib.suppress(OSError):
                item.close() if isinstance(item, socket.socket) else os.close(item)
        serve(Channel(child_end), app)
    except BaseException:
        log.exception("a child of the process pool failed")
        code = 1
    finally:
        os._exit(code)
    return 0  # never reached

"""Local development: ``durq server`` and ``durq demo``."""

from __future__ import annotations

import socket
import sys

import click

__all__ = ["demo", "server"]


@click.command(short_help="Run a local Redis-compatible server with persistence.")
@click.option(
    "--dir",
    "data_dir",
    default="./durq-data",
    show_default=True,
    help="Where the server keeps its append-only file.",
)
@click.option("--port", default=6379, show_default=True)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (loopback by default).",
)
@click.option(
    "--password", envvar="DURQ_SERVER_PASSWORD", default=None, help="Require this password (AUTH)."
)
def server(data_dir: str, port: int, host: str, password: str | None) -> None:
    """Run the bundled Redis-compatible server in the foreground, with append-only
    persistence (appendfsync everysec), for local development. Ctrl-C stops it."""
    from durq.dev.server import ServerNotFound, run_foreground  # the binary is an extra

    # Checked first: a server already listening there would answer the readiness check
    # in place of the new one, which exits at once ("Address already in use").
    if _in_use(host, port):
        raise click.ClickException(f"{host}:{port} is in use (another server?); pick --port")
    try:
        code = run_foreground(data_dir, port, host=host, password=password)
    except ServerNotFound as exc:
        raise click.ClickException(str(exc)) from None
    sys.exit(code)


def _in_use(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


@click.command(short_help="Watch durq recover from failures, live (nothing to set up).")
def demo() -> None:
    """Watch durq handle the hard cases: a flood from one tenant, transient failures,
    a poison job, and a worker killed mid-job (about 10 s, nothing to set up)."""
    from durq.dev.demo import run_demo  # imports the demo app only when asked

    sys.exit(run_demo())

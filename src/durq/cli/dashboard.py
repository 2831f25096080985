"""``durq dashboard``: serve the web dashboard (extra ``durq[dashboard]``)."""

from __future__ import annotations

import ipaddress
import logging

import click

from durq.cli.common import namespace_option, redact_options, url_option
from durq.errors import InvalidArgument
from durq.logs import configure_logging
from durq.redaction import Redact
from durq.transport import connection

__all__ = ["dashboard", "is_loopback"]

log = logging.getLogger("durq.dashboard")

_INSTALL_HINT = "the dashboard needs its extra packages: pip install 'durq[dashboard]'"


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve anywhere


@click.command()
@url_option
@namespace_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--token",
    envvar="DURQ_DASHBOARD_TOKEN",
    show_envvar=True,
    default=None,
    help="Require this token (bearer, or basic auth password); mandatory off loopback. "
    "Prefer the environment variable: a command line is visible to other users.",
)
@click.option(
    "--secret",
    envvar="DURQ_DASHBOARD_SECRET",
    show_envvar=True,
    default=None,
    help="Signs the forms' CSRF tokens (16 characters at least): give every replica of "
    "one dashboard the same [default: derived from the token, else random].",
)
@click.option("--read-only", is_flag=True, help="No replay or purge.")
@click.option("--hide-payloads", is_flag=True, help="Show only the size of job payloads.")
@click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
@click.option(
    "--log-format", default="text", show_default=True, type=click.Choice(["text", "json"])
)
@redact_options
def dashboard(
    url: str | None,
    namespace: str,
    host: str,
    port: int,
    token: str | None,
    secret: str | None,
    read_only: bool,
    hide_payloads: bool,
    log_level: str,
    log_format: str,
    redact: Redact,
) -> None:
    """Serve the web dashboard: queues, groups, workers, jobs, dead letters (replay and
    purge), and Prometheus metrics at /metrics.

    \b
    It listens on loopback by default. To listen anywhere else, set a token:
      DURQ_DASHBOARD_TOKEN=$(openssl rand -hex 16) durq dashboard --host 0.0.0.0
    and sign in with any user name and the token as password.
    """
    try:
        import uvicorn

        from durq.dashboard import create_app
        from durq.dashboard.config import LOOPBACK_HOSTS
    except ImportError:
        raise click.ClickException(_INSTALL_HINT) from None
    loopback = is_loopback(host)
    if not loopback and not token:
        raise click.UsageError(
            f"refusing to listen on {host} without a token: anyone who can reach it "
            "could read job data and replay or purge dead letters. Set --token (or "
            "$DURQ_DASHBOARD_TOKEN), or keep the default --host 127.0.0.1."
        )
    configure_logging(log_level, log_format)
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    # without a token, answer only to loopback names (and the address listened on, any
    # of 127.0.0.0/8): a web page could otherwise reach the dashboard through DNS
    # rebinding, with a Host header of its own domain
    allowed = (*LOOPBACK_HOSTS, shown.lower()) if loopback and not token else None
    try:
        resolved = connection.resolve_url(url)
        app = create_app(
            resolved,
            namespace=namespace,
            token=token,
            read_only=read_only,
            allowed_hosts=allowed,
            show_payloads=not hide_payloads,
            secret=secret or None,
            redact=redact,
        )
    except InvalidArgument as exc:
        raise click.ClickException(str(exc)) from None
    log.info(
        "durq dashboard on http://%s:%d/ for %s (namespace %s%s%s)",
        shown,
        port,
        connection.redact(resolved),
        namespace,
        ", token required" if token else "",
        ", read-only" if read_only else "",
    )
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level.lower(),
        server_header=False,
    )

"""``durq deploy check NEW_MODULE:APP``: what in Redis would fail under the new code
(``durq.app.deploy``); exit status 1 when something would, for CI/CD."""

from __future__ import annotations

import json
from dataclasses import asdict

import click
from rich.table import Table

from durq.app.deploy import deploy_check
from durq.cli.admin import _redis_errors, console
from durq.cli.common import load_app, url_option
from durq.cli.inert import escape_controls, plain
from durq.errors import DurqError

__all__ = ["deploy"]


@click.group()
def deploy() -> None:
    """Check a deploy before it rolls out."""


@deploy.command("check", short_help="What in Redis would fail under the new code.")
@click.argument("target")
@url_option
@click.option("--namespace", default=None, help="The namespace to read [default: the new App's].")
@click.option("-q", "--queue", "queues", multiple=True, help="Only this queue (repeatable).")
@click.option("--examples", default=3, show_default=True, help="Ids listed per problem.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@_redis_errors
def check(
    target: str,
    url: str | None,
    namespace: str | None,
    queues: tuple[str, ...],
    examples: int,
    as_json: bool,
) -> None:
    """Compare what Redis holds with the App at TARGET (MODULE:APP), the code about to
    be deployed: jobs waiting, delayed, retrying, running, held and dead whose task is
    gone, whose version has no migration, or whose arguments do not bind to the new
    signature; schedules whose task is gone or moved; workflow steps not yet started
    whose task is gone. Exits 1 when anything would fail, 0 otherwise."""
    app = load_app(target)
    try:
        report = deploy_check(app, url=url, namespace=namespace, queues=queues, examples=examples)
    except DurqError as exc:
        raise click.ClickException(escape_controls(str(exc))) from None
    finally:
        app.close()
    if as_json:
        doc = {"ok": report.ok, **asdict(report)}
        click.echo(json.dumps(doc, indent=2))
    else:
        read = (
            f"read {report.jobs} jobs, {report.schedules} schedules and "
            f"{report.workflows} running workflows in {len(report.queues)} queues"
        )
        if report.ok:
            console.print(plain(f"ok: nothing would fail under {target} ({read})"))
        else:
            table = Table(title=f"would fail under {target}")
            for col in ("problem", "queue", "task", "count", "examples", "first message"):
                table.add_column(col, overflow="fold")
            for p in report.problems:
                table.add_row(
                    *map(plain, (p.kind, p.queue, p.task, p.count, " ".join(p.examples), p.message))
                )
            console.print(table)
            console.print(plain(read))
    if not report.ok:
        raise SystemExit(1)

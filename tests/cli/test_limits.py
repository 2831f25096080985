"""``durq limits`` and the flow-control table of ``durq stats``."""

from __future__ import annotations

from click.testing import CliRunner

import durq
from durq.cli import main


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.output


def test_limits_sets_shows_and_removes(redis_url: str, queue_name: str) -> None:
    code, out = run("limits", queue_name, "--url", redis_url, "--rate", "100/s,burst=5",
                    "--group-rate", "5/s", "--group", "vip=50/s", "--max-active", "3")  # fmt: skip
    assert code == 0, out
    assert "100/s,burst=5" in out and "5/s" in out
    with durq.Queue(queue_name, redis_url) as q:
        info = q.limits()
        assert info.rate == durq.Rate(100, burst=5)
        assert info.group_rate == durq.Rate(5)
        assert info.group_rates == {"vip": durq.Rate(50)}
        assert info.max_active == 3
        q.enqueue_many(range(3), group="slow")
        code, out = run("stats", queue_name, "--url", redis_url, "--no-rate")
        assert code == 0 and "flow control" in out, out
        remove = ("--rate", "none", "--group-rate", "none", "--group", "vip=none")
        code, out = run("limits", queue_name, "--url", redis_url, *remove, "--max-active", "none")
        assert code == 0, out
        assert not q.limits().limited
        code, out = run("stats", queue_name, "--url", redis_url, "--no-rate")
        assert "flow control" not in out


def test_limits_refuses_bad_input(redis_url: str, queue_name: str) -> None:
    for args, message in [
        (("--rate", "0/s"), "limit must be an int"),
        (("--rate", "fast"), "LIMIT/PERIOD"),
        (("--rate", "5/s,burst=0"), "burst must be an int"),
        (("--group", "vip"), "NAME=RATE"),
        (("--max-active", "0"), "an int >= 1"),
    ]:
        code, out = run("limits", queue_name, "--url", redis_url, *args)
        assert code == 2 and message in out, (args, out)
    code, out = run("limits", "--url", redis_url, "--rate", "5/s")
    assert code == 2 and "exactly one queue" in out

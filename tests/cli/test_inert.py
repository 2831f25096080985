"""What the CLI prints from Redis stays inert: escape sequences are shown escaped and
Rich markup as the text it is, whoever wrote them there."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator

import orjson
import pytest
import redis

import durq
from cli.support import durq as run
from durq.keys import NamespaceKeys

# what an attacker with write access to Redis would plant: a screen clear, an OSC 8
# hyperlink, a window title, a bell, a right-to-left override, Rich markup and an emoji
HOSTILE = (
    "\x1b[2J\x1b]8;;http://evil.example\x1b\\click me\x1b]8;;\x1b\\"
    "\x1b]0;pwned\x07 \u202egnp.exe [bold red]loud[/bold red] "
    "[link=http://evil.example]x[/link] :skull:"
)
GROUP = "[reverse]tenant[/]"
SHOWN = (
    "[bold red]loud[/bold red]",
    "[link=http://evil.example]x[/link]",
    ":skull:",
    "\\x1b[2J",
    "\\x1b]8;;http://evil.example",
    "\\x07",
    "\\u202e",
)


def _inert(output: str) -> None:
    for raw in ("\x1b", "\x07", "\u202e", "\x9b"):
        assert raw not in output, repr(raw)
    for text in SHOWN:
        assert text in output, text


def test_escape_controls_shows_controls_and_keeps_lines_and_tabs() -> None:
    from durq.cli.inert import escape_controls  # here: the CLI tests also run without it

    assert escape_controls("a\x1b[31mb\r\x00\x7f\x9b\u2028\u2066") == (
        "a\\x1b[31mb\\x0d\\x00\\x7f\\x9b\\u2028\\u2066"
    )
    assert escape_controls("Traceback:\n\tline é ✓") == "Traceback:\n\tline é ✓"


@pytest.fixture
def namespace() -> str:
    return f"inert-{secrets.token_hex(4)}"


@pytest.fixture
def planted(redis_url: str, namespace: str) -> Iterator[tuple[str, str]]:
    """A queue with a dead letter, a pending job in a hostile group, and a worker
    heartbeat, all carrying HOSTILE; yields (queue, dead job id)."""
    name = "hostile"
    with durq.Queue(name, redis_url, namespace=namespace) as queue:
        # enqueue refuses control characters in a group, not markup
        queue.enqueue(["task", [HOSTILE], {"note": HOSTILE}], group=GROUP)
        queue.enqueue({"n": 1})
        jobs = queue.dequeue_many(2)
        dead = next(j for j in jobs if j.group is None)
        queue.requeue(
            dead,
            dead=True,
            reason={"reason": HOSTILE, "type": "builtins.ValueError", "message": HOSTILE,
                    "traceback": f"Traceback (most recent call last):\n{HOSTILE}"},
        )  # fmt: skip
        queue.requeue(next(j for j in jobs if j is not dead), delay=0)
    space = NamespaceKeys(namespace)
    worker_id = f"w{HOSTILE}"
    heartbeat = {
        "queues": [name, HOSTILE],
        "concurrency": HOSTILE,
        "in_hand": 1,
        "started": time.time(),
        "beat": time.time(),
        "jobs": [{"queue": HOSTILE, "id": HOSTILE, "task": HOSTILE, "attempt": 1}],
    }
    client = redis.Redis.from_url(redis_url)
    client.sadd(space.workers, worker_id)
    client.hset(space.worker(worker_id), mapping={k: orjson.dumps(v) for k, v in heartbeat.items()})
    client.expire(space.worker(worker_id), 60)
    yield name, dead.id
    client.delete(space.worker(worker_id))
    client.close()


@pytest.mark.parametrize(
    "command",
    [
        ["dlq", "list", "-q", "{queue}"],
        ["dlq", "show", "-q", "{queue}", "--", "{dead}"],
        ["job", "-q", "{queue}", "--", "{dead}"],
        ["workers"],
        ["stats", "--no-rate", "--groups", "5"],
    ],
    ids=["dlq-list", "dlq-show", "job-show", "workers", "stats-groups"],
)
def test_values_from_redis_are_printed_as_plain_text_with_controls_escaped(
    command: list[str], planted: tuple[str, str], redis_url: str, namespace: str
) -> None:
    queue, dead = planted
    argv = [arg.format(queue=queue, dead=dead) for arg in command]
    cut = argv.index("--") if "--" in argv else len(argv)  # options before "-- ID"
    argv[cut:cut] = ["--url", redis_url, "--namespace", namespace]
    result = run(*argv, columns=400)
    assert result.exit_code == 0, result.output
    if command[0] == "stats":
        assert GROUP in result.output
        return
    _inert(result.output)


def test_a_planted_queue_name_is_refused_in_an_inert_message(
    redis_url: str, namespace: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    client.sadd(NamespaceKeys(namespace).queues, HOSTILE)
    client.close()
    result = run("stats", "--no-rate", "--url", redis_url, "--namespace", namespace)
    assert result.exit_code == 1
    assert "\x1b" not in result.output and "\\x1b[2J" in result.output

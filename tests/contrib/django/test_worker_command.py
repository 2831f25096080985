"""``manage.py durq_worker`` with several processes: the supervisor starts children
with the same options, and ``--burst`` returns once the queue is drained."""

from __future__ import annotations

import secrets
from pathlib import Path

from contrib.django.projects import create_project, django52_env


def test_several_processes_drain_the_queue_and_exit(redis_url: str, tmp_path: Path) -> None:
    project = create_project(django52_env(), tmp_path, redis_url, f"dj-{secrets.token_hex(4)}")
    ids = project.drive("enqueue_many", "6")["ids"]
    project.env.run("manage.py", "durq_worker", "-p", "2", "-c", "2", "--burst", "-q",
                    "default", cwd=project.path, timeout=60)  # fmt: skip
    results = project.drive("results", *ids)["results"]
    assert [r["status"] for r in results] == ["SUCCESSFUL"] * 6
    assert [r["return_value"] for r in results] == [2 * i for i in range(6)]
    # each child process is a worker of its own, with its own id
    assert 1 <= len({r["worker_ids"][0] for r in results}) <= 2

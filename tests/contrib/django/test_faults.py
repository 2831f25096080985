"""A durq_worker killed (SIGKILL) while it runs a Django task: the task comes back to
another worker once the lease runs out, and its TaskResult says what happened."""

from __future__ import annotations

import secrets
import signal
from pathlib import Path

import pytest

from contrib.django.projects import create_project, django52_env


@pytest.mark.fault
def test_a_task_whose_worker_is_killed_runs_again_elsewhere(redis_url: str, tmp_path: Path) -> None:
    project = create_project(django52_env(), tmp_path, redis_url, f"dj-{secrets.token_hex(4)}")
    try:
        project.start_worker("--lease", "1")
        # 10 s: long enough that the next drive (a Django start-up, seconds on a busy
        # machine) still finds it running
        result_id = project.drive("enqueue_slow", "10")["id"]
        assert project.drive("wait_running", result_id) == {"status": "RUNNING"}
        assert project.worker is not None
        project.worker.send_signal(signal.SIGKILL)
        project.worker.wait(10)

        project.start_worker("--lease", "1")  # a second worker reclaims it after the lease
        result = project.drive("wait", result_id)
        assert result["status"] == "SUCCESSFUL", project.worker_log()
        assert result["return_value"] == "slept"
        # the lost attempt is listed with durq's reason; only the finishing worker is known
        [(path, text)] = result["errors"]
        assert path == "durq.errors.DurqError"
        assert text.startswith("lease_expired: ")
        assert len(result["worker_ids"]) == 1
    finally:
        project.stop_worker()

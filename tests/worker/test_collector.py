"""The worker's collector settings: the young generation's threshold is raised while a
Worker runs (its collections cost the jobs in flight, not the threshold) and the
process's own is given back when the last Worker of the process stops."""

from __future__ import annotations

import gc

import durq
from durq.worker.runner import YOUNG_THRESHOLD
from worker.support import running_worker


def test_the_young_threshold_is_raised_while_workers_run_and_given_back(app: durq.App) -> None:
    before = gc.get_threshold()
    assert before[0] < YOUNG_THRESHOLD  # the test means something
    with running_worker(app):
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *before[1:])
        with running_worker(app):  # a second worker in the same process
            assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD  # one still runs
    assert gc.get_threshold() == before


def test_a_higher_threshold_of_the_process_is_kept(app: durq.App) -> None:
    before = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD * 2, *before[1:])
    try:
        with running_worker(app):
            assert gc.get_threshold()[0] == YOUNG_THRESHOLD * 2
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD * 2
    finally:
        gc.set_threshold(*before)

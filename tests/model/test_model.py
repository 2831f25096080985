"""The model-based test of durq's whole state machine (tests/model/README.md).

CI runs a short run with fixed seeds; ``DURQ_MODEL_LONG=1`` runs the long one before a
release (``DURQ_MODEL_SEED``, ``DURQ_MODEL_EXAMPLES``, ``DURQ_MODEL_STEPS``).

A failure is shrunk for at most ``DURQ_MODEL_SHRINK_S`` seconds (30 in the short run,
300 in the long one; ``DURQ_MODEL_SHRINK=0``: not at all; under CI the short run never
shrinks: its report must come at once), then reported with the steps of the failing
example and a ``@reproduce_failure`` blob: ``DURQ_MODEL_REPLAY='<version> <blob>'`` (the
two arguments of that line) runs that example again, alone, as it is. The seeds are
fixed, the clock frozen and the ids drawn from counters: the same test id run without
``CI`` finds the same failure, then shrinks it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, Phase, reproduce_failure, seed, settings
from hypothesis.internal.conjecture import engine
from hypothesis.stateful import run_state_machine_as_test

from helpers import in_ci
from model.clock import FrozenClock
from model.machine import DurqMachine
from model.world import World

# the short run: ~25 s per server flavor on a busy 2-core machine (tests/model/README.md)
SHORT_SEEDS = (1, 2)
SHORT_EXAMPLES = 10
SHORT_STEPS = 100
LONG = os.environ.get("DURQ_MODEL_LONG", "") not in ("", "0")
SHRINK = os.environ.get("DURQ_MODEL_SHRINK", "1") not in ("", "0")
# the version and the blob of a `@reproduce_failure('6.1.0', b'AXic...')` line (or its
# two arguments alone)
REPLAY = re.findall(
    r"(\d+\.\d+\.\d+)\W+b?'?([A-Za-z0-9+/]+=*)", os.environ.get("DURQ_MODEL_REPLAY", "")
)


@contextmanager
def shrinking_for(seconds: int) -> Iterator[None]:
    """Shrink a failure for at most ``seconds`` (hypothesis's default is 5 minutes, too
    long for CI to wait for a report). Its budget is a module constant of hypothesis's
    engine: without it (another version), the default holds, and nothing else breaks."""
    before = getattr(engine, "MAX_SHRINKING_SECONDS", None)
    if before is not None:
        engine.MAX_SHRINKING_SECONDS = seconds
    try:
        yield
    finally:
        if before is not None:
            engine.MAX_SHRINKING_SECONDS = before


def _run(
    frozen: tuple[str, FrozenClock],
    seed_value: int,
    examples: int,
    steps: int,
    shrink_s: int,
    shrink: bool = SHRINK,
) -> None:
    url, clock = frozen

    class OnTheFrozenServer(DurqMachine):
        @staticmethod
        def world_factory() -> World:
            return World(url, clock)

    machine = seed(seed_value)(OnTheFrozenServer)
    if REPLAY:
        version, blob = REPLAY[0]
        machine = reproduce_failure(version, blob.encode())(machine)
    shrink_s = int(os.environ.get("DURQ_MODEL_SHRINK_S", shrink_s))
    with shrinking_for(shrink_s):
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=examples,
                stateful_step_count=steps,
                deadline=None,  # a busy machine is slow; the budget is the step count
                database=None,
                print_blob=True,
                phases=[Phase.generate, Phase.shrink] if shrink else [Phase.generate],
                suppress_health_check=list(HealthCheck),
            ),
        )


@pytest.mark.slow
@pytest.mark.timeout(300)  # a failure is shrunk for at most 30 s (never under CI)
@pytest.mark.parametrize("seed_value", SHORT_SEEDS)
def test_random_operations_agree_with_the_reference_model(
    frozen: tuple[str, FrozenClock], seed_value: int
) -> None:
    shrink = SHRINK and not in_ci()
    _run(frozen, seed_value, SHORT_EXAMPLES, SHORT_STEPS, 30, shrink)


@pytest.mark.slow
@pytest.mark.timeout(6 * 3600)
@pytest.mark.skipif(not LONG, reason="the long run: DURQ_MODEL_LONG=1 (before a release)")
def test_long_random_runs_agree_with_the_reference_model(
    frozen: tuple[str, FrozenClock],
) -> None:
    _run(
        frozen,
        int(os.environ.get("DURQ_MODEL_SEED", "0")),
        int(os.environ.get("DURQ_MODEL_EXAMPLES", "200")),
        int(os.environ.get("DURQ_MODEL_STEPS", "200")),
        300,
    )

"""The model-based test of durq's whole state machine (tests/model/README.md).

CI runs a short run with fixed seeds; ``DURQ_MODEL_LONG=1`` runs the long one before a
release (``DURQ_MODEL_SEED``, ``DURQ_MODEL_EXAMPLES``, ``DURQ_MODEL_STEPS``).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis.stateful import run_state_machine_as_test

from model.clock import FrozenClock
from model.machine import DurqMachine
from model.world import World

SHORT_SEEDS = (1, 2, 3)
SHORT_EXAMPLES = 8
SHORT_STEPS = 100
LONG = os.environ.get("DURQ_MODEL_LONG", "") not in ("", "0")
SHRINK = os.environ.get("DURQ_MODEL_SHRINK", "1") not in ("", "0")


def _run(frozen: tuple[str, FrozenClock], seed_value: int, examples: int, steps: int) -> None:
    url, clock = frozen

    class OnTheFrozenServer(DurqMachine):
        @staticmethod
        def world_factory() -> World:
            return World(url, clock)

    run_state_machine_as_test(
        seed(seed_value)(OnTheFrozenServer),
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            database=None,
            phases=[Phase.generate, Phase.shrink] if SHRINK else [Phase.generate],
            suppress_health_check=list(HealthCheck),
        ),
    )


@pytest.mark.slow
@pytest.mark.timeout(900)  # a failure is shrunk (up to 5 minutes) before it is reported
@pytest.mark.parametrize("seed_value", SHORT_SEEDS)
def test_random_operations_agree_with_the_reference_model(
    frozen: tuple[str, FrozenClock], seed_value: int
) -> None:
    _run(frozen, seed_value, SHORT_EXAMPLES, SHORT_STEPS)


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
    )

"""The model test's server: a private one on a frozen clock (model/clock.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import default_flavor
from model.clock import FrozenClock, frozen_server


@pytest.fixture(scope="module")
def frozen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, FrozenClock]]:
    """(url, clock) of a private server whose clock moves only when the test moves it."""
    server, clock = frozen_server(default_flavor(), tmp_path_factory.mktemp("model"))
    try:
        yield server.url, clock
    finally:
        server.close()


__all__ = ["Path"]

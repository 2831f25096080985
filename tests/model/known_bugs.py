"""Known bugs the model finds, each behind a named switch so that CI stays green until
its fix merges. While a name is in KNOWN_BUGS the driver never makes its trigger; once
the fix is in, delete the name from KNOWN_BUGS (nothing else), and the model drives
that crossing too.

``DURQ_MODEL_BUGS`` overrides the set for one run: ``none`` (every trigger on: the run
must find the bugs), or a comma list of the names to keep gated.
"""

from __future__ import annotations

import os

KNOWN_BUGS: set[str] = set()
"""The gated bugs (delete a name once its fix merged): the driver avoids their triggers."""

#: every switch the driver knows -> the trigger it gates (its `gated` calls). Issue 30's
#: bugs 1-12, the model's finding "workflow-id-unique-per-home-only" and issue 36's
#: "by-group-top-up-spins" (a forming batch of one group spun on the wake-up its own
#: empty top-ups passed on) are fixed: their switches are gone, and the driver makes
#: their triggers.
TRIGGERS: dict[str, str] = {}

ENV = "DURQ_MODEL_BUGS"


def _active() -> set[str]:
    raw = os.environ.get(ENV)
    if raw is None:
        return set(KNOWN_BUGS)
    if raw.strip().lower() == "none":
        return set()
    names = {n.strip() for n in raw.split(",") if n.strip()}
    unknown = names - set(TRIGGERS)
    if unknown:
        raise ValueError(f"{ENV}: unknown bug names {sorted(unknown)}; known: {sorted(TRIGGERS)}")
    return names


_ACTIVE = _active()


def gated(name: str) -> bool:
    """True while the trigger of known bug ``name`` must be avoided."""
    if name not in TRIGGERS:
        raise KeyError(name)
    return name in _ACTIVE

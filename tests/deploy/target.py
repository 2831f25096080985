"""``durq deploy check deploy.target:app``: the App under check, set by each test."""

from __future__ import annotations

import durq

app: durq.App | None = None

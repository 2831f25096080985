"""The ledger of a fault case: one file per test, appended to by the producers
(``faults.producer``) and by the tasks (``faults.app``), one ``os.write`` per line on an
``O_APPEND`` descriptor::

    ENQ_OK seq id status time producer delay       the enqueue call returned
    ENQ_UNKNOWN seq - - time producer delay error  it raised a connection error: unknown
    ENQ_FAIL seq - - time producer delay error     it was refused
    START seq id attempt deliveries pid token time enqueued_at   a run began
    DONE  seq id attempt deliveries pid token time enqueued_at   a run finished

``token`` is the lease token ``<deliveries>.<dequeued_at ms, server clock>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Enq:
    kind: str  # ENQ_OK, ENQ_UNKNOWN, ENQ_FAIL
    seq: int
    id: str | None
    status: str | None
    time: float
    producer: str
    delay: float


@dataclass(frozen=True)
class Run:
    kind: str  # START, DONE, CANCEL_IGNORED
    seq: int
    id: str
    attempt: int
    deliveries: int
    pid: int
    token: str
    time: float  # the worker's wall clock
    enqueued_at: float  # server clock

    @property
    def dequeued_at(self) -> float:
        """When this delivery was handed out, in server seconds (from the token)."""
        return int(self.token.split(".")[1]) / 1000

    @property
    def delivery(self) -> int:
        return int(self.token.split(".")[0])


@dataclass
class LedgerView:
    enqs: list[Enq]
    runs: list[Run]

    def of(self, kind: str) -> list[Run]:
        return [r for r in self.runs if r.kind == kind]


def read_ledger(path: Path) -> LedgerView:
    """Parse the ledger; a torn last line (a writer killed mid-write) is ignored."""
    enqs: list[Enq] = []
    runs: list[Run] = []
    try:
        text = path.read_text()
    except FileNotFoundError:
        text = ""
    for line in text.splitlines():
        p = line.split()
        if not p:
            continue
        try:
            if p[0].startswith("ENQ_"):
                ok = p[0] == "ENQ_OK"
                enqs.append(
                    Enq(
                        p[0],
                        int(p[1]),
                        p[2] if ok else None,
                        p[3] if ok else None,
                        float(p[4]),
                        p[5],
                        float(p[6]),
                    )
                )
            else:
                kind, seq, job_id, attempt, deliveries, pid, token, at, enq = p[:9]
                numbers = (int(attempt), int(deliveries), int(pid))
                runs.append(Run(kind, int(seq), job_id, *numbers, token, float(at), float(enq)))
        except (IndexError, ValueError):
            continue
    return LedgerView(enqs, runs)

"""Celery's worker command lines, shared by the Celery peer (``peers/celery.py``) and the
celery-batches one (``peers/celery_batch.py``): the default worker, the prefork, solo and
threads pools, each with the options of the 2-core sweep (TUNED)."""

from __future__ import annotations

TUNED = [
    "--without-gossip",
    "--without-mingle",
    "--without-heartbeat",
    "--prefetch-multiplier",
    "64",
]


def celery_specs(app_module):
    """Every configuration of ``celery -A app_module worker`` the modules name."""
    base = ["celery", "-A", app_module, "worker", "--loglevel", "WARNING"]
    tuned = " ".join(TUNED)
    specs = {
        "default": {
            "argv": [[*base, "-c", "1"]],
            "desc": "`celery worker -c 1` (prefork pool, 1 child; other options default)",
            "procs": 1,
            "slots": 1,
        },
        "prefork-2": {
            "argv": [[*base, "-c", "2"]],
            "desc": "`celery worker -c 2` (prefork; the CLI default on 2 cores)",
            "procs": 2,
            "slots": 1,
        },
        "solo-x2-tuned": {
            "argv": [[*base, "-P", "solo", *TUNED]] * 2,
            "desc": f"2 × `celery worker -P solo {tuned}`",
            "procs": 2,
            "slots": 1,
        },
    }
    for c in (2, 3, 4, 8, 16):
        specs[f"prefork-{c}-tuned"] = {
            "argv": [[*base, "-c", str(c), *TUNED]],
            "desc": f"`celery worker -P prefork -c {c} {tuned}`",
            "procs": c,
            "slots": 1,
        }
    for t in (4, 8, 16, 32, 64):
        specs[f"threads-{t}-x2-tuned"] = {
            "argv": [[*base, "-P", "threads", "-c", str(t), *TUNED]] * 2,
            "desc": f"2 × `celery worker -P threads -c {t} {tuned}`",
            "procs": 2,
            "slots": t,
        }
    return specs

"""The durq web dashboard (extra ``durq[dashboard]``): queues, groups, workers, jobs
and dead letters, with replay and purge, plus a Prometheus endpoint.

    durq dashboard --url redis://... --port 8080             # standalone, loopback only
    app.mount("/durq", create_app("redis://...", token=t))    # inside FastAPI/Starlette

See docs/operations.md for the security model and the metrics.
"""

from durq.dashboard.app import create_app

__all__ = ["create_app"]

"""Integrations with web frameworks: ``durq.contrib.django`` (a backend for Django's task
API, enqueue on commit, a worker command) and ``durq.contrib.fastapi`` (lifespan,
dependencies and the dashboard for FastAPI and Starlette apps).

Nothing in durq's core imports from here; each integration imports its framework only
when it is imported itself.
"""

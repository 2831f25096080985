"""A FastAPI application that enqueues durq tasks and mounts the dashboard."""

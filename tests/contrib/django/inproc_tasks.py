"""Django tasks for the in-process backend tests (imported once Django is configured)."""

from durq.contrib.django.compat import task


@task
def greet(name: str) -> str:
    return f"hello {name}"


@task(priority=50, max_attempts=2)
def greet_later(name: str) -> str:
    return name

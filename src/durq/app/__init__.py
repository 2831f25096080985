"""The App and what it declares: tasks, topics, periodic schedules and workflows.

- ``app``: the ``App`` registry, its queues and its enqueue paths;
- ``task``: ``Task``, its calls and their per-job options;
- ``arguments``: a call's arguments checked against the task's signature;
- ``handle``: ``JobHandle`` (result, info, progress, cancel);
- ``tracing``: OpenTelemetry spans of enqueues and runs;
- ``app_topic``: topics of tasks;
- ``schedules`` and ``schedule_control``: periodic jobs, declared and controlled;
- ``workflows``: chains, groups and callbacks.

``durq`` re-exports the public names; import them from there.
"""

from durq.app.app import App

__all__ = ["App"]

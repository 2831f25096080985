"""The App and what it declares: tasks, topics, periodic schedules and workflows.

- ``app``: the ``App`` registry, its queues, and ``_enqueue``: the one way of every task
  call to its queue;
- ``jobs``: task calls grouped by queue, each checked and encoded once;
- ``task``: ``Task``, its calls and their per-job options, ``Task.encode``;
- ``arguments``: a call's arguments checked against the task's signature;
- ``handle``: ``JobHandle`` (result, info, progress, cancel);
- ``tracing``: OpenTelemetry spans of enqueues and runs;
- ``topics``: topics of tasks;
- ``schedule_spec`` and ``schedule_control``: periodic jobs, declared (``Schedule``) and
  controlled at run time (``app.schedules``);
- ``workflows``: chains, groups and callbacks.

``durq`` re-exports the public names; import them from there.
"""

from durq.app.app import App

__all__ = ["App"]

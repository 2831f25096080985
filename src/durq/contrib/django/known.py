"""The Django tasks a job may name: those of the project, found without importing
anything a job says.

A job names its Django task by import path, and a job is data in Redis: whoever can
write there chooses the path. Importing it would run the import-time code of any module
on the process's path, in the worker (which runs the job) and in the web process (whose
``get_result`` reads it). So a path is only looked up: it names a task when its module
is already imported and the attribute there is a ``Task`` whose own path it is.

The project's task modules are imported first, once per process, from the project's own
configuration: the ``tasks`` module of every installed app (as Django's admin finds its
``admin`` modules) and the backend's ``OPTIONS["task_modules"]``; ``manage.py
durq_worker`` does it when it starts, so that a broken module fails there.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Iterable
from typing import Any

from django.utils.module_loading import autodiscover_modules

from durq.contrib.django.compat import Task

__all__ = ["import_task_modules", "known_task"]

_lock = threading.Lock()
_discovered = False


def import_task_modules(modules: Iterable[str] = ()) -> None:
    """Import the project's task modules: each installed app's ``tasks`` (once per
    process), and ``modules`` (the backend's ``task_modules`` option)."""
    global _discovered
    with _lock:
        if not _discovered:
            autodiscover_modules("tasks")
            _discovered = True
    for name in modules:
        importlib.import_module(name)


def known_task(path: str, modules: Iterable[str] = ()) -> Any:
    """The project's Task at import path ``path``; LookupError when it names none.
    Imports nothing ``path`` says (see the module's docstring)."""
    import_task_modules(modules)
    module_name, _, attribute = str(path).rpartition(".")
    module = sys.modules.get(module_name) if module_name and attribute else None
    task = getattr(module, attribute, None) if module is not None else None
    if not isinstance(task, Task) or task.module_path != path:
        raise LookupError(
            f"{str(path)[:200]!r} is not a task of this project: tasks are looked up, "
            "never imported, in the modules already imported (each installed app's "
            "tasks module, OPTIONS['task_modules'], and what the project imported)"
        )
    return task

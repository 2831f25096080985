"""durq for Django: a backend for Django's task API, enqueue on commit, a worker command.

    # settings.py
    INSTALLED_APPS = [..., "durq.contrib.django"]      # for `manage.py durq_worker`
    TASKS = {"default": {"BACKEND": "durq.contrib.django.DurqBackend",
                         "OPTIONS": {"url": "redis://localhost:6379/0"}}}

    # tasks.py: Django's own API (django.tasks on Django 6, django_tasks on 5.2)
    @task(max_attempts=3)
    def send_receipt(order_id: int) -> str: ...

    send_receipt.enqueue(order.id)                      # or .enqueue_on_commit(order.id)

    $ python manage.py durq_worker -c 8

Works with Django 6 (``django.tasks``) and with Django 5.2 plus the ``django-tasks``
backport (``django_tasks``), from the same code.
"""

from durq.contrib.django.backend import DurqBackend, durq_priority
from durq.contrib.django.commit import enqueue_on_commit
from durq.contrib.django.task import DurqTask

__all__ = ["DurqBackend", "DurqTask", "durq_priority", "enqueue_on_commit"]

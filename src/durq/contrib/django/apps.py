"""The Django app that brings the ``durq_worker`` command."""

from __future__ import annotations

from django.apps import AppConfig

__all__ = ["DurqConfig"]


class DurqConfig(AppConfig):
    """``durq.contrib.django`` in INSTALLED_APPS: no models, one management command."""

    name = "durq.contrib.django"
    label = "durq"
    verbose_name = "durq"

from django.apps import AppConfig

try:
    from django.tasks.signals import task_enqueued, task_finished, task_started
except ImportError:  # Django 5.2 with the django-tasks backport
    from django_tasks.signals import task_enqueued, task_finished, task_started


def _logger(name):
    def receive(sender, task_result, **kwargs):
        from shop.models import SignalLog

        SignalLog.objects.create(
            result_id=task_result.id,
            signal=name,
            status=str(task_result.status),
            attempts=task_result.attempts,
        )

    return receive


class ShopConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "shop"

    def ready(self):
        for name, signal in (("started", task_started), ("finished", task_finished)):
            signal.connect(_logger(name), dispatch_uid=f"shop-{name}", weak=False)
        task_enqueued.connect(_logger("enqueued"), dispatch_uid="shop-enqueued", weak=False)

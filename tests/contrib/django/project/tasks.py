try:
    from django.tasks import task
except ImportError:  # Django 5.2 with the django-tasks backport
    from django_tasks import task

from shop.models import Order


class OutOfStock(Exception):
    pass


@task
def fulfil(order_id):
    order = Order.objects.get(pk=order_id)
    order.status = "fulfilled"
    order.save()
    return {"order": order_id, "item": order.item}


@task(max_attempts=1)
def explode(item):
    raise OutOfStock(f"no {item} left")


@task(takes_context=True, max_attempts=3)
def flaky(context, n):
    if context.attempt < 2:
        raise ConnectionError(f"attempt {context.attempt} fails")
    return n * 2


@task(priority=50)
async def add(a, b):
    return a + b


@task
def slow(seconds):
    import time

    time.sleep(seconds)
    return "slept"

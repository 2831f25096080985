from django.db import models


class Order(models.Model):
    item = models.CharField(max_length=100)
    status = models.CharField(max_length=20, default="new")


class SignalLog(models.Model):
    """What Django's task signals said, as the worker sent them."""

    result_id = models.CharField(max_length=200)
    signal = models.CharField(max_length=20)
    status = models.CharField(max_length=20)
    attempts = models.IntegerField(default=0)

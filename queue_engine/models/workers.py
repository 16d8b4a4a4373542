from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models.functions import Now


class WorkerProcess(models.Model):
    """A running `runworker` process; removed on clean exit, swept when stale."""

    id = models.CharField(max_length=255, primary_key=True)
    host = models.CharField(max_length=255)
    pid = models.IntegerField()
    queues = ArrayField(models.CharField(max_length=128), blank=True, default=list)
    labels = ArrayField(models.CharField(max_length=64), blank=True, default=list)
    concurrency = models.IntegerField()
    in_flight = models.IntegerField(db_default=0)
    is_leader = models.BooleanField(db_default=False)
    started_at = models.DateTimeField(db_default=Now())
    heartbeat_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "queue_engine_workerprocess"
        ordering = ["host", "pid"]

    def __str__(self) -> str:
        return self.id

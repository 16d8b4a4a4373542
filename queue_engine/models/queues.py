from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class QueueConfig(models.Model):
    """Per-queue settings, one row per queue name, created on first use.

    A null limit means "no limit"; null retention means "use the default".
    """

    name = models.CharField(max_length=128, primary_key=True)
    paused = models.BooleanField(db_default=False)
    max_concurrency = models.PositiveIntegerField(null=True, blank=True)
    rate_limit = models.PositiveIntegerField(null=True, blank=True)
    rate_window = models.PositiveIntegerField(db_default=60, help_text="seconds")
    lock_duration = models.PositiveIntegerField(db_default=60, help_text="seconds")
    group_concurrency = models.PositiveIntegerField(null=True, blank=True)
    retain_succeeded = models.PositiveIntegerField(
        db_default=86400, help_text="seconds to keep succeeded jobs"
    )
    retain_failed = models.PositiveIntegerField(
        db_default=7 * 86400, help_text="seconds to keep dead-lettered jobs"
    )
    retain_cancelled = models.PositiveIntegerField(
        db_default=86400, help_text="seconds to keep cancelled jobs"
    )
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "queue_engine_queueconfig"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

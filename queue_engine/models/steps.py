"""Durable steps: what `ctx.step()` recorded for a job, kept across its attempts."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class JobStep(models.Model):
    """One finished step of a job, its result stored as JSON.

    Keyed by the job's id alone, like the log: the id stays the same while the job moves
    between the live table and the history, so the steps follow it without a foreign key.
    """

    id = models.BigAutoField(primary_key=True)
    job_id = models.BigIntegerField()
    name = models.CharField(max_length=255)
    attempt = models.IntegerField()
    result = models.JSONField(null=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "queue_engine_jobstep"
        constraints = [
            models.UniqueConstraint(fields=["job_id", "name"], name="qe_step_job_name"),
        ]

    def __str__(self) -> str:
        return f"{self.job_id}:{self.name}"

"""Signals: a mailbox of JSON payloads sent to a job by name (`send_signal`)."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class JobSignal(models.Model):
    """One signal sent to a job and not yet consumed by its `ctx.wait_for_signal(name)`.

    Written in the sender's transaction; the attempt that consumes it deletes it in the
    transaction that records it as the wait's durable step, so a signal is delivered to
    one wait exactly once. Keyed by the job's id alone, as steps are.
    """

    id = models.BigAutoField(primary_key=True)
    job_id = models.BigIntegerField()
    name = models.CharField(max_length=255)
    payload = models.JSONField(null=True)
    sent_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "queue_engine_jobsignal"
        indexes = [models.Index(fields=["job_id", "name", "id"], name="qe_signal_mailbox")]

    def __str__(self) -> str:
        return f"{self.job_id}:{self.name}"

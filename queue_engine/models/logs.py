from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class LogStream(models.TextChoices):
    STDOUT = "stdout"
    STDERR = "stderr"
    LOG = "log"


class JobLog(models.Model):
    """A line a job wrote during one attempt, in order (`seq` per job)."""

    id = models.BigAutoField(primary_key=True)
    job_id = models.BigIntegerField()
    attempt = models.IntegerField()
    seq = models.IntegerField()
    stream = models.CharField(max_length=8, choices=LogStream.choices)
    level = models.CharField(max_length=10, blank=True, db_default="")
    at = models.DateTimeField(db_default=Now())
    text = models.TextField()

    class Meta:
        db_table = "queue_engine_joblog"
        indexes = [models.Index(fields=["job_id", "seq"], name="qe_log_job_seq")]

    def __str__(self) -> str:
        return f"{self.job_id}:{self.seq} {self.text[:40]}"

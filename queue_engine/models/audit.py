from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class AuditEvent(models.Model):
    """An operator action: who did what to what, and when. Written by `ops` only."""

    id = models.BigAutoField(primary_key=True)
    at = models.DateTimeField(db_default=Now())
    actor = models.CharField(max_length=255, help_text="user name, or 'system'/'cli'")
    action = models.CharField(max_length=64)
    target_type = models.CharField(max_length=32)
    target = models.CharField(max_length=255)
    count = models.IntegerField(db_default=1)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "queue_engine_auditevent"
        ordering = ["-id"]
        indexes = [models.Index(fields=["target_type", "target"], name="qe_audit_target")]

    def __str__(self) -> str:
        return f"{self.actor} {self.action} {self.target_type}:{self.target}"

"""The kill switch per job kind: a paused kind's jobs stay queued and are not claimed."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class KindControl(models.Model):
    """A job kind an operator paused or resumed; a kind with no row runs."""

    kind = models.CharField(max_length=255, primary_key=True)
    paused = models.BooleanField(db_default=False)
    changed_at = models.DateTimeField(db_default=Now())
    changed_by = models.CharField(max_length=255, blank=True, db_default="")

    class Meta:
        db_table = "queue_engine_kindcontrol"
        # The claim reads the paused kinds on every call: a small partial index.
        indexes = [
            models.Index(fields=["kind"], name="qe_kind_paused", condition=models.Q(paused=True))
        ]

    def __str__(self) -> str:
        return f"{self.kind} ({'paused' if self.paused else 'running'})"

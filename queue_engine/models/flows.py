from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class FlowState(models.TextChoices):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Flow(models.Model):
    """A DAG of jobs. Its state is kept true by the settles of its nodes."""

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=255)
    state = models.CharField(max_length=16, choices=FlowState.choices, db_default="running")
    default_priority = models.SmallIntegerField(db_default=0)
    meta = models.JSONField(db_default=models.Value({}, models.JSONField()))
    rerun_of = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now())
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "queue_engine_flow"
        indexes = [
            models.Index("state", models.F("id").desc(), name="qe_flow_state"),
            models.Index("name", models.F("id").desc(), name="qe_flow_name"),
        ]

    def __str__(self) -> str:
        return f"{self.name}#{self.pk}"


class FlowEdge(models.Model):
    """`child` runs only after `parent` succeeded. Ids are job ids (live or history)."""

    id = models.BigAutoField(primary_key=True)
    flow_id = models.BigIntegerField()
    parent_id = models.BigIntegerField()
    child_id = models.BigIntegerField()
    dynamic = models.BooleanField(db_default=False)

    class Meta:
        db_table = "queue_engine_flowedge"
        indexes = [
            models.Index(fields=["parent_id"], name="qe_edge_parent"),
            models.Index(fields=["child_id"], name="qe_edge_child"),
            models.Index(fields=["flow_id"], name="qe_edge_flow"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["parent_id", "child_id"], name="qe_edge_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.parent_id} -> {self.child_id}"

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now

from queue_engine.states import FlowState


class FlowRun(models.Model):
    """A submitted DAG of jobs (`queue_engine.Flow` builds and submits one). Its state is
    kept true by the settles of its nodes."""

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=255)
    state = models.CharField(max_length=16, choices=FlowState.choices, db_default="running")
    default_priority = models.SmallIntegerField(db_default=0)
    meta = models.JSONField(db_default=models.Value({}, models.JSONField()))
    rerun_of = models.BigIntegerField(null=True, blank=True)
    # Nodes an operator removed (ops.remove_jobs): a flow with any never succeeds.
    removed_nodes = models.IntegerField(db_default=0)
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
            # Covering: the claim reads a node's parents index-only (migration 0011).
            models.Index(fields=["child_id"], include=["parent_id"], name="qe_edge_child_parents"),
            models.Index(fields=["flow_id"], name="qe_edge_flow"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["parent_id", "child_id"], name="qe_edge_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.parent_id} -> {self.child_id}"


class FlowCountdown(models.Model):
    """Parents of `child_id` that succeeded, `n` at a time, not yet counted into its row.

    A child with parents still running elsewhere (a fan-in's join, a diamond's tip) is
    counted down by inserting a row here instead of updating the child: 10,000 children
    settling into one join no longer queue for that one row's lock. The settle's own
    transaction inserts the row; right after it commits, the same worker releases every
    blocked child whose rows here add up to its pending_deps (sql.RELEASE_COUNTED),
    and the leader does the same every second for a release lost to a crash.
    """

    id = models.BigAutoField(primary_key=True)
    flow_id = models.BigIntegerField()
    child_id = models.BigIntegerField()
    n = models.IntegerField()
    # The outputs of those parents by node key, for the child's parent_outputs; NULL
    # when one of them was too large to hand down.
    outputs = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "queue_engine_flowcountdown"
        indexes = [
            models.Index(fields=["flow_id", "child_id"], name="qe_countdown_flow"),
            models.Index(fields=["child_id"], name="qe_countdown_child"),
        ]

    def __str__(self) -> str:
        return f"{self.child_id} -{self.n}"


class FlowRelease(models.Model):
    """A succeeded parent whose children are still being counted down, in chunks.

    A settle counts down at most FLOW_RELEASE_CHUNK children of each parent it ends (in
    child id order); for a parent with more, it leaves a row here naming the last child
    it counted. The worker that settled it then splits the rest into FlowRange rows,
    which the claims count down (the leader does it for a crashed worker). Workers of
    earlier versions count the rest down themselves, a chunk at a time
    (COUNT_DOWN_MORE as it was then). requeue_flow drops a flow's rows as it recounts.
    """

    id = models.BigAutoField(primary_key=True)
    flow_id = models.BigIntegerField()
    parent_id = models.BigIntegerField()
    after_child = models.BigIntegerField()

    class Meta:
        db_table = "queue_engine_flowrelease"
        indexes = [models.Index(fields=["flow_id"], name="qe_release_flow")]

    def __str__(self) -> str:
        return f"{self.parent_id} after {self.after_child}"


class FlowRange(models.Model):
    """A range of a succeeded parent's children still to count: those after
    `after_child`, up to `upto_child`, in child id order.

    The worker whose settle left a FlowRelease row splits it into ranges of
    FLOW_RELEASE_CHUNK children (sql.SPLIT_RELEASES), and the workers' claims count them
    down as they take the children, each claim a range no other claim holds
    (sql.COUNT_DOWN_CLAIM): one write a child, and the fleet's claims side by side.
    `touched_at` says when a claim last counted from the range: the ranges of a parent
    none of whose ranges was touched for RELEASE_GRACE are counted down without a claim
    (sql.COUNT_DOWN_MORE), their children released as available. A table of its own, not
    FlowRelease's rows: a worker of an earlier version counts a FlowRelease row to its
    parent's last child, and would count a range's children again past its end.
    """

    id = models.BigAutoField(primary_key=True)
    flow_id = models.BigIntegerField()
    parent_id = models.BigIntegerField()
    after_child = models.BigIntegerField()
    upto_child = models.BigIntegerField()
    touched_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "queue_engine_flowrange"
        indexes = [
            models.Index(fields=["flow_id"], name="qe_range_flow"),
            models.Index(fields=["parent_id"], name="qe_range_parent"),
        ]

    def __str__(self) -> str:
        return f"{self.parent_id} after {self.after_child} up to {self.upto_child}"

"""The live job table and the history table.

`Job` holds only jobs that can still run, so claims stay fast whatever the
history holds. When a job ends, the settling transaction moves the same id to
`JobRecord`; a redrive moves it back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import BrinIndex
from django.db import models
from django.db.models.expressions import BaseExpression, DatabaseDefault
from django.db.models.functions import Now
from django.utils import timezone

from queue_engine.definition.registry import registry
from queue_engine.states import JobState, RecordState


class JobFields(models.Model):
    """Columns shared by the live and the history table."""

    queue = models.CharField(max_length=128, db_default="default")
    kind = models.CharField(max_length=255)
    name = models.CharField(max_length=255, blank=True, db_default="")
    priority = models.SmallIntegerField(db_default=0)
    payload = models.JSONField(db_default=models.Value({}, models.JSONField()))
    attempt = models.IntegerField(db_default=0)
    max_attempts = models.IntegerField(db_default=20)
    backoff = models.JSONField(null=True, blank=True)
    errors = models.JSONField(db_default=models.Value([], models.JSONField()))
    dedup_key = models.CharField(max_length=255, null=True, blank=True)
    group_key = models.CharField(max_length=255, null=True, blank=True)
    labels = ArrayField(
        models.CharField(max_length=64),
        blank=True,
        db_default=models.Value([], ArrayField(models.CharField(max_length=64))),
    )
    flow_id = models.BigIntegerField(null=True, blank=True)
    node_key = models.CharField(max_length=255, null=True, blank=True)
    meta = models.JSONField(db_default=models.Value({}, models.JSONField()))
    progress = models.FloatField(null=True, blank=True)
    progress_message = models.TextField(blank=True, db_default="")
    rescues = models.IntegerField(db_default=0)
    run_at = models.DateTimeField(db_default=Now())
    created_at = models.DateTimeField(db_default=Now())
    started_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.kind}#{self.pk}"

    @property
    def display_name(self) -> str:
        return self.name or self.kind


class JobQuerySet(models.QuerySet["Job"]):
    def bulk_create(self, objs: Any, *args: Any, **kwargs: Any) -> list[Job]:
        objs = list(objs)
        for obj in objs:
            obj.apply_kind_defaults()
        return super().bulk_create(objs, *args, **kwargs)

    def runnable(self) -> JobQuerySet:
        return self.filter(state=JobState.AVAILABLE, run_at__lte=Now())


class Job(JobFields):
    """A job that can still run: available, scheduled, running, parked or blocked."""

    id = models.BigAutoField(primary_key=True)
    state = models.CharField(max_length=16, choices=JobState.choices, db_default="available")
    pending_deps = models.IntegerField(db_default=0)
    # A flow node's parents (its edges in): set as it is written, and as a running
    # node spawns more into it.
    parents = models.IntegerField(db_default=0)
    # Its parents' outputs by node key, all of them, handed down as they counted it
    # down (sql/flows.py): the claim hands them to the handler without a look into the
    # history for each parent. NULL where a parent's output was large, or some were
    # counted some other way (a rerun's reused nodes, a requeue's recount): the claim
    # then reads them from the history.
    parent_outputs = models.JSONField(null=True, blank=True)
    lease_owner = models.CharField(max_length=255, null=True, blank=True)
    claim_token = models.BigIntegerField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        db_table = "queue_engine_job"
        indexes = [
            models.Index(
                "queue",
                models.F("priority").desc(),
                "run_at",
                "id",
                name="qe_job_claim",
                condition=models.Q(state="available"),
            ),
            # A fair queue's keys with runnable jobs, and each key's next jobs (sql.CLAIM's
            # fair_candidates): the claim skips from key to key, in the order of the
            # keys' hashes so that where it starts spreads over them. Only jobs with a
            # key pay for it.
            models.Index(
                "queue",
                models.Func(
                    models.F("group_key"), function="hashtext", output_field=models.IntegerField()
                ),
                "group_key",
                models.F("priority").desc(),
                "run_at",
                "id",
                name="qe_job_fair",
                condition=models.Q(state="available", group_key__isnull=False),
            ),
            models.Index(
                fields=["run_at"], name="qe_job_scheduled", condition=models.Q(state="scheduled")
            ),
            # Parked jobs with a deadline (a signal's timeout, a durable sleep), for the
            # promoter; one parked with none has run_at far in the future (PARKED_FOREVER).
            models.Index(
                fields=["run_at"], name="qe_job_parked", condition=models.Q(state="parked")
            ),
            # Running rows are few (at most the fleet's concurrency): this one index
            # serves group caps, the rescuer and heartbeats, and leaves lease columns
            # unindexed so heartbeats are HOT updates.
            models.Index(
                fields=["queue", "group_key"],
                name="qe_job_running_group",
                condition=models.Q(state="running"),
            ),
            # A flow's live nodes by state (sql.REFRESH_FLOWS, at every settle of a node):
            # with the flow alone as the key, asking whether a node can still run walks
            # the index entries of every node settled since the last vacuum.
            models.Index(
                fields=["flow_id", "state"],
                name="qe_job_flow",
                condition=models.Q(flow_id__isnull=False),
            ),
            # Suspects, jobs rescued at least twice (sql.CLAIM's `suspects`): few, so
            # every claim can ask whether one waits in its queues.
            models.Index(
                fields=["queue"], name="qe_job_suspect", condition=models.Q(rescues__gte=2)
            ),
            # The console's count of a queue's blocked flow nodes, bounded (reads.queues).
            models.Index(
                fields=["queue"], name="qe_job_blocked", condition=models.Q(state="blocked")
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "dedup_key"],
                name="qe_job_dedup",
                condition=models.Q(dedup_key__isnull=False),
            ),
            models.CheckConstraint(
                condition=models.Q(priority__gte=-100, priority__lte=100),
                name="qe_job_priority_range",
            ),
        ]

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self._state.adding:
            self.apply_kind_defaults()
        super().save(*args, **kwargs)

    def apply_kind_defaults(self) -> None:
        """Fill what the caller left unset from the kind's definition, and the state from
        run_at: a future one makes the job scheduled, as an enqueue would (ORM enqueues)."""
        if _unset(self.state) and self._runs_later():
            self.state = JobState.SCHEDULED  # not claimed early, wakes no worker
        definition = registry.get(self.kind)
        if _unset(self.labels):
            # Only workers with the kind's labels may claim it. Always a value, never the
            # column's default: bulk_create writes DEFAULT::varchar[] for a row left to
            # its default beside rows with a value, which Postgres refuses.
            self.labels = list(definition.labels) if definition is not None else []
        if definition is None:
            return
        payload = self.payload if isinstance(self.payload, dict) else {}
        if _unset(self.queue):
            self.queue = definition.queue
        if _unset(self.priority):
            self.priority = definition.priority
        if _unset(self.max_attempts):
            self.max_attempts = definition.max_attempts
        if _unset(self.name):
            self.name = definition.display_name_for(payload)
        if self.group_key is None:
            self.group_key = definition.group_key_for(payload)

    def _runs_later(self) -> bool:
        """Whether the caller gave a run_at in the future."""
        run_at = self.run_at
        if run_at is None or isinstance(run_at, BaseExpression):
            return False  # the column's default, now(), or an expression
        field = self._meta.get_field("run_at")
        value = field.to_python(run_at) if isinstance(field, models.DateTimeField) else run_at
        if not isinstance(value, datetime):
            return False
        now = timezone.now()
        if timezone.is_naive(value) and timezone.is_aware(now):
            value = timezone.make_aware(value)  # as Django stores it (with a warning)
        elif timezone.is_aware(value) and timezone.is_naive(now):
            value = timezone.make_naive(value)
        return bool(value > now)


def _unset(value: object) -> bool:
    return isinstance(value, DatabaseDefault)


class JobRecord(JobFields):
    """A job that ended: succeeded, failed (the dead letter) or cancelled."""

    id = models.BigIntegerField(primary_key=True)
    state = models.CharField(max_length=16, choices=RecordState.choices)
    result = models.JSONField(null=True, blank=True)
    worker = models.CharField(max_length=255, blank=True, db_default="")
    finished_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "queue_engine_jobrecord"
        indexes = [
            models.Index("queue", "state", models.F("id").desc(), name="qe_rec_queue_state"),
            # No index on (state, id): each state has leaves of its own
            # (queue_engine.schema.partitions), so the primary key, (id, state, finished_at), walked
            # backwards, lists a state newest first, and every settle writes one index less.
            models.Index("kind", models.F("id").desc(), name="qe_rec_kind"),
            # History is appended in finishing order: a BRIN index is tiny and cheap to
            # keep, and enough for retention's range scans.
            BrinIndex(fields=["finished_at"], name="qe_rec_finished_brin"),
            models.Index(
                fields=["flow_id"], name="qe_rec_flow", condition=models.Q(flow_id__isnull=False)
            ),
            # Does this flow have a dead or cancelled node? Asked on every flow settle:
            # without it, a flow's whole history is scanned (10,000 nodes in a fan-out).
            models.Index(
                fields=["flow_id"],
                name="qe_rec_flow_ended_badly",
                condition=models.Q(flow_id__isnull=False, state__in=["failed", "cancelled"]),
            ),
        ]

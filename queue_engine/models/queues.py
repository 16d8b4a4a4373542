from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models.functions import Now


class QueueSettings(models.Model):
    """The settings of a queue; a null limit means "no limit"."""

    paused = models.BooleanField(db_default=False)
    max_concurrency = models.PositiveIntegerField(null=True, blank=True)
    rate_limit = models.PositiveIntegerField(null=True, blank=True)
    rate_window = models.PositiveIntegerField(db_default=60, help_text="seconds")
    rate_limit_per_key = models.BooleanField(
        db_default=False,
        help_text="the rate limit is each group key's own budget (jobs without a key share one)",
    )
    lock_duration = models.PositiveIntegerField(db_default=60, help_text="seconds")
    group_concurrency = models.PositiveIntegerField(null=True, blank=True)
    # Claims take turns between the group keys with runnable jobs (sql.CLAIM's
    # fair_candidates), weighted by GroupWeight; off: first come, first served.
    fair_share = models.BooleanField(db_default=False)
    retain_succeeded = models.PositiveIntegerField(
        db_default=86400, help_text="seconds to keep succeeded jobs"
    )
    retain_failed = models.PositiveIntegerField(
        db_default=7 * 86400, help_text="seconds to keep dead-lettered jobs"
    )
    retain_cancelled = models.PositiveIntegerField(
        db_default=86400, help_text="seconds to keep cancelled jobs"
    )

    class Meta:
        abstract = True


class QueueConfig(QueueSettings):
    """Per-queue settings, one row per queue name, created on first use.

    A new row starts from QUEUE_ENGINE's settings (`queue_engine.queue_settings`);
    `edited_fields` names the fields an operator changed since, which settings no
    longer set.
    """

    name = models.CharField(max_length=128, primary_key=True)
    edited_fields = ArrayField(
        models.CharField(max_length=32),
        blank=True,
        db_default=models.Value([], ArrayField(models.CharField(max_length=32))),
        help_text="fields an operator changed: settings no longer set them",
    )
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "queue_engine_queueconfig"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class QueueDefaults(QueueSettings):
    """The settings a queue first seen by an enqueue starts with: one row, copied by the
    enqueue trigger (which cannot read Django settings), written from QUEUE_ENGINE at
    every worker start and after migrate."""

    id = models.PositiveSmallIntegerField(primary_key=True, db_default=1)
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "queue_engine_queuedefaults"
        constraints = [
            models.CheckConstraint(condition=models.Q(id=1), name="qe_queuedefaults_one")
        ]

    def __str__(self) -> str:
        return "queue defaults"


class GroupLimit(models.Model):
    """One group key's own limits, overriding the queue's: its cap over the queue's
    group_concurrency, its rate over the queue's rate_limit (when that applies per key).
    A null field keeps the queue's value."""

    queue = models.CharField(max_length=128)
    group_key = models.CharField(max_length=255)
    max_concurrency = models.PositiveIntegerField(null=True, blank=True)
    rate_limit = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        db_table = "queue_engine_grouplimit"
        constraints = [
            models.UniqueConstraint(fields=["queue", "group_key"], name="qe_grouplimit_key"),
        ]

    def __str__(self) -> str:
        limits = [f"<= {self.max_concurrency}"] if self.max_concurrency is not None else []
        if self.rate_limit is not None:
            limits.append(f"{self.rate_limit} per window")
        return f"{self.queue}/{self.group_key} {', '.join(limits)}"


class GroupWeight(models.Model):
    """A key's share of its fair queue's claims (QueueSettings.fair_share); a key with
    no row has weight 1."""

    queue = models.CharField(max_length=128)
    group_key = models.CharField(max_length=255)
    weight = models.PositiveIntegerField()

    class Meta:
        db_table = "queue_engine_groupweight"
        constraints = [
            models.UniqueConstraint(fields=["queue", "group_key"], name="qe_groupweight_key"),
            models.CheckConstraint(condition=models.Q(weight__gte=1), name="qe_groupweight_min"),
        ]

    def __str__(self) -> str:
        return f"{self.queue}/{self.group_key} weighs {self.weight}"


class ClaimLog(models.Model):
    """How many jobs of a rate-limited queue started in a short span (a 600th of its rate
    window, a 60th per key, at least 0.1 s), stamped with the span's end; pruned by the leader. Per budget:
    the queue's ('') or, when its rate limit applies per key, the group key's."""

    id = models.BigAutoField(primary_key=True)
    queue = models.CharField(max_length=128)
    group_key = models.CharField(max_length=255, db_default="")
    at = models.DateTimeField(db_default=Now())
    count = models.IntegerField()

    class Meta:
        db_table = "queue_engine_claimlog"
        constraints = [
            models.UniqueConstraint(fields=["queue", "group_key", "at"], name="qe_claimlog_span")
        ]

    def __str__(self) -> str:
        return f"{self.queue}: {self.count} at {self.at}"

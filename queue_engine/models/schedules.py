from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class MissedFirePolicy(models.TextChoices):
    RUN_ONCE = "run_once", "run once for all missed fire times"
    SKIP = "skip", "skip missed fire times"


class ScheduleSource(models.TextChoices):
    CODE = "code"
    SETTINGS = "settings"
    ADMIN = "admin"


class Schedule(models.Model):
    """A recurring job: every N seconds, or on a 5-field cron expression in a time zone.

    Declared with `queue_engine.schedules` (idempotent upserts); fired by the
    leader, once per fire time.
    """

    id = models.BigAutoField(primary_key=True)
    name = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=255)
    payload = models.JSONField(
        default=dict,
        blank=True,
        help_text='arguments by name; a "{fire_time}" value becomes the ISO fire time',
    )
    # Null, not "": "no override" and "no cron" (the check constraint) are absent values.
    queue = models.CharField(
        max_length=128,
        null=True,
        blank=True,
        help_text="overrides the kind's queue",
    )
    priority = models.SmallIntegerField(
        null=True, blank=True, help_text="overrides the kind's priority"
    )
    every = models.DurationField(null=True, blank=True, help_text="interval schedules")
    cron = models.CharField(
        max_length=100,
        null=True,
        blank=True,
        help_text='5-field cron expression, e.g. "*/5 * * * *"',
    )
    timezone = models.CharField(
        max_length=64, default="UTC", help_text="IANA time zone the cron expression is read in"
    )
    enabled = models.BooleanField(default=True)
    missed_fire_policy = models.CharField(
        max_length=16, choices=MissedFirePolicy.choices, default=MissedFirePolicy.RUN_ONCE
    )
    next_fire_at = models.DateTimeField()
    last_fire_at = models.DateTimeField(
        null=True, blank=True, help_text="the fire time of the last job enqueued"
    )
    last_job_id = models.BigIntegerField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    source = models.CharField(
        max_length=16, choices=ScheduleSource.choices, default=ScheduleSource.CODE
    )
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "queue_engine_schedule"
        ordering = ["name"]
        indexes = [
            models.Index(
                fields=["next_fire_at"], name="qe_schedule_due", condition=models.Q(enabled=True)
            )
        ]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(every__isnull=False, cron__isnull=True)
                    | models.Q(every__isnull=True, cron__isnull=False)
                ),
                name="qe_schedule_every_xor_cron",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def timing(self) -> str:
        if self.cron is not None:
            return f"cron {self.cron} ({self.timezone})"
        return f"every {self.every}"

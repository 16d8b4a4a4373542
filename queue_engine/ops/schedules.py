"""Operator actions on schedules: enable, disable, run now, remove. Each runs in one
transaction with the AuditEvent that records it; declaring schedules (an application's
code, or settings) lives in `queue_engine.schedules`."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from queue_engine.audit import audit
from queue_engine.enqueueing.single import enqueue
from queue_engine.exceptions import EnqueueError, ScheduleError
from queue_engine.models import Job, Schedule
from queue_engine.schedules.api import database_now, fire_spec, recurrence_of


def remove_schedule(name: str, *, actor: Any = None) -> None:
    """Delete a schedule; jobs it already enqueued are left alone."""
    with transaction.atomic():
        deleted, _ = Schedule.objects.filter(name=name).delete()
        if not deleted:
            raise ScheduleError(f"Cannot remove schedule {name!r}: there is no such schedule.")
        audit(actor, "schedule_remove", "schedule", name, 1)


def enable_schedule(name: str, *, actor: Any = None) -> Schedule:
    """Resume firing from the next fire time after now (missed times are not replayed)."""
    return _set_enabled(name, True, actor)


def disable_schedule(name: str, *, actor: Any = None) -> Schedule:
    return _set_enabled(name, False, actor)


def run_schedule_now(name: str, *, actor: Any = None) -> Job:
    """Enqueue the schedule's job now, outside its timing (which stays as it is).

    While an earlier "run now" job of this schedule is still waiting or running,
    that job is returned instead of a second one.
    """
    with transaction.atomic():
        schedule = Schedule.objects.filter(name=name).first()
        if schedule is None:
            raise ScheduleError(f"Cannot run schedule {name!r} now: there is no such schedule.")
        spec = fire_spec(
            name=schedule.name,
            kind=schedule.kind,
            payload=schedule.payload,
            queue=schedule.queue,
            priority=schedule.priority,
            fire_time=database_now(),
            missed=0,
        )
        spec.dedup_key = f"schedule:{name}:run_now"
        spec.meta = {**(spec.meta or {}), "run_now": True}
        try:
            job = enqueue(spec)
        except EnqueueError as exc:
            raise ScheduleError(f"Cannot run schedule {name!r} now: {exc}") from None
        audit(actor, "schedule_run_now", "schedule", name, 1, job=job.id)
    return job


def _set_enabled(name: str, enabled: bool, actor: Any) -> Schedule:
    with transaction.atomic():
        schedule = Schedule.objects.select_for_update().filter(name=name).first()
        if schedule is None:
            action = "enable" if enabled else "disable"
            raise ScheduleError(f"Cannot {action} schedule {name!r}: there is no such schedule.")
        if schedule.enabled == enabled:
            return schedule
        now = database_now()
        schedule.enabled = enabled
        if enabled:
            schedule.next_fire_at = recurrence_of(schedule).first_after(now)
        schedule.updated_at = now
        schedule.save(update_fields=["enabled", "next_fire_at", "updated_at"])
        audit(actor, "schedule_enable" if enabled else "schedule_disable", "schedule", name, 1)
    return schedule

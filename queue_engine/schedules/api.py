"""Recurring jobs: declare, change, remove, pause and trigger schedules.

Declarations are idempotent upserts keyed by name, meant to run at every
start-up (from `QUEUE_ENGINE["SCHEDULES"]` or from code): declaring the same
schedule again changes nothing, and keeps its next fire time. Everything is
validated before the first write, so a bad declaration writes nothing.

The leader fires due schedules (`queue_engine.worker.services.scheduler`):
each fire time enqueues one job, with the dedup key `schedule:<name>:<time>`,
in the transaction that moves the schedule to its next fire time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, TypedDict, Unpack

from django.db import connection, transaction

from queue_engine import sql
from queue_engine.audit import audit
from queue_engine.conf import option
from queue_engine.definition.job import JobDefinition
from queue_engine.definition.registry import registry
from queue_engine.enqueueing.prepare import JobSpec, prepare
from queue_engine.exceptions import EnqueueError, ScheduleError
from queue_engine.models import Schedule
from queue_engine.schedules.recurrence import Recurrence, check_cron, check_every, check_timezone

Missed = Literal["run_once", "skip"]
Source = Literal["code", "settings", "admin"]
FIRE_TIME = "{fire_time}"  # a payload value replaced by the ISO fire time
SETTINGS_KEYS = {
    "kind",
    "cron",
    "every",
    "timezone",
    "payload",
    "queue",
    "priority",
    "enabled",
    "missed",
}


class ScheduleOptions(TypedDict, total=False):
    """What a schedule's job and firing take besides its timing, each optional.

    payload: the job's arguments by name; a value "{fire_time}" becomes the ISO fire time.
    queue, priority: override the kind's. enabled: None (the default) keeps an existing
    schedule's state, and a new schedule starts enabled. missed: "run_once" (default) or
    "skip" for fire times missed while nothing ran. source: who declares it ("code").
    """

    payload: Mapping[str, Any] | None
    queue: str | None
    priority: int | None
    enabled: bool | None
    missed: Missed
    source: Source


@dataclass(frozen=True)
class Declaration:
    """A validated schedule, ready to write."""

    name: str
    kind: str
    payload: dict[str, Any]
    queue: str | None
    priority: int | None
    recurrence: Recurrence
    enabled: bool | None
    missed: Missed
    source: Source


def upsert_interval(
    name: str,
    job: JobDefinition | str,
    *,
    every: float | timedelta,
    actor: Any = None,
    **options: Unpack[ScheduleOptions],
) -> Schedule:
    """Declare a job that runs every `every` seconds, first one interval from now.

    `enabled=None` keeps an existing schedule's state (an operator may have
    disabled it); a new schedule starts enabled. The options: `ScheduleOptions`.
    """
    return save_declaration(declaration(name, job, every=every, **options), actor=actor)


def upsert_cron(
    name: str,
    job: JobDefinition | str,
    *,
    cron: str,
    timezone: str = "UTC",
    actor: Any = None,
    **options: Unpack[ScheduleOptions],
) -> Schedule:
    """Declare a job that runs on a 5-field cron expression read in `timezone`. The
    options: `ScheduleOptions`."""
    return save_declaration(
        declaration(name, job, cron=cron, timezone=timezone, **options), actor=actor
    )


def declaration(
    name: str,
    job: JobDefinition | str,
    *,
    every: float | timedelta | None = None,
    cron: str | None = None,
    timezone: str = "UTC",
    **options: Unpack[ScheduleOptions],
) -> Declaration:
    """Check a schedule without writing anything (for forms); `save_declaration` writes it."""
    unknown = sorted(set(options) - ScheduleOptions.__optional_keys__)
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(unknown)}")
    if (every is None) == (cron is None):
        raise ScheduleError(f"Schedule {name!r} needs exactly one of every (seconds) or cron.")
    if cron is not None:
        check_timezone(timezone)
        recurrence = Recurrence(cron=check_cron(cron), timezone=timezone)
    else:
        if timezone != "UTC":
            raise ScheduleError(
                f"Schedule {name!r}: a time zone only applies to cron "
                "schedules; intervals are counted in seconds."
            )
        recurrence = Recurrence(every=check_every(every))
    return _declaration(name, job, recurrence, options)


def declare_configured(schedules: Mapping[str, Any] | None = None) -> list[str]:
    """Declare every schedule of QUEUE_ENGINE["SCHEDULES"]; remove settings ones since dropped.

    All entries are checked before anything is written. Returns the names.
    """
    configured = option("SCHEDULES") if schedules is None else schedules
    declarations = settings_declarations(configured)
    with transaction.atomic():
        for d in declarations:
            save_declaration(d, actor="settings")
        stale = Schedule.objects.filter(source="settings").exclude(
            name__in=[d.name for d in declarations]
        )
        for name in list(stale.values_list("name", flat=True)):
            Schedule.objects.filter(name=name).delete()
            audit("settings", "schedule_remove", "schedule", name, 1)
    return [d.name for d in declarations]


def settings_declarations(configured: object) -> list[Declaration]:
    """Validate QUEUE_ENGINE["SCHEDULES"] without touching the database."""
    if not isinstance(configured, Mapping):
        raise ScheduleError(
            "QUEUE_ENGINE['SCHEDULES'] must map schedule names to dicts, for example "
            '{"nightly": {"kind": "app.jobs.report", "cron": "0 3 * * *"}}.'
        )
    declarations = []
    for name, entry in configured.items():
        where = f"QUEUE_ENGINE['SCHEDULES'][{name!r}]"
        if not isinstance(entry, Mapping):
            raise ScheduleError(
                f"{where} must be a dict with at least 'kind' and 'cron' or 'every'."
            )
        unknown = sorted(set(entry) - SETTINGS_KEYS)
        if unknown:
            raise ScheduleError(
                f"{where} has unknown key(s) {', '.join(unknown)}; the keys are "
                f"{', '.join(sorted(SETTINGS_KEYS))}."
            )
        if ("cron" in entry) == ("every" in entry):
            raise ScheduleError(f"{where} needs exactly one of 'cron' or 'every'.")
        if "kind" not in entry:
            raise ScheduleError(f"{where} needs a 'kind' (the job kind to enqueue).")
        try:
            declarations.append(
                declaration(
                    name,
                    entry["kind"],
                    every=entry.get("every"),
                    cron=entry.get("cron"),
                    timezone=entry.get("timezone", "UTC"),
                    payload=entry.get("payload"),
                    queue=entry.get("queue"),
                    priority=entry.get("priority"),
                    enabled=entry.get("enabled"),
                    missed=entry.get("missed", "run_once"),
                    source="settings",
                )
            )
        except ScheduleError as exc:
            raise ScheduleError(f"{where}: {exc}") from None
    return declarations


def fire_spec(
    *,
    name: str,
    kind: str,
    payload: Mapping[str, Any],
    queue: str | None,
    priority: int | None,
    fire_time: datetime,
    missed: int,
) -> JobSpec:
    """The job one fire of a schedule enqueues (its dedup key is unique per fire time)."""
    at = fire_time.astimezone(UTC).isoformat()
    return JobSpec(
        kind=kind,
        payload=render_payload(payload, at),
        queue=queue,
        priority=priority,
        dedup_key=f"schedule:{name}:{at}",
        meta={"schedule": name, "fire_time": at, "missed": missed},
    )


def render_payload(template: Any, fire_time: str) -> Any:
    if template == FIRE_TIME:
        return fire_time
    if isinstance(template, Mapping):
        return {k: render_payload(v, fire_time) for k, v in template.items()}
    if isinstance(template, list):
        return [render_payload(v, fire_time) for v in template]
    return template


def _declaration(
    name: object, job: JobDefinition | str, recurrence: Recurrence, options: ScheduleOptions
) -> Declaration:
    payload = options.get("payload")
    queue, priority = options.get("queue"), options.get("priority")
    enabled, missed = options.get("enabled"), options.get("missed", "run_once")
    if not isinstance(name, str) or not 0 < len(name.strip()) <= 200 or name != name.strip():
        raise ScheduleError(
            f"A schedule name must be 1 to 200 characters without surrounding spaces, not {name!r}."
        )
    if missed not in ("run_once", "skip"):
        raise ScheduleError(
            f"Schedule {name!r}: missed must be 'run_once' or 'skip', not {missed!r}."
        )
    if enabled is not None and not isinstance(enabled, bool):
        raise ScheduleError(f"Schedule {name!r}: enabled must be True or False.")
    definition = job if isinstance(job, JobDefinition) else None
    kind = job.kind if isinstance(job, JobDefinition) else job
    if not isinstance(kind, str) or not kind:
        raise ScheduleError(
            f"Schedule {name!r}: give a @job function or a kind name, not {kind!r}."
        )
    if payload is not None and not isinstance(payload, Mapping):
        raise ScheduleError(
            f"Schedule {name!r}: the payload must be a dict of the job's arguments by name "
            f"(or None for none), not a {type(payload).__name__} ({payload!r:.60})."
        )
    template = dict(payload or {})
    example = fire_spec(
        name=name,
        kind=kind,
        payload=template,
        queue=queue,
        priority=priority,
        fire_time=datetime(2000, 1, 1, tzinfo=UTC),
        missed=0,
    )
    _check_arguments(name, definition or registry.get(kind), example.payload)
    try:
        prepare(example, definition)  # kind, queue, priority and payload, as at enqueue
    except EnqueueError as exc:
        raise ScheduleError(f"Schedule {name!r}: {exc}") from None
    except Exception as exc:  # the kind's name or group_key function failed on this payload
        raise ScheduleError(
            f"Schedule {name!r}: {kind}'s name or group key cannot be computed from this "
            f"payload ({type(exc).__name__}: {exc}); fix the payload."
        ) from None
    return Declaration(
        name=name,
        kind=kind,
        payload=template,
        queue=queue,
        priority=priority,
        recurrence=recurrence,
        enabled=enabled,
        missed=missed,
        source=options.get("source", "code"),
    )


def _check_arguments(
    name: str, definition: JobDefinition | None, payload: Mapping[str, Any]
) -> None:
    if definition is None:
        return
    try:
        args, kwargs = definition.call_arguments(payload)
        definition.signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise ScheduleError(
            f"Schedule {name!r}: the payload does not fit the arguments of {definition.kind} "
            f"({exc}); give each required argument by name."
        ) from None


def save_declaration(d: Declaration, *, actor: Any = None) -> Schedule:
    """Write a checked declaration (idempotent: an unchanged one writes nothing)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql.LOCK_SCHEDULE_NAME, [d.name])
        now = database_now()
        # Locked: a leader firing it meanwhile has its next fire time written first,
        # and it is read here, not written back over.
        schedule = Schedule.objects.select_for_update().filter(name=d.name).first()
        created = schedule is None
        if schedule is None:
            schedule = Schedule(name=d.name)
        before = _described(schedule) if not created else {}
        same_timing = (
            not created
            and schedule.every == d.recurrence.every
            and schedule.cron == d.recurrence.cron
            and schedule.timezone == d.recurrence.timezone
        )
        was_enabled = schedule.enabled if not created else False
        schedule.kind, schedule.payload = d.kind, d.payload
        schedule.queue, schedule.priority = d.queue, d.priority
        schedule.every, schedule.cron = d.recurrence.every, d.recurrence.cron
        schedule.timezone = d.recurrence.timezone
        schedule.missed_fire_policy = d.missed
        schedule.source = d.source
        if d.enabled is not None:
            schedule.enabled = d.enabled
        elif created:
            schedule.enabled = True
        if not same_timing or (schedule.enabled and not was_enabled):
            schedule.next_fire_at = d.recurrence.first_after(now)
        after = _described(schedule)
        changes = {k: [before.get(k), v] for k, v in after.items() if before.get(k) != v}
        if not created and not changes:
            return schedule
        schedule.updated_at = now
        schedule.save()
        audit(
            actor,
            "schedule_create" if created else "schedule_update",
            "schedule",
            d.name,
            1,
            changes={k: [_plain(a), _plain(b)] for k, (a, b) in changes.items()},
        )
    return schedule


def recurrence_of(schedule: Schedule) -> Recurrence:
    return Recurrence(every=schedule.every, cron=schedule.cron, timezone=schedule.timezone)


def _described(schedule: Schedule) -> dict[str, Any]:
    return {
        "kind": schedule.kind,
        "payload": schedule.payload,
        "queue": schedule.queue,
        "priority": schedule.priority,
        "every": schedule.every,
        "cron": schedule.cron,
        "timezone": schedule.timezone,
        "enabled": schedule.enabled,
        "missed": schedule.missed_fire_policy,
        "source": schedule.source,
    }


def _plain(value: Any) -> Any:
    return value.total_seconds() if isinstance(value, timedelta) else value


def database_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute(sql.DATABASE_NOW)
        now: datetime = cursor.fetchone()[0]
    return now

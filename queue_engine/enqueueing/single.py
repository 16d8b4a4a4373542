"""One job into the queue, on Django's connection (so in the caller's transaction); a dedup key returns the live holder."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

from django.core.signals import setting_changed
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import signals
from django.db.models.base import ModelState
from django.dispatch import receiver

from queue_engine import sql
from queue_engine.conf import snapshot
from queue_engine.connections import bound_cursor, prepared, raw_cursor
from queue_engine.definition.job import (
    EnqueueOptions,
    JobDefinition,
)
from queue_engine.enqueueing.dedup import DEDUP_ATTEMPTS, insert_or_find_holder
from queue_engine.enqueueing.hooks import producing, resolved
from queue_engine.enqueueing.prepare import (
    JobSpec,
    KindOptions,
    Row,
    kind_options,
    prepare,
    spec_for,
)
from queue_engine.exceptions import (
    EnqueueError,
    InvalidPayloadError,
    PayloadError,
)
from queue_engine.models import Job
from queue_engine.payloads import dump_json


@producing(lambda spec: spec.kind)
def enqueue(spec: JobSpec) -> Job:
    """Enqueue one job of any kind; with a dedup key, an existing live job is returned."""
    return _insert(prepare(spec), debounce=False)


@producing(lambda row: row.kind)
def insert_row(row: Row) -> Job:
    return _insert(row, debounce=False)


@producing(lambda definition, *args, **kwargs: definition.kind)
def enqueue_definition(
    definition: JobDefinition, payload: dict[str, Any], *, debounce: bool = False
) -> Job:
    if not debounce and not resolved().active:
        plain = _plain_kind(definition)
        if plain is not None:
            return _insert_plain(plain, payload)
    spec = spec_for(definition, payload)
    if debounce and not spec.dedup_key:
        raise EnqueueError(
            f"{definition.kind}: enqueue_debounced needs a dedup key, "
            "for example .using(dedup_key='user:42', delay=5).enqueue_debounced(...)."
        )
    return _insert(prepare(spec, definition), debounce=debounce)


@producing(lambda spec: spec.kind)
def enqueue_debounced(spec: JobSpec) -> Job:
    if not spec.dedup_key:
        raise EnqueueError(f"{spec.kind}: enqueue_debounced needs a dedup_key.")
    return _insert(prepare(spec), debounce=True)


def _insert(row: Row, *, debounce: bool) -> Job:
    use_prepared = prepared()
    if row.dedup_key is None:  # one statement: atomic on its own, no savepoint needed
        db = connections[DEFAULT_DB_ALIAS]
        raw = raw_cursor(db)
        with db.wrap_database_errors:
            if row.plain:
                values = (row.queue, row.kind, row.payload, row.max_attempts)
                raw.execute(sql.INSERT_PLAIN_JOB, values, prepare=use_prepared)
                job_id, created_at = raw.fetchone() or (None, None)
                inserted: tuple[Any, ...] = (job_id, "available", created_at, created_at, False)
            else:
                raw.execute(sql.INSERT_JOB_NUMBERED, row.values(), prepare=use_prepared)
                inserted = raw.fetchone() or ()  # INSERT .. RETURNING: always a row
        return _job(row, inserted, deduplicated=False)
    params = row.params()
    with transaction.atomic(), bound_cursor() as cursor:
        for _ in range(DEDUP_ATTEMPTS):
            found, holder = insert_or_find_holder(
                cursor,
                sql.UPSERT_JOB_DEBOUNCED if debounce else sql.INSERT_JOB_DEDUP,
                params,
                row.kind,
                row.dedup_key,
                prepare=use_prepared,
            )
            if found is not None:
                if debounce and found[-1] and found[1] == "available":
                    cursor.execute(sql.NOTIFY_WAKE_JOB, [found[0]])
                return _job(row, found, deduplicated=found[-1])
            if holder is None:
                continue  # the holder ended between the two statements: insert again
            existing = Job.objects.filter(pk=holder).first()
            if existing is None:
                continue  # and that holder ended since: insert again
            if debounce and existing.state == "running":
                cursor.execute(sql.RELEASE_RUNNING_DEDUP_KEY, [row.kind, row.dedup_key])
                continue
            existing.deduplicated = True  # type: ignore[attr-defined]
            return existing
    raise EnqueueError(f"{row.kind}: dedup key {row.dedup_key!r} kept changing hands; try again.")


@dataclass(frozen=True, slots=True)
class PlainKind:
    """What a definition without overrides decides for every job it enqueues as a plain
    job (`Row.plain`): the single enqueue's fast path checks only the payload."""

    queue: str
    kind: str
    max_attempts: int
    max_bytes: int
    what: str
    prepare: bool | None
    fields: dict[str, Any]  # the new Job's fields that do not depend on the call


class _Generation:
    """Changes whenever Django's settings do (override_settings in tests)."""


_settings_generation = _Generation()


@receiver(setting_changed)
def _settings_changed(**kwargs: Any) -> None:
    global _settings_generation
    _settings_generation = _Generation()


def _plain_kind(definition: JobDefinition) -> PlainKind | None:
    """The definition's PlainKind, or None when its jobs are not plain; cached on the
    definition until the settings change."""
    generation = _settings_generation
    cached: tuple[_Generation, PlainKind | None] | None = definition.__dict__.get("_plain")
    if cached is not None and cached[0] is generation:
        return cached[1]
    opts = snapshot()
    decided = kind_options(spec_for(definition, {}), definition, opts)
    plain = None
    if (
        definition.options == EnqueueOptions()
        and definition.name is None
        and definition.group_key is None
        and decided.plain
    ):
        fields = dict.fromkeys(_job_attnames())
        fields.update(_constant_fields(decided, definition.kind))
        fields["name"] = ""  # the column's default, as stored
        plain = PlainKind(
            queue=decided.queue,
            kind=definition.kind,
            max_attempts=decided.max_attempts,
            max_bytes=opts["MAX_PAYLOAD_BYTES"],
            what=f"{definition.kind}: the payload",
            prepare=prepared(),
            fields=fields,
        )
    object.__setattr__(definition, "_plain", (generation, plain))
    return plain


def _insert_plain(plain: PlainKind, payload: dict[str, Any]) -> Job:
    """`_insert` of a plain job: `payload` must be the caller's own copy."""
    try:
        text = dump_json(payload, what=plain.what, max_bytes=plain.max_bytes)
    except PayloadError as exc:
        raise InvalidPayloadError(str(exc)) from None
    db = connections[DEFAULT_DB_ALIAS]
    raw = raw_cursor(db)
    with db.wrap_database_errors:
        values = (plain.queue, plain.kind, text, plain.max_attempts)
        raw.execute(sql.INSERT_PLAIN_JOB, values, prepare=plain.prepare)
        job_id, created_at = raw.fetchone() or (None, None)
    fields = plain.fields.copy()
    fields["id"] = job_id
    fields["payload"] = payload
    fields["run_at"] = fields["created_at"] = created_at
    fields["labels"] = []
    fields["errors"] = []
    fields["meta"] = {}
    return _make_job(fields, deduplicated=False)


def _constant_fields(decided: KindOptions, kind: str) -> dict[str, Any]:
    """The fields of a newly inserted job that its kind and options decide."""
    return {
        "queue": decided.queue,
        "kind": kind,
        "state": "available",
        "priority": decided.priority,
        "max_attempts": decided.max_attempts,
        "attempt": 0,
        "progress_message": "",
        "rescues": 0,
        "pending_deps": 0,
        "parents": 0,
    }


def _job(row: Row, returned: tuple[Any, ...], *, deduplicated: bool) -> Job:
    """The Job the insert made, without a query."""
    job_id, state, run_at, created_at, _ = returned
    fields = dict.fromkeys(_job_attnames())
    fields.update(_constant_fields(row.decided, row.kind))
    fields["id"] = job_id
    fields["name"] = row.name
    fields["state"] = state
    fields["payload"] = row.payload_value
    fields["dedup_key"] = row.dedup_key
    fields["group_key"] = row.group_key
    fields["labels"] = row.labels
    fields["meta"] = row.meta_value
    fields["run_at"] = run_at
    fields["created_at"] = created_at
    fields["backoff"] = json.loads(row.backoff) if row.backoff else None
    fields["errors"] = []
    return _make_job(fields, deduplicated=deduplicated)


def _make_job(fields: dict[str, Any], *, deduplicated: bool) -> Job:
    """A Job of every field's value (`fields`, which it may keep), as Model.from_db builds
    a loaded row, but with its fields set all at once instead of one setattr each in
    __init__ (a fifth of a single enqueue's Python time)."""
    if signals.pre_init.has_listeners(Job) or signals.post_init.has_listeners(Job):
        names = _job_attnames()
        job = Job.from_db(DEFAULT_DB_ALIAS, list(names), [fields[name] for name in names])
        job.deduplicated = deduplicated  # type: ignore[attr-defined]
        return job
    job = Job.__new__(Job)
    state = fields["_state"] = ModelState()
    state.adding = False
    state.db = DEFAULT_DB_ALIAS
    fields["deduplicated"] = deduplicated
    job.__dict__ = fields
    return job


@functools.cache
def _job_attnames() -> tuple[str, ...]:
    return tuple(f.attname for f in Job._meta.concrete_fields)
